package sandbox

import (
	"context"
	"os"
	"os/exec"
	"slices"
	"syscall"
	"testing"
	"time"

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

// timed runs a program and returns how long it took and the CPU time (user
// and system) it used with every descendant it waited for: bubblewrap's
// count their sandbox's processes, the worker's its bubblewrap.
func timed(b *testing.B, argv []string) (wall, cpu time.Duration) {
	b.Helper()
	start := time.Now()
	cmd := exec.Command(argv[0], argv[1:]...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		b.Fatalf("%q: %v: %s", argv, err, out)
	}
	wall = time.Since(start)
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		b.Fatalf("%q: no resource usage", argv)
	}
	return wall, time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
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
// alternating them: the worker binary re-executed (BENCH_CODES_SANDBOX) and
// the lean codes-sandbox-init (BENCH_CODES_SANDBOX_INIT); BenchmarkCreate
// runs this test binary as the init. scripts/bench-sandbox.sh builds both.
func BenchmarkCreateInit(b *testing.B) {
	testenv.RequireSandbox(b)
	inits := []string{os.Getenv("BENCH_CODES_SANDBOX"), os.Getenv("BENCH_CODES_SANDBOX_INIT")}
	if inits[0] == "" || inits[1] == "" {
		b.Skip("BENCH_CODES_SANDBOX or BENCH_CODES_SANDBOX_INIT is not set (run scripts/bench-sandbox.sh)")
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
