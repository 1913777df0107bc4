package vmtest

import (
	"testing"
	"time"

	ivm "openvibe.network/agentsandbox/internal/vmtest"
)

// systemdChecks proves, in a guest whose PID 1 is systemd, that units start
// with systemctl and that their cgroups sit under system.slice in the v2
// hierarchy: a transient unit (systemd-run, with Delegate=yes, whose
// cgroup must then offer memory, pids and cpu), and a unit installed in
// /etc/systemd/system. Both are stopped, and their cgroups must be gone.
const systemdChecks = `set -u
fail() { echo "FAIL: $*"; exit 1; }
cg=/sys/fs/cgroup
pid1=$(readlink /proc/1/exe)
echo "PID 1: $pid1"
case $pid1 in */systemd) ;; *) fail "PID 1 is $pid1, not systemd" ;; esac
[ "$(stat -f -c %T $cg)" = cgroup2fs ] || fail "$cg is not cgroup2"
! awk '$3 == "cgroup"' /proc/self/mounts | grep -q . || fail "a cgroup v1 hierarchy is mounted"

# unit_in_slice UNIT: the unit's main process is in $cg/system.slice/UNIT.
unit_in_slice() {
	local pid want got
	want=/system.slice/$1
	got=$(systemctl show -P ControlGroup "$1")
	[ "$got" = "$want" ] || fail "$1: ControlGroup=$got, want $want"
	pid=$(systemctl show -P MainPID "$1")
	[ "${pid:-0}" != 0 ] || fail "$1 has no main process"
	grep -qx "0::$want" /proc/$pid/cgroup || fail "$1: process $pid is in $(cat /proc/$pid/cgroup)"
	grep -qx "$pid" "$cg$want/cgroup.procs" || fail "$1: $pid not in $cg$want/cgroup.procs"
	echo "$1: active, process $pid in $cg$want"
}

systemd-run --quiet --unit=vmtest-transient.service -p Delegate=yes /bin/sleep 600 ||
	fail "systemd-run"
unit_in_slice vmtest-transient.service
ctl=$(cat $cg/system.slice/vmtest-transient.service/cgroup.controllers)
echo "vmtest-transient.service (Delegate=yes) controllers: $ctl"
for c in memory pids cpu; do
	case " $ctl " in *" $c "*) ;; *) fail "controller $c not delegated to vmtest-transient.service" ;; esac
done

cat >/etc/systemd/system/vmtest-installed.service <<'UNIT'
[Unit]
Description=vmtest: an installed unit
[Service]
ExecStart=/bin/sleep 600
UNIT
systemctl daemon-reload || fail "daemon-reload"
systemctl start vmtest-installed.service || fail "systemctl start vmtest-installed.service"
[ "$(systemctl is-active vmtest-installed.service)" = active ] || fail "vmtest-installed.service is not active"
unit_in_slice vmtest-installed.service

for u in vmtest-transient.service vmtest-installed.service; do
	systemctl stop "$u" || fail "systemctl stop $u"
	[ ! -e "$cg/system.slice/$u" ] || fail "$cg/system.slice/$u is left after stop"
done
echo "systemd units ok"
`

// TestGuestSystemd boots one guest with systemd as PID 1 (cgroup v2 only)
// and proves that systemctl starts a transient and an installed unit, each
// in its own cgroup under system.slice; then, in the same boot, that the
// Debian packages (built on the host first, as `make deb` builds them)
// install with dpkg -i and that their units start, run the worker's
// sandboxes under its own cgroup and stop (packageChecks).
func TestGuestSystemd(t *testing.T) {
	rep := boot(t, ivm.Config{Systemd: true}, nil, nil, debsInto, []ivm.Command{
		{Name: "v2-only", Argv: []string{"bash", "-c", assertV2Only}, Timeout: time.Minute},
		{Name: "systemd", Argv: []string{"bash", "-c", systemdChecks}, Timeout: 3 * time.Minute},
		{Name: "packages", Argv: []string{"bash", "-c", packageChecks}, Timeout: 8 * time.Minute},
	})
	check(t, rep, "v2-only", "v2 only")
	check(t, rep, "systemd", "systemd units ok")
	check(t, rep, "packages", "dpkg -i: codes-sandbox and ovlive", "packages ok")
}
