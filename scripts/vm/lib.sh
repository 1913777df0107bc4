# shellcheck shell=bash
# lib.sh: what the scripts in scripts/vm share. Sourced, never run.

# The modules the initramfs loads, in this order (each one needs the ones
# before it): virtio over PCI, then the 9p filesystem over virtio; overlay
# makes the guest's /etc writable over the host's read-only one.
# shellcheck disable=SC2034 # used by the scripts that source this file
VM_MODULES=(virtio_ring virtio virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci
	netfs fscache 9pnet 9pnet_virtio 9p overlay)

# vm_cache_dir prints the cache directory for the kernel and the initramfs
# (created when missing): $AGENTSANDBOX_VM_CACHE when set, else
# /var/cache/agentsandbox-vm as root, else $XDG_CACHE_HOME/agentsandbox-vm.
vm_cache_dir() {
	local dir=${AGENTSANDBOX_VM_CACHE:-}
	if [[ -z $dir ]]; then
		if [[ $(id -u) == 0 ]]; then
			dir=/var/cache/agentsandbox-vm
		else
			dir=${XDG_CACHE_HOME:-$HOME/.cache}/agentsandbox-vm
		fi
	fi
	mkdir -p "$dir"
	printf '%s\n' "$dir"
}

# vm_log MESSAGE...: one line on stderr, prefixed with the calling script.
vm_log() { printf '%s: %s\n' "$(basename "$0")" "$*" >&2; }

# vm_die MESSAGE...: vm_log, then exit 1.
vm_die() {
	vm_log "$@"
	exit 1
}
