package sandbox

import (
	"context"
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"

	"openvibe.network/agentsandbox/internal/testenv"
)

// Benchmarks behind scripts/bench-sandbox.sh. Each reports the p50 and p90
// of one operation in milliseconds; run with -benchtime 200x.

// reportPercentiles adds p50-ms and p90-ms metrics for the samples.
func reportPercentiles(b *testing.B, samples []time.Duration) {
	b.Helper()
	if len(samples) == 0 {
		return
	}
	slices.Sort(samples)
	at := func(p float64) float64 {
		return float64(samples[int(p*float64(len(samples)-1))]) / float64(time.Millisecond)
	}
	b.ReportMetric(at(0.5), "p50-ms")
	b.ReportMetric(at(0.9), "p90-ms")
}

// timeCommand runs a program b.N times and reports its percentiles.
func timeCommand(b *testing.B, argv ...string) {
	b.Helper()
	samples := make([]time.Duration, 0, b.N)
	for b.Loop() {
		start := time.Now()
		out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
		if err != nil {
			b.Fatalf("%q: %v: %s", argv, err, out)
		}
		samples = append(samples, time.Since(start))
	}
	reportPercentiles(b, samples)
}

// BenchmarkRawBwrap is the baseline: a bare bubblewrap sandbox running
// /bin/true.
func BenchmarkRawBwrap(b *testing.B) {
	bwrap := testenv.RequireBwrap(b)
	timeCommand(b, bwrap, "--unshare-all", "--die-with-parent", "--ro-bind", "/usr", "/usr",
		"--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64", "--symlink", "usr/bin", "/bin",
		"--proc", "/proc", "--dev", "/dev", "/bin/true")
}

// BenchmarkRunTrue times `codes-sandbox run -- /bin/true`: a fresh runtime,
// sandbox, exec and verified wipe per run. The binary is named by
// BENCH_CODES_SANDBOX (scripts/bench-sandbox.sh builds it).
func BenchmarkRunTrue(b *testing.B) {
	testenv.RequireSandbox(b)
	bin := os.Getenv("BENCH_CODES_SANDBOX")
	if bin == "" {
		b.Skip("BENCH_CODES_SANDBOX is not set (run scripts/bench-sandbox.sh)")
	}
	timeCommand(b, bin, "run", "--", "/bin/true")
}

// BenchmarkExecTrue times exec of /bin/true in an existing sandbox.
func BenchmarkExecTrue(b *testing.B) {
	rt := newRuntime(b, Config{Capacity: 1})
	id := newBox(b, rt, Options{}).ID
	req := ExecRequest{Argv: []string{"/bin/true"}}
	samples := make([]time.Duration, 0, b.N)
	for b.Loop() {
		start := time.Now()
		res, err := rt.Exec(context.Background(), id, req, nil, nil)
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("exec: %v %+v", err, res)
		}
		samples = append(samples, time.Since(start))
	}
	reportPercentiles(b, samples)
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
	reportPercentiles(b, samples)
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
		if _, err := rt.Exec(context.Background(), info.ID, ExecRequest{Argv: []string{"/bin/true"}}, nil, nil); err != nil {
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
	reportPercentiles(b, samples)
}
