#!/usr/bin/env bash
# deps.sh: installs, only when missing, the Debian packages the guest suite
# needs on the host (qemu-system-x86 for the emulator, busybox-static for
# the initramfs), then fetches and caches the guest's kernel and builds its
# initramfs, so that a test's time is not spent downloading. bubblewrap,
# which the guest takes from the host's /usr, comes from
# scripts/install-deps.sh. Run as root on a fresh Debian machine.
# Usage: scripts/vm/deps.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$here/lib.sh"

missing=()
command -v qemu-system-x86_64 >/dev/null 2>&1 || missing+=(qemu-system-x86)
dpkg-query -W -f '${Status}' busybox-static 2>/dev/null | grep -q 'ok installed' || missing+=(busybox-static)
if [[ ${#missing[@]} -gt 0 ]]; then
	if [[ $(id -u) != 0 ]]; then
		vm_die "missing packages: ${missing[*]}; run as root or: sudo apt-get install -y ${missing[*]}"
	fi
	vm_log "installing: ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null 2>&1 ||
		{ apt-get update >/dev/null && apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null; }
fi
kdir=$("$here/kernel.sh")
"$here/initramfs.sh" "$kdir" >/dev/null
