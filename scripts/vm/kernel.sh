#!/usr/bin/env bash
# kernel.sh: fetches Debian's amd64 kernel (the linux-image-*-amd64 package
# that linux-image-amd64 depends on), extracts its vmlinuz and the few modules
# the guest loads into the cache, and prints that kernel's cache directory:
#
#   DIR/vmlinuz   DIR/config   DIR/modules/NAME.ko   DIR/release
#
# Idempotent: a kernel already extracted is reused without asking apt. With
# no apt answer (no package lists), the newest cached kernel is used.
# Usage: scripts/vm/kernel.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$here/lib.sh"

cache=$(vm_cache_dir)/kernel
mkdir -p "$cache"

# The concrete package, e.g. linux-image-6.1.0-57-amd64.
pkg=$(apt-cache depends linux-image-amd64 2>/dev/null |
	sed -nE 's/^ *Depends: (linux-image-[0-9][^ ]*-amd64)$/\1/p' | head -n1 || true)
if [[ -z $pkg ]]; then
	# No package lists: fall back to what is cached.
	pkg=$(find "$cache" -mindepth 2 -maxdepth 2 -name .complete -printf '%h\n' 2>/dev/null |
		xargs -r -n1 basename | sort -V | tail -n1)
	[[ -n $pkg ]] || vm_die "apt-cache knows no linux-image-amd64 and no kernel is cached (apt-get update?)"
	vm_log "apt-cache has no answer; using the cached $pkg"
fi
dir=$cache/$pkg
if [[ -e $dir/.complete ]]; then
	printf '%s\n' "$dir"
	exit 0
fi

tmp=$(mktemp -d "$cache/.fetch.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
vm_log "fetching $pkg"
# apt-get download writes into the working directory; the _apt user may not
# be able to, which only costs a warning.
(cd "$tmp" && apt-get download "$pkg" >/dev/null 2>"$tmp/apt.err") ||
	{ cat "$tmp/apt.err" >&2; vm_die "apt-get download $pkg failed"; }
dpkg-deb -x "$tmp"/"$pkg"_*.deb "$tmp/x"

release=${pkg#linux-image-}
out=$tmp/out
mkdir -p "$out/modules"
cp "$tmp/x/boot/vmlinuz-$release" "$out/vmlinuz"
cp "$tmp/x/boot/config-$release" "$out/config"
printf '%s\n' "$release" >"$out/release"
for m in "${VM_MODULES[@]}"; do
	f=$(find "$tmp/x/lib/modules/$release" -name "$m.ko" -print -quit)
	[[ -n $f ]] || vm_die "module $m.ko is not in $pkg"
	cp "$f" "$out/modules/$m.ko"
done
touch "$out/.complete"
rm -rf "$dir"
mv "$out" "$dir" # atomic on the same filesystem: a concurrent run sees all or nothing
vm_log "kernel $release cached in $dir"
printf '%s\n' "$dir"
