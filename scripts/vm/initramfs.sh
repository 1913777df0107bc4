#!/usr/bin/env bash
# initramfs.sh KERNEL_DIR: builds the guest's initramfs (a gzipped newc cpio)
# from the static busybox, the modules of KERNEL_DIR (see kernel.sh), init.sh
# as /init, and the payload the guest copies to /.vm (stage2.sh, the systemd
# units). Prints its path. The image is cached under a name made from the
# hash of everything in it, so an edit to any input builds a new one and an
# unchanged one is reused.
# Usage: scripts/vm/initramfs.sh "$(scripts/vm/kernel.sh)"
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$here/lib.sh"

kdir=${1:?usage: initramfs.sh KERNEL_DIR}
busybox=/bin/busybox
[[ -x $busybox ]] || vm_die "$busybox is missing: apt-get install -y busybox-static (or scripts/vm/deps.sh)"
if command -v file >/dev/null && ! file -L "$busybox" | grep -q 'statically linked'; then
	vm_die "$busybox is not statically linked: apt-get install -y busybox-static"
fi

inputs=("$busybox" "$here/init.sh" "$here/stage2.sh" "$here"/systemd/*)
for m in "${VM_MODULES[@]}"; do inputs+=("$kdir/modules/$m.ko"); done
hash=$( (printf '%s\n' "${VM_MODULES[@]}"; cat "${inputs[@]}") | sha256sum | cut -c1-16)
cache=$(vm_cache_dir)/initramfs
out=$cache/initramfs-$hash.cpio.gz
if [[ -s $out ]]; then
	printf '%s\n' "$out"
	exit 0
fi

mkdir -p "$cache"
tmp=$(mktemp -d "$cache/.build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
root=$tmp/root
mkdir -p "$root"/{bin,dev,proc,sys,newroot,modules,payload/systemd}
cp "$busybox" "$root/bin/busybox"
install -m 0755 "$here/init.sh" "$root/init"
install -m 0755 "$here/stage2.sh" "$root/payload/stage2.sh"
cp "$here"/systemd/* "$root/payload/systemd/"
for m in "${VM_MODULES[@]}"; do cp "$kdir/modules/$m.ko" "$root/modules/"; done
printf '%s\n' "${VM_MODULES[@]}" >"$root/modules/order"
(cd "$root" && find . | sort | "$busybox" cpio -o -H newc 2>/dev/null) | gzip -1 >"$tmp/img"
mv "$tmp/img" "$out"
# Images of older inputs are of no use any more (a day's grace for a run
# that may still be booting one).
find "$cache" -maxdepth 1 -name 'initramfs-*.cpio.gz' ! -path "$out" -mmin +1440 -delete
vm_log "built $out"
printf '%s\n' "$out"
