// Package vmtest runs the sandbox's suites in a real Linux guest whose only
// cgroup hierarchy is v2 (the host mounts v1), and proves a systemd guest
// for the worker's unit. It holds tests only; the harness is
// internal/vmtest, the booting scripts/vm/ (see docs/hosts.md).
//
// It is its own package, not part of e2e/, because the e2e test binary is
// one of the suites that runs inside the guest: the guest test must run
// once, on the host, and never inside itself.
package vmtest

import (
	"context"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	ivm "openvibe.network/agentsandbox/internal/vmtest"
)

// assertV2Only fails unless /sys/fs/cgroup is cgroup2 and no cgroup v1
// hierarchy is mounted or has a controller bound. It prints what it saw.
const assertV2Only = `set -u
fail() { echo "FAIL: $*"; exit 1; }
fs=$(stat -f -c %T /sys/fs/cgroup)
echo "/sys/fs/cgroup: $fs"
[ "$fs" = cgroup2fs ] || fail "/sys/fs/cgroup is $fs, not cgroup2"
echo "cgroup mounts:"; awk '$3 ~ /^cgroup/' /proc/self/mounts
v1=$(awk '$3 == "cgroup"' /proc/self/mounts)
[ -z "$v1" ] || fail "cgroup v1 mounted: $v1"
bound=$(awk 'NR > 1 && $2 != 0' /proc/cgroups)
[ -z "$bound" ] || fail "v1 hierarchies with controllers: $bound"
echo "controllers: $(cat /sys/fs/cgroup/cgroup.controllers)"
echo "kernel: $(uname -r), cpus $(nproc), $(awk '/MemTotal/ {print $2 / 1024 " MB"}' /proc/meminfo)"
echo "v2 only"
`

// withDeadline returns a context that ends a minute before the test's own
// deadline (go test -timeout), so a stuck guest fails the test cleanly.
func withDeadline(t *testing.T) context.Context {
	t.Helper()
	ctx := context.Background()
	if d, ok := t.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, d.Add(-time.Minute))
		t.Cleanup(cancel)
	}
	return ctx
}

// boot builds tests and cmds into a temp share, lets prepare (when not nil)
// put more into it, boots one guest with cfg and runs cmds; it fails the
// test when the harness itself, or prepare, fails.
func boot(t *testing.T, cfg ivm.Config, tests, cmds []string, prepare func(ctx context.Context, root, dir string) error, run []ivm.Command) *ivm.Report {
	t.Helper()
	ivm.Require(t)
	if testing.Short() {
		t.Skip("skipping the guest boot in -short mode")
	}
	ctx := withDeadline(t)
	root, err := ivm.Root()
	if err != nil {
		t.Fatal(err)
	}
	cfg.Root = root
	dir := t.TempDir()
	start := time.Now()
	if err := ivm.Build(ctx, root, dir, tests, cmds); err != nil {
		t.Fatal(err)
	}
	if len(tests)+len(cmds) > 0 {
		t.Logf("built %v and %v on the host in %v", tests, cmds, time.Since(start).Round(time.Second))
	}
	if prepare != nil {
		start := time.Now()
		if err := prepare(ctx, root, dir); err != nil {
			t.Fatal(err)
		}
		t.Logf("prepared the share on the host in %v", time.Since(start).Round(time.Second))
	}
	rep, err := ivm.Run(ctx, cfg, dir, run)
	if err != nil {
		if rep == nil {
			t.Fatal(err)
		}
		for _, res := range rep.Results {
			t.Logf("%s: exit %d; output ends:\n%s", res.Name, res.ExitCode, tail(res.Output, 8))
		}
		t.Fatalf("%v\n%s", err, rep.Log)
	}
	t.Logf("guest: booted in %v (kernel start to first command), whole run %v", rep.Boot.Round(100*time.Millisecond), rep.Wall.Round(time.Second))
	t.Cleanup(func() {
		if t.Failed() {
			if b, err := os.ReadFile(rep.ConsoleLog); err == nil {
				t.Logf("serial console:\n%s", tail(string(b), 60))
			}
		}
	})
	return rep
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// check fails t unless the named command exited 0 and its output holds
// every string of want; it logs the output (whole on failure, else its tail).
func check(t *testing.T, rep *ivm.Report, name string, want ...string) {
	t.Helper()
	res, ok := rep.Result(name)
	if !ok {
		t.Fatalf("%s did not run", name)
	}
	var missing []string
	for _, w := range want {
		if !strings.Contains(res.Output, w) {
			missing = append(missing, w)
		}
	}
	if res.ExitCode != 0 || len(missing) > 0 {
		t.Errorf("%s in the guest: exit %d after %v (124: its timeout), missing %q; output:\n%s",
			name, res.ExitCode, res.Duration.Round(time.Second), missing, res.Output)
		return
	}
	t.Logf("%s in the guest: exit 0 after %v; output ends:\n%s", name, res.Duration.Round(time.Second), tail(res.Output, 8))
	var skipped []string
	for _, l := range strings.Split(res.Output, "\n") {
		if f := strings.Fields(l); len(f) >= 3 && f[0] == "---" && f[1] == "SKIP:" {
			skipped = append(skipped, f[2])
		}
	}
	if len(skipped) > 0 {
		t.Logf("%s: %d tests skipped in the guest (not proved there): %s", name, len(skipped), strings.Join(skipped, " "))
	}
}

// TestGuestCgroupV2 boots one cgroup-v2-only guest and runs in it, as
// root with CI=true (so nothing may skip): the sandbox package's tests (real
// sandboxes), the cgroup and seccomp packages' tests, `codes-sandbox
// selftest`, and the e2e test (both binaries, real sandboxes, loopback).
// The seccomp check of its tables against golang.org/x/sys's source is
// left to the host, where the module cache is.
func TestGuestCgroupV2(t *testing.T) {
	ci := []string{"CI=true"}
	suite := func(name string, timeout time.Duration, extra ...string) ivm.Command {
		argv := []string{name + ".test", "-test.v", "-test.count=1", "-test.timeout=" + (timeout - 30*time.Second).String()}
		return ivm.Command{Name: name, Argv: append(argv, extra...), Env: ci, Timeout: timeout}
	}
	// The worker's metrics are not the cgroup's business and promtool lives
	// in the host's cache: they are proved on the host. So is the browser:
	// Chromium's start alone takes minutes under emulation, and nothing of
	// it depends on the cgroup version but the limits the other tests prove.
	// The MCP server is a client of the API, above the runtime: proved on
	// the host (two more workers' starts would not fit the guest's time).
	// Image sandboxes need a registry, the Debian test image and a Go
	// toolchain the guest has not: they are proved on the host (their
	// overlay and idmapped layers do not depend on the cgroup version).
	// The pool of three workers is the Go client's, above the runtime, and
	// three more workers' starts would not fit the guest's time either.
	// Previews run the stdlib web app of scripts/ports, which the guest's
	// share does not carry; Chromium on the PATH (like the browser tests)
	// depends on no cgroup version and takes minutes under emulation.
	e2e := suite("e2e", 8*time.Minute, "-test.skip=^(TestWorkerMetrics|TestBrowserThroughWorker|TestSelftestBrowser|TestPlaywrightConnectOverCDP|TestMCPStreamableHTTP|TestMCPStdio|TestImageSandboxes|TestRunImage|TestPoolOfThreeWorkers|TestPortsPreview)$")
	e2e.Env = append(e2e.Env, "AGENTSANDBOX_E2E_BIN="+ivm.GuestBin)
	sandboxSuite := suite("sandbox", 10*time.Minute, "-test.skip=Browser|Image|Chromium")
	sandboxSuite.Env = append(sandboxSuite.Env, "AGENTSANDBOX_TEST_VIEWS=host")
	rep := boot(t, ivm.Config{},
		[]string{"./sandbox", "./sandbox/cgroup", "./sandbox/seccomp", "./e2e"}, []string{"./cmd/..."}, nil,
		[]ivm.Command{
			{Name: "v2-only", Argv: []string{"bash", "-c", assertV2Only}, Timeout: time.Minute},
			sandboxSuite,
			suite("cgroup", 3*time.Minute),
			suite("seccomp", 3*time.Minute, "-test.skip=^TestTablesMatchXSys$"),
			{Name: "selftest", Argv: []string{"codes-sandbox", "selftest", "--browser", "off"}, Env: ci, Timeout: 3 * time.Minute},
			e2e,
			{Name: "bench-run", Argv: []string{"sandbox.test", "-test.run", "^$", "-test.bench", "^BenchmarkOneOff$", "-test.benchtime", "20x"},
				Env: append(slices.Clone(ci), "BENCH_CODES_SANDBOX="+ivm.GuestBin+"/codes-sandbox"), Timeout: 4 * time.Minute},
			{Name: "userns-off", Argv: []string{"bash", "-c", usernsOff}, Env: ci, Timeout: 3 * time.Minute},
		})
	check(t, rep, "v2-only", "/sys/fs/cgroup: cgroup2fs", "v2 only")
	for _, name := range []string{"sandbox", "cgroup", "seccomp", "e2e"} {
		check(t, rep, name, "\nPASS\n")
	}
	check(t, rep, "selftest", "all checks passed")
	check(t, rep, "userns-off", "user namespaces are disabled (sysctl user.max_user_namespaces = 0)", "user.max_user_namespaces=15000", "refused as it should")
	check(t, rep, "bench-run", "BenchmarkOneOff")
	if res, ok := rep.Result("bench-run"); ok {
		if ratio, ok := runRatio(res.Output); ok {
			t.Logf("in the guest, `codes-sandbox run -- /bin/true` p50 is %.2f× raw bwrap's (20 rounds, alternating)", ratio)
		}
	}
}

// usernsOff turns user namespaces off in the guest (as a host with
// user.max_user_namespaces = 0 has them), runs the self-test, which must
// fail naming the sysctl and its fix, and turns them back on.
const usernsOff = `f=/proc/sys/user/max_user_namespaces
old=$(cat $f)
echo 0 > $f
codes-sandbox selftest --browser off 2>&1
rc=$?
echo "$old" > $f
[ "$rc" != 0 ] || { echo "FAIL: the self-test passed with user namespaces off"; exit 1; }
echo "the self-test was refused as it should (exit $rc)"
`

// runRatio reads BenchmarkOneOff's output: run's p50 over raw bwrap's.
func runRatio(out string) (float64, bool) {
	var raw, run float64
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		for i := 1; i < len(f); i++ {
			v, err := strconv.ParseFloat(f[i-1], 64)
			if err != nil {
				continue
			}
			switch f[i] {
			case "raw-bwrap-p50-ms":
				raw = v
			case "run-p50-ms":
				run = v
			}
		}
	}
	return run / raw, raw > 0 && run > 0
}
