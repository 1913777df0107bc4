#!/usr/bin/env bash
# Writes deploy/kubernetes/agentsandbox/files/seccomp.json,
# the seccomp profile the worker's
# container runs under (podman --security-opt seccomp=FILE, Kubernetes
# seccompProfile type Localhost), from the default profile of Debian's
# containers-common (/usr/share/containers/seccomp.json, what podman applies
# by default), so that it is a container runtime's ordinary default with
# only these changes:
#
#  - its capability conditions evaluated for the worker's capabilities
#    (deploy/kubernetes/agentsandbox/files/security.json), and its architecture conditions for
#    x86 and arm, so the file is plain OCI (no "includes"/"excludes", no
#    "archMap"): every runtime reads it the same way;
#  - the namespaces and mounts bubblewrap needs allowed (clone and unshare
#    with namespace flags, mount, umount2, pivot_root, setns, sethostname:
#    the default allows them to a container with CAP_SYS_ADMIN);
#  - what neither the worker nor bubblewrap uses refused, though the worker
#    holds CAP_SYS_ADMIN and CAP_SYS_PTRACE: ptrace, process_vm_readv and
#    _writev, kcmp, pidfd_getfd, process_madvise, bpf, perf_event_open,
#    fanotify_init, lookup_dcookie, quotactl, setdomainname, syslog, keyctl,
#    add_key, request_key and io_uring. (Each sandbox runs under its own,
#    stricter filter as well: docs/sandbox.md.)
#
# The podman test (podmantest/) proves that the worker runs its self-test
# and real sandboxes under exactly this file.
# Usage: scripts/seccomp-profile.sh [SOURCE]   (default /usr/share/containers/seccomp.json)
set -euo pipefail
cd "$(dirname "$0")/.."
src=${1:-/usr/share/containers/seccomp.json}
caps=$(jq -c '[.capabilities[] | "CAP_" + .]' deploy/kubernetes/agentsandbox/files/security.json)
jq --argjson caps "$caps" '
	def allowed($c): ($c // []) as $list | all($list[]; . as $x | $caps | index($x) != null);
	def denied($c): ($c // []) as $list | any($list[]; . as $x | $caps | index($x) != null);
	def ourArch($a): ($a // []) as $list | ($list | length == 0) or any($list[]; IN("amd64", "x86", "x32", "arm64", "arm"));
	["ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd", "process_madvise", "bpf", "perf_event_open",
	 "fanotify_init", "lookup_dcookie", "quotactl", "quotactl_fd", "setdomainname", "syslog", "keyctl", "add_key", "request_key",
	 "io_uring_setup", "io_uring_enter", "io_uring_register"] as $refused |
	{
		defaultAction: .defaultAction,
		defaultErrnoRet: .defaultErrnoRet,
		architectures: ["SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32", "SCMP_ARCH_AARCH64", "SCMP_ARCH_ARM"],
		syscalls: [.syscalls[]
			| select(allowed(.includes.caps) and (denied(.excludes.caps) | not) and ourArch(.includes.arches))
			| if .action == "SCMP_ACT_ALLOW" then .names -= $refused else . end
			| select(.names | length > 0)
			| {names, action} + (if (.args // []) | length > 0 then {args} else {} end)
				+ (if .errnoRet != null then {errnoRet} else {} end)]
	}' "$src" >deploy/kubernetes/agentsandbox/files/seccomp.json.tmp
mv deploy/kubernetes/agentsandbox/files/seccomp.json.tmp deploy/kubernetes/agentsandbox/files/seccomp.json
echo deploy/kubernetes/agentsandbox/files/seccomp.json
