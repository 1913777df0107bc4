package vmtest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// debShare is where, in the share, debsInto leaves the packages and a copy
// of the host's dpkg database (the guest's /var is a fresh tmpfs).
const debShare = "debs"

// debsInto builds the Debian packages (scripts/deb.sh, as `make deb` does)
// into dir/debs and puts there their version (the binaries' --version) in
// the file version and a tar of the host's /var/lib/dpkg, whose packages
// are the ones in the guest's /usr.
func debsInto(ctx context.Context, root, dir string) error {
	out := filepath.Join(dir, debShare)
	cmd := exec.CommandContext(ctx, filepath.Join(root, "scripts", "deb.sh"))
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "DEB_OUT="+out)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("scripts/deb.sh: %w\n%s", err, b)
	}
	if err := os.RemoveAll(filepath.Join(out, "stage")); err != nil {
		return err
	}
	if err := dpkgDBTar(ctx, filepath.Join(out, "dpkg.tar")); err != nil {
		return err
	}
	v, err := exec.CommandContext(ctx, filepath.Join(root, "scripts", "version.sh")).Output()
	if err != nil {
		return fmt.Errorf("scripts/version.sh: %w", err)
	}
	return os.WriteFile(filepath.Join(out, "version"), v, 0o644)
}

// dpkgDBTar writes to path a tar of what dpkg reads of its database to
// install and remove a package: the status, the packages' file lists (to
// find conflicts), diversions, alternatives, triggers. The rest (others'
// md5sums and scripts, 3/4 of the size) would cost the emulated guest 15 s
// to unpack.
func dpkgDBTar(ctx context.Context, path string) error {
	const lib = "/var/lib"
	names := []string{"dpkg/status"}
	for _, n := range []string{"available", "diversions", "statoverride", "alternatives", "triggers", "info/format"} {
		if _, err := os.Stat(filepath.Join(lib, "dpkg", n)); err == nil {
			names = append(names, "dpkg/"+n)
		}
	}
	lists, err := filepath.Glob(filepath.Join(lib, "dpkg", "info", "*.list"))
	if err != nil {
		return err
	}
	for _, l := range lists {
		names = append(names, strings.TrimPrefix(l, lib+"/"))
	}
	args := append([]string{"-C", lib, "-cf", path}, names...)
	if b, err := exec.CommandContext(ctx, "tar", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("tar of /var/lib/dpkg: %w\n%s", err, b)
	}
	return nil
}

// packageChecks installs the packages in a guest whose PID 1 is systemd,
// as on a real host: the host's /usr (read-only over 9p) gets a tmpfs upper
// layer and /var/lib/dpkg the host's database, then `dpkg -i`. It proves
// that ovlive's user and state directory exist, that `systemctl start`
// runs ovlive as that user in its cgroup under system.slice, answering
// /healthz, and the worker with its own process in the delegated
// subtree's leaf, its self-test passed (real sandboxes, under the unit)
// and a pooled sandbox's processes under .../codes-sandbox.service/sandboxes;
// that `systemctl stop` removes the worker's cgroup; and that `dpkg
// --purge` stops ovlive (its prerm; its cgroup goes too) and takes the
// files away again.
const packageChecks = `set -u
fail() { echo "FAIL: $*"; exit 1; }
t() { echo "[$SECONDS s] $*"; }
cg=/sys/fs/cgroup
debs=/share/` + debShare + `
version=$(cat $debs/version)

mkdir -p /run/usr-rw
mount -t tmpfs -o mode=0755 usr-rw /run/usr-rw || fail "tmpfs for /usr"
mkdir -p /run/usr-rw/upper /run/usr-rw/work
mount -t overlay -o lowerdir=/usr,upperdir=/run/usr-rw/upper,workdir=/run/usr-rw/work usr /usr ||
	fail "overlay over /usr"
mkdir -p /var/lib/dpkg/info /var/lib/dpkg/updates
tar -C /var/lib -xf $debs/dpkg.tar || fail "the host's dpkg database"
dpkg -i $debs/codes-sandbox_*.deb $debs/ovlive_*.deb >/tmp/dpkg.log 2>&1 || { cat /tmp/dpkg.log; fail "dpkg -i"; }
grep -v '^(Reading database' /tmp/dpkg.log
for p in codes-sandbox ovlive; do
	s=$(dpkg-query -W -f '${Status} ${Version}' $p 2>&1)
	[ "$s" = "install ok installed $version-1" ] || fail "$p: dpkg says $s, want install ok installed $version-1"
done
t "dpkg -i: codes-sandbox and ovlive $version-1 installed"
for b in codes-sandbox ovlive; do
	v=$(/usr/bin/$b --version)
	case $v in "$b $version "*) ;; *) fail "/usr/bin/$b --version: $v" ;; esac
done
[ -x /usr/bin/codes-sandbox-init ] || fail "no /usr/bin/codes-sandbox-init"
[ -x /usr/bin/codes-sandbox-worker ] || fail "no /usr/bin/codes-sandbox-worker"
id ovlive || fail "no user ovlive"
[ "$(stat -c '%U %a' /var/lib/ovlive)" = "ovlive 700" ] || fail "/var/lib/ovlive: $(stat -c '%U %a' /var/lib/ovlive)"

# in_unit UNIT LEAF: the unit is active, its cgroup is system.slice/UNIT and
# its main process is in that cgroup's LEAF ("" for the unit's own).
in_unit() {
	local pid want got
	[ "$(systemctl is-active "$1")" = active ] || fail "$1 is not active"
	want=/system.slice/$1
	got=$(systemctl show -P ControlGroup "$1")
	[ "$got" = "$want" ] || fail "$1: ControlGroup=$got, want $want"
	want=$want${2:+/$2}
	pid=$(systemctl show -P MainPID "$1")
	[ "${pid:-0}" != 0 ] || fail "$1 has no main process"
	grep -qx "0::$want" /proc/$pid/cgroup || fail "$1: process $pid is in $(cat /proc/$pid/cgroup), want $want"
	echo "$1: active, process $pid (user $(stat -c %U /proc/$pid)) in $cg$want"
}

t "starting ovlive"
systemctl start ovlive.service || fail "systemctl start ovlive"
in_unit ovlive.service ""
[ "$(stat -c %U /proc/$(systemctl show -P MainPID ovlive.service))" = ovlive ] || fail "ovlive does not run as ovlive"
for i in $(seq 120); do
	h=$(curl -fsS --max-time 5 http://127.0.0.1:8080/healthz 2>/dev/null) && break
	sleep 0.5
done
t "ovlive /healthz: ${h:-no answer}"
case ${h:-} in *'"ok"'*) ;; *) journalctl -u ovlive --no-pager | tail -20; fail "ovlive /healthz did not answer ok" ;; esac

head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >/etc/codes-sandbox/api.token
chmod 0600 /etc/codes-sandbox/api.token
cat >/etc/codes-sandbox/config.json <<'JSON'
{"worker_id": "sbw-guest", "listen": "127.0.0.1:8088", "api_token_file": "/etc/codes-sandbox/api.token", "capacity": 1, "browser": "off", "check_ins": []}
JSON
t "starting codes-sandbox"
systemctl start codes-sandbox.service || fail "systemctl start codes-sandbox"
# Ready: the self-test at start passed and a sandbox is pooled (bounded:
# the self-test takes 10-15 s in the emulated guest).
auth="Authorization: Bearer $(cat /etc/codes-sandbox/api.token)"
for i in $(seq 240); do
	st=$(curl -fsS --max-time 5 -H "$auth" http://127.0.0.1:8088/v1/status 2>/dev/null) || st=
	case $st in *'"self_test":{"passed":true'*'"pooled":1'*) break ;; esac
	sleep 0.5
done
t "codes-sandbox /v1/status: ${st:-no answer}"
case $st in *'"self_test":{"passed":true'*'"pooled":1'*) ;; *)
	journalctl -u codes-sandbox --no-pager | tail -30; fail "the worker's self-test did not pass, or no sandbox is pooled" ;; esac
in_unit codes-sandbox.service codes-sandbox-worker
sb=$cg/system.slice/codes-sandbox.service/sandboxes
pids=$(find "$sb" -name cgroup.procs -exec cat {} + 2>/dev/null)
[ -n "$pids" ] || fail "no sandbox process under $sb"
for p in $pids; do
	case $(cat /proc/$p/cgroup 2>/dev/null) in 0::/system.slice/codes-sandbox.service/sandboxes/*) ;;
	*) fail "sandbox process $p is in $(cat /proc/$p/cgroup)" ;; esac
done
echo "sandbox processes under $sb: $(echo $pids | wc -w), e.g. $(find "$sb" -mindepth 2 -maxdepth 2 -type d | head -1)"

# gone UNIT: the unit is not active and its cgroup is gone.
gone() {
	[ "$(systemctl is-active "$1")" != active ] || fail "$1 is still active"
	[ ! -e "$cg/system.slice/$1" ] || fail "$cg/system.slice/$1 is left after stop"
}
systemctl stop codes-sandbox.service || fail "systemctl stop codes-sandbox"
gone codes-sandbox.service
[ ! -e /run/codes-sandbox ] || fail "/run/codes-sandbox is left after stop"
t "codes-sandbox stopped: its cgroup and /run/codes-sandbox are gone"

# ovlive still runs: the package's prerm stops it. (The host's
# policy-rc.d, a container's that forbids every service action, is in the
# guest's /usr too; a real host has none, so it goes from the overlay.)
rm -f /usr/sbin/policy-rc.d
dpkg --purge codes-sandbox ovlive >/tmp/dpkg.log 2>&1 || { cat /tmp/dpkg.log; fail "dpkg --purge"; }
gone ovlive.service
t "dpkg --purge: ovlive stopped by its prerm, its cgroup gone"
for f in /usr/bin/codes-sandbox /usr/bin/codes-sandbox-init /usr/bin/codes-sandbox-worker /usr/bin/ovlive /lib/systemd/system/ovlive.service /etc/ovlive/ovlive.toml; do
	[ ! -e "$f" ] || fail "$f is left after dpkg --purge"
done
t "packages ok"
`
