package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"openvibe.network/agentsandbox"
	"openvibe.network/agentsandbox/internal/testenv"
)

// Benchmarks behind scripts/bench-sandbox.sh. Each reports the p50 and p90
// of one operation in milliseconds; run with -benchtime 200x.

// reportPercentiles adds <prefix>p50-ms and <prefix>p90-ms metrics.
func reportPercentiles(b *testing.B, prefix string, samples []time.Duration) {
	b.Helper()
	if len(samples) == 0 {
		return
	}
	slices.Sort(samples)
	at := func(p float64) float64 {
		return float64(samples[int(p*float64(len(samples)-1))]) / float64(time.Millisecond)
	}
	b.ReportMetric(at(0.5), prefix+"p50-ms")
	b.ReportMetric(at(0.9), prefix+"p90-ms")
}

// timed runs a program and returns how long it took and the CPU time it
// used with all its descendants (see runTimed); it fails b if the program
// fails.
func timed(b *testing.B, argv []string) (wall, cpu time.Duration) {
	b.Helper()
	wall, cpu, err := runTimed(argv)
	if err != nil {
		b.Fatal(err)
	}
	return wall, cpu
}

// runTimed runs a program and returns how long it took and the CPU time
// (user and system) it used with all its descendants: those it waited for,
// and, once becomeSubreaper has made this process a child subreaper, those
// it left behind (bubblewrap's outer process exits before the sandbox's pid
// 1, which the kernel then gives to the nearest subreaper: without this, a
// bare bubblewrap's count would leave out its whole sandbox). The wall time
// ends when the program does, as a user's shell sees it.
func runTimed(argv []string) (wall, cpu time.Duration, err error) {
	start := time.Now()
	cmd := exec.Command(argv[0], argv[1:]...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return 0, 0, fmt.Errorf("%q: %w: %s", argv, err, out)
	}
	wall = time.Since(start)
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		return 0, 0, fmt.Errorf("%q: no resource usage", argv)
	}
	left, err := reapOrphans()
	return wall, cpuTime(ru) + left, err
}

// cpuTime is the user and system CPU time in ru.
func cpuTime(ru *syscall.Rusage) time.Duration {
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reapOrphans waits for every child of this process, which after
// becomeSubreaper are only the processes reparented to it, and returns the
// CPU time they used with their own descendants.
func reapOrphans() (time.Duration, error) {
	var total time.Duration
	for {
		var ru syscall.Rusage
		_, err := syscall.Wait4(-1, nil, 0, &ru)
		switch {
		case errors.Is(err, syscall.ECHILD):
			return total, nil
		case errors.Is(err, syscall.EINTR):
			continue
		case err != nil:
			return total, fmt.Errorf("wait for the processes left behind: %w", err)
		}
		total += cpuTime(&ru)
	}
}

// becomeSubreaper makes this process the reaper of the processes its
// children leave behind, until undo, so that runTimed counts them. It
// refuses when the process has children already (reapOrphans would wait for
// them), as a test binary running other tests may: BenchmarkOneOff runs
// alone, and TestRunTimedCountsWhatIsLeftBehind in a process of its own.
func becomeSubreaper() (undo func(), err error) {
	if _, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil); !errors.Is(err, syscall.ECHILD) {
		return nil, fmt.Errorf("the process has children (wait4: %v): run this on its own", err)
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return nil, fmt.Errorf("become a child subreaper: %w", err)
	}
	return func() { _ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0) }, nil
}

// timedHelperEnv makes the test binary run timedHelper instead of tests.
const timedHelperEnv = "SANDBOX_TEST_TIMED_HELPER"

// timedHelper is the test binary as a process of its own for
// TestRunTimedCountsWhatIsLeftBehind: a subreaper that times a CPU-bound
// shell loop run directly and the same loop left behind by a shell that
// exits at once, and prints both CPU times in nanoseconds.
func timedHelper() int {
	undo, err := becomeSubreaper()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer undo()
	loop := `i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done`
	var cpus []time.Duration
	for _, argv := range [][]string{{"sh", "-c", loop}, {"sh", "-c", "sh -c '" + loop + "' & exit 0"}} {
		_, cpu, err := runTimed(argv)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		cpus = append(cpus, cpu)
	}
	fmt.Println(int64(cpus[0]), int64(cpus[1]))
	return 0
}

// TestRunTimedCountsWhatIsLeftBehind: the CPU time BenchmarkOneOff reports
// for a program includes the processes it leaves running when it exits (as
// a bare bubblewrap leaves its sandbox): a loop left behind by a shell that
// exits at once counts at least half of what the loop costs run directly
// (without the subreaper, it would count only that shell).
func TestRunTimedCountsWhatIsLeftBehind(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run", "^$")
	cmd.Env = append(os.Environ(), timedHelperEnv+"=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helper: %v: %s", err, out)
	}
	var direct, leftBehind int64
	if _, err := fmt.Sscan(string(out), &direct, &leftBehind); err != nil {
		t.Fatalf("helper printed %q: %v", out, err)
	}
	if leftBehind < direct/2 {
		t.Errorf("a loop left behind counted %v, the loop run directly %v: the processes a program leaves behind are not counted",
			time.Duration(leftBehind), time.Duration(direct))
	}
}

// BenchmarkOneOff times `codes-sandbox run -- /bin/true` (a fresh runtime,
// sandbox, exec and verified wipe per run) side by side with a bare
// bubblewrap sandbox running /bin/true and `codes-sandbox run --help` (the
// binary's own start and exit, no sandbox), alternating them so that all
// see the same machine load. Each side's wall time and its CPU time (the
// process tree's user and system) are reported. The binary is named by BENCH_CODES_SANDBOX
// (scripts/bench-sandbox.sh builds it).
func BenchmarkOneOff(b *testing.B) {
	bwrap := testenv.RequireSandbox(b)
	bin := os.Getenv("BENCH_CODES_SANDBOX")
	if bin == "" {
		b.Skip("BENCH_CODES_SANDBOX is not set (run scripts/bench-sandbox.sh)")
	}
	raw := []string{bwrap, "--unshare-all", "--die-with-parent", "--ro-bind", "/usr", "/usr",
		"--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64", "--symlink", "usr/bin", "/bin",
		"--proc", "/proc", "--dev", "/dev", "/bin/true"}
	run := []string{bin, "run", "--", "/bin/true"}
	help := []string{bin, "run", "--help"} // the binary's own start, no sandbox
	undo, err := becomeSubreaper()
	if err != nil {
		b.Fatal(err)
	}
	defer undo()
	sides := []struct {
		prefix    string
		argv      []string
		wall, cpu []time.Duration
	}{{prefix: "raw-bwrap-", argv: raw}, {prefix: "run-", argv: run}, {prefix: "binary-start-", argv: help}}
	for b.Loop() {
		for i := range sides {
			wall, cpu := timed(b, sides[i].argv)
			sides[i].wall, sides[i].cpu = append(sides[i].wall, wall), append(sides[i].cpu, cpu)
		}
	}
	for _, s := range sides {
		reportPercentiles(b, s.prefix, s.wall)
		reportPercentiles(b, s.prefix+"cpu-", s.cpu)
	}
}

// BenchmarkExecTrue times exec of /bin/true in an existing sandbox.
func BenchmarkExecTrue(b *testing.B) {
	rt := newRuntime(b, Config{Capacity: 1})
	id := newBox(b, rt, Options{}).ID
	req := agentsandbox.ExecRequest{Argv: []string{"/bin/true"}}
	samples := make([]time.Duration, 0, b.N)
	for b.Loop() {
		start := time.Now()
		res, err := rt.Exec(context.Background(), id, req, nil, nil)
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("exec: %v %+v", err, res)
		}
		samples = append(samples, time.Since(start))
	}
	reportPercentiles(b, "", samples)
}

// BenchmarkCreate times Create (until the init accepts commands).
func BenchmarkCreate(b *testing.B) {
	rt := newRuntime(b, Config{Capacity: 1})
	samples := make([]time.Duration, 0, b.N)
	for b.Loop() {
		start := time.Now()
		info, err := rt.Create(context.Background(), Options{})
		if err != nil {
			b.Fatal(err)
		}
		samples = append(samples, time.Since(start))
		b.StopTimer()
		if rep, err := rt.Delete(context.Background(), info.ID); err != nil || !rep.Verified {
			b.Fatalf("delete: %v %v", err, rep.Leftovers)
		}
		b.StartTimer()
	}
	reportPercentiles(b, "", samples)
}

// BenchmarkCreatePooled times Create when the pool has a sandbox ready
// (the wait for the pool to refill is not timed).
func BenchmarkCreatePooled(b *testing.B) {
	rt := newRuntime(b, Config{Capacity: 1, Pool: 1})
	samples := make([]time.Duration, 0, b.N)
	env := map[string]string{"TOKEN": "x"}
	for b.Loop() {
		b.StopTimer()
		waitPooled(b, rt, 1)
		b.StartTimer()
		start := time.Now()
		info, err := rt.Create(context.Background(), Options{Env: env})
		if err != nil {
			b.Fatal(err)
		}
		samples = append(samples, time.Since(start))
		b.StopTimer()
		if rep, err := rt.Delete(context.Background(), info.ID); err != nil || !rep.Verified {
			b.Fatalf("delete: %v %v", err, rep.Leftovers)
		}
		b.StartTimer()
	}
	reportPercentiles(b, "", samples)
}

// BenchmarkCreateInit times Create with the inits a worker really runs,
// alternating them: the worker binary re-executed (BENCH_CODES_SANDBOX_WORKER) and
// the lean codes-sandbox-init (BENCH_CODES_SANDBOX_INIT); BenchmarkCreate
// runs this test binary as the init. scripts/bench-sandbox.sh builds both.
func BenchmarkCreateInit(b *testing.B) {
	testenv.RequireSandbox(b)
	inits := []string{os.Getenv("BENCH_CODES_SANDBOX_WORKER"), os.Getenv("BENCH_CODES_SANDBOX_INIT")}
	if inits[0] == "" || inits[1] == "" {
		b.Skip("BENCH_CODES_SANDBOX_WORKER or BENCH_CODES_SANDBOX_INIT is not set (run scripts/bench-sandbox.sh)")
	}
	rts := make([]*Runtime, len(inits))
	for i, bin := range inits {
		rts[i] = newRuntime(b, Config{Capacity: 1, InitBinary: bin})
	}
	samples := make([][]time.Duration, len(inits))
	for b.Loop() {
		for i, rt := range rts {
			start := time.Now()
			info, err := rt.Create(context.Background(), Options{})
			if err != nil {
				b.Fatal(err)
			}
			samples[i] = append(samples[i], time.Since(start))
			b.StopTimer()
			if rep, err := rt.Delete(context.Background(), info.ID); err != nil || !rep.Verified {
				b.Fatalf("delete: %v %v", err, rep.Leftovers)
			}
			b.StartTimer()
		}
	}
	reportPercentiles(b, "worker-binary-", samples[0])
	reportPercentiles(b, "lean-init-", samples[1])
}

// BenchmarkWipe times Delete (kill, remove, verify) of a sandbox that ran a
// command.
func BenchmarkWipe(b *testing.B) {
	rt := newRuntime(b, Config{Capacity: 1})
	samples := make([]time.Duration, 0, b.N)
	for b.Loop() {
		b.StopTimer()
		info, err := rt.Create(context.Background(), Options{})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := rt.Exec(context.Background(), info.ID, agentsandbox.ExecRequest{Argv: []string{"/bin/true"}}, nil, nil); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start := time.Now()
		rep, err := rt.Delete(context.Background(), info.ID)
		if err != nil || !rep.Verified {
			b.Fatalf("delete: %v %v", err, rep.Leftovers)
		}
		samples = append(samples, time.Since(start))
	}
	reportPercentiles(b, "", samples)
}
