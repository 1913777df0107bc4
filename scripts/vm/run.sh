#!/usr/bin/env bash
# run.sh: boots Debian's kernel under qemu (software emulation, no network
# device at all) with a cgroup-v2-only hierarchy, runs one command in the
# guest as root, and exits with the command's exit code.
#
#   scripts/vm/run.sh [--systemd] [--share DIR] [--timeout SECONDS] [--cpus N]
#                     [--memory MB] [--log FILE] [--boot-timeout SECONDS]
#                     [--boot-attempts N] -- CMD [ARGS...]
#
# The guest sees the host's /usr and /etc read-only over 9p, and DIR (a temp
# dir when --share is not given) read-write at /share, where CMD runs. The
# guest leaves in DIR/.vm: started (the guest's uptime in seconds when CMD
# started), output (CMD's stdout and stderr, also copied to this script's
# stdout), exitcode, and console.log (the serial console; its tail is
# printed on failure; --log FILE puts it elsewhere).
#
# --systemd boots systemd as PID 1 (writable /etc overlay, tmpfs /var) and
# runs CMD from a oneshot unit once basic.target is up; without it a bash
# PID 1 runs CMD straight after the mounts.
#
# A boot that has not started CMD within --boot-timeout (default 150 s;
# a boot takes 15-25 s) is killed and tried again, up to --boot-attempts
# (default 2) boots in all; CMD itself never runs twice.
#
# Exit codes: CMD's own; 124 when the hard timeout (default 900 s, from the
# first boot) killed qemu; 125 when the guest gave no exit code (it did not
# boot, or stopped before CMD ended: see the log).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$here/lib.sh"

mode=plain share='' timeout=900 cpus=2 memory=3072 log='' boot_timeout=150 boot_attempts=2
usage() { sed -n '6,8p' "$0" >&2; exit 2; }
while [[ $# -gt 0 ]]; do
	case $1 in
	--systemd) mode=systemd ;;
	--share) share=${2:?}; shift ;;
	--timeout) timeout=${2:?}; shift ;;
	--cpus) cpus=${2:?}; shift ;;
	--memory) memory=${2:?}; shift ;;
	--log) log=${2:?}; shift ;;
	--boot-timeout) boot_timeout=${2:?}; shift ;;
	--boot-attempts) boot_attempts=${2:?}; shift ;;
	--) shift; break ;;
	*) usage ;;
	esac
	shift
done
[[ $# -gt 0 ]] || usage
qemu=$(command -v qemu-system-x86_64) || vm_die "qemu-system-x86_64 is missing: scripts/vm/deps.sh"

kdir=$("$here/kernel.sh")
initrd=$("$here/initramfs.sh" "$kdir")

qpid='' tmpshare=''
# cleanup runs on every exit: qemu is killed if still running (a timeout, a
# signal, an error of this script), the console's tail is shown when the
# script was interrupted, and a temp share is removed.
# shellcheck disable=SC2317 # run by the EXIT trap
cleanup() {
	local code=$?
	trap - EXIT INT TERM
	if [[ -n $qpid ]] && kill -0 "$qpid" 2>/dev/null; then
		kill -KILL "$qpid" 2>/dev/null || true
		wait "$qpid" 2>/dev/null || true
		vm_log "interrupted (exit $code): qemu killed; last console lines:"
		[[ -f $log ]] && tail -n 20 "$log" >&2
	fi
	[[ -n $tmpshare ]] && rm -rf "$tmpshare"
	exit "$code"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if [[ -z $share ]]; then
	tmpshare=$(mktemp -d "${TMPDIR:-/tmp}/agentsandbox-vm.XXXXXX")
	share=$tmpshare
fi
share=$(cd "$share" && pwd)
vm=$share/.vm
rm -rf "$vm"
mkdir -p "$vm"
log=${log:-$vm/console.log}
: >"$log"
# The command, quoted word by word, for the guest's bash.
printf '%q ' "$@" >"$vm/cmd"
echo >>"$vm/cmd"

# The kernel's command line: the serial console (up to info messages, so a
# stalled boot shows where it stalled); a panic ends qemu (with
# -no-reboot); no v1 controller at all (cgroup_no_v1=all) and systemd's
# unified hierarchy. tsc=reliable: under emulation the kernel's TSC sync
# check fails and the HPET it falls back to is slow to read (Go reads the
# clock often); mitigations=off: this throwaway guest runs only the
# project's tests, and emulated page-table isolation makes every syscall
# slower. Neither touches what the guest proves (cgroups, namespaces,
# seccomp).
cmdline="console=ttyS0 panic=-1 loglevel=6 tsc=reliable mitigations=off vm.mode=$mode"
cmdline+=" cgroup_no_v1=all systemd.unified_cgroup_hierarchy=1"
if [[ $mode == systemd ]]; then
	cmdline+=" systemd.unit=agentsandbox-vm.target systemd.show_status=1 systemd.log_color=0"
fi
# -nodefaults and -nic none: no network device, no default devices at all;
# the guest's only network is its own loopback. -no-reboot with panic=-1:
# a kernel panic ends qemu instead of a reboot loop.
# shellcheck disable=SC2054 # the commas are qemu's option syntax
args=(-nodefaults -no-user-config -nic none -display none -no-reboot
	-accel tcg,thread=multi -cpu max -smp "$cpus" -m "$memory"
	-kernel "$kdir/vmlinuz" -initrd "$initrd" -append "$cmdline"
	-serial "file:$log"
	-virtfs "local,path=/usr,mount_tag=hostusr,security_model=none,readonly=on,multidevs=remap"
	-virtfs "local,path=/etc,mount_tag=hostetc,security_model=none,readonly=on,multidevs=remap"
	-virtfs "local,path=$share,mount_tag=share,security_model=none,multidevs=remap")

# boot ATTEMPT: runs qemu until it exits or a bound ends, and sets
# $outcome: "stopped" (qemu exited), "timeout" (the hard timeout, counted
# from the first boot) or "no-boot" (the guest did not reach the command
# within --boot-timeout: an emulated boot that stalls, seen now and then
# under load; the caller retries it).
boot() {
	vm_log "booting, attempt $1 ($mode, $cpus cpus, $memory MB, timeout ${timeout}s, console in $log)"
	local t0=$SECONDS
	# pdeathsig: qemu dies with this script even when it is killed with SIGKILL.
	setpriv --pdeathsig KILL -- "$qemu" "${args[@]}" </dev/null >"$vm/qemu.out" 2>&1 &
	qpid=$!
	outcome=stopped
	while kill -0 "$qpid" 2>/dev/null; do
		if ((SECONDS - start >= timeout)); then
			outcome=timeout
		elif [[ ! -e $vm/started ]] && ((SECONDS - t0 >= boot_timeout)); then
			outcome=no-boot
		fi
		if [[ $outcome != stopped ]]; then
			kill -KILL "$qpid" 2>/dev/null || true
			break
		fi
		sleep 0.2
	done
	wait "$qpid" 2>/dev/null || true
	qpid=''
	vm_log "guest stopped after $((SECONDS - t0)) s ($outcome)"
}

start=$SECONDS
for attempt in $(seq "$boot_attempts"); do
	boot "$attempt"
	[[ $outcome == no-boot && $attempt -lt $boot_attempts ]] || break
	vm_log "no command started within ${boot_timeout}s of the boot; last console lines:"
	tail -n 20 "$log" >&2
	mv "$log" "$log.attempt$attempt"
	: >"$log"
done

[[ -f $vm/output ]] && cat "$vm/output"
if [[ -f $vm/exitcode ]]; then
	code=$(<"$vm/exitcode")
	if [[ $code != 0 ]]; then
		vm_log "the command exited $code; last console lines:"
		tail -n 20 "$log" >&2
	fi
	exit "$code"
fi
if [[ $outcome == timeout ]]; then
	vm_log "timed out after ${timeout}s; qemu killed; last console lines:"
	code=124
elif [[ $outcome == no-boot ]]; then
	vm_log "the guest did not boot in $boot_attempts attempts of ${boot_timeout}s; last console lines:"
	code=125
else
	vm_log "the guest gave no exit code (boot failed?); qemu said: $(tr '\n' ' ' <"$vm/qemu.out"); last console lines:"
	code=125
fi
tail -n 40 "$log" >&2
exit "$code"
