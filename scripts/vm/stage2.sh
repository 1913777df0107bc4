#!/bin/bash
# stage2.sh: PID 1 of the guest in plain mode (bash from the host's /usr,
# after init.sh's switch_root). bash reaps every child, adopted orphans too,
# so no zombie outlives its sandbox. It brings lo up, runs the command that
# run.sh left in /share/.vm/cmd with its output in /share/.vm/output (first
# writing the guest's uptime to /share/.vm/started), writes its exit code to
# /share/.vm/exitcode, and powers the guest off.
#
# Under systemd (vm.mode=systemd) the unit agentsandbox-vm-run.service runs
# this script with --unit: it only runs the command, and the unit's
# SuccessAction/FailureAction power the guest off.
set -uo pipefail # no -e: PID 1 must reach the power-off whatever fails
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8
bb=/.vm/busybox
vm=/share/.vm
unit=false
[[ ${1:-} == --unit ]] && unit=true

log() { echo "vm-stage2: $*" >/dev/console; }

poweroff() {
	sync
	if $unit; then exit 0; fi
	log "powering off"
	"$bb" poweroff -f
	sleep 60 # poweroff -f does not return; never let PID 1 exit
}

if ! $unit; then
	exec </dev/null >/dev/console 2>&1
	"$bb" hostname guest
	ip link set lo up || "$bb" ip link set lo up || log "could not bring lo up"
fi

if [[ ! -r $vm/cmd ]]; then
	log "no command in $vm/cmd"
	poweroff
fi
log "running $vm/cmd"
# The boot is over: run.sh stops waiting for it (and never boots again).
cut -d' ' -f1 /proc/uptime >"$vm/started"
start=$(date +%s%N)
(cd /share && exec /bin/bash "$vm/cmd") </dev/null >"$vm/output" 2>&1
code=$?
log "exit code $code after $((($(date +%s%N) - start) / 1000000)) ms"
# Written then renamed, so the host never reads half a number.
echo "$code" >"$vm/exitcode.tmp" && mv "$vm/exitcode.tmp" "$vm/exitcode"
poweroff
