package httpapi

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"openvibe.network/agentsandbox"
	"openvibe.network/agentsandbox/client"
	"openvibe.network/agentsandbox/inside"
	"openvibe.network/agentsandbox/inside/bridge"
	"openvibe.network/agentsandbox/internal/imagetest"
	"openvibe.network/agentsandbox/internal/testenv"
	"openvibe.network/agentsandbox/sandbox"
)

// TestMain lets this test binary serve as the sandbox's launcher and init
// (with the egress bridge), as codes-sandbox does.
func TestMain(m *testing.M) {
	if code, ok := inside.MaybeRun(inside.Hooks{Bridge: bridge.Run}); ok {
		os.Exit(code)
	}
	code := m.Run()
	imagetest.Cleanup()
	os.Exit(code)
}

// Runtime is what *sandbox.Runtime offers.
var _ Runtime = (*sandbox.Runtime)(nil)

// newRealWorker serves the API on a real sandbox runtime with capacity
// slots and returns a client of it.
func newRealWorker(tb testing.TB, capacity int, limits agentsandbox.Limits) *client.Worker {
	w, _ := newRealWorkerPool(tb, capacity, 0, limits)
	return w
}

// newRealWorkerPool is newRealWorker with pool sandboxes started ahead; it
// returns the runtime too.
func newRealWorkerPool(tb testing.TB, capacity, pool int, limits agentsandbox.Limits) (*client.Worker, *sandbox.Runtime) {
	tb.Helper()
	api := newRealAPI(tb, sandbox.Config{Capacity: capacity, Pool: pool}, func(c *Config) { c.Limits = limits })
	return api.w, api.rt
}

// realAPI is the API served on a real sandbox runtime: a client of it, the
// runtime and the server.
type realAPI struct {
	w   *client.Worker
	rt  *sandbox.Runtime
	srv *httptest.Server
}

// newRealAPI serves the API on a real runtime of rcfg; mod adjusts the
// API's Config.
func newRealAPI(tb testing.TB, rcfg sandbox.Config, mod func(*Config)) *realAPI {
	tb.Helper()
	testenv.RequireSandbox(tb)
	rt, err := sandbox.NewRuntime(rcfg)
	if err != nil {
		tb.Fatalf("NewRuntime: %v", err)
	}
	tb.Cleanup(func() {
		if err := rt.Close(); err != nil {
			tb.Errorf("close runtime: %v", err)
		}
	})
	cfg := Config{Runtime: rt, Token: testToken}
	if mod != nil {
		mod(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	srv := httptest.NewServer(s.Handler())
	tb.Cleanup(srv.Close)
	return &realAPI{w: client.NewWorker(srv.URL, testToken, srv.Client()), rt: rt, srv: srv}
}

// TestRealRuntime drives a real sandbox through the API with the client:
// create, exec with both streams and an exit code, files in and out, a
// path that leaves the workspace, delete with a verified wipe.
func TestRealRuntime(t *testing.T) {
	w := newRealWorker(t, 1, agentsandbox.Limits{DiskMB: 4})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	sb, err := w.Create(ctx, client.CreateOptions{TimeBoxMinutes: 5, Env: map[string]string{"GREETING": "hi"}})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	deleted := false
	t.Cleanup(func() {
		if !deleted {
			_, _ = w.Delete(context.Background(), sb.ID)
		}
	})
	if _, err := w.Create(ctx, client.CreateOptions{}); !errors.Is(err, client.ErrCapacity) {
		t.Fatalf("second Create on one slot: %v, want ErrCapacity", err)
	}

	var stdout, stderr bytes.Buffer
	res, err := w.Exec(ctx, sb.ID, client.ExecRequest{Argv: []string{"sh", "-c", "echo out; echo err >&2; echo $GREETING; exit 3"}}, &stdout, &stderr)
	if err != nil || res.ExitCode != 3 || res.Reason != "" {
		t.Fatalf("Exec: %+v %v (stderr %q)", res, err, stderr.String())
	}
	if stdout.String() != "out\nhi\n" || stderr.String() != "err\n" {
		t.Fatalf("stdout %q stderr %q", stdout.String(), stderr.String())
	}

	// Output streams while the command runs: it waits for a file that the
	// client writes only once the first line has arrived.
	var events []string
	res, err = w.ExecStream(ctx, sb.ID, client.ExecRequest{Argv: []string{"sh", "-c", "echo first; while [ ! -e go ]; do sleep 0.05; done; echo second"}},
		func(ev client.ExecEvent) error {
			events = append(events, ev.Stream+":"+string(ev.Data))
			if len(events) == 1 {
				return w.PutFile(ctx, sb.ID, "go", strings.NewReader(""), 0)
			}
			return nil
		})
	if err != nil || res.ExitCode != 0 || strings.Join(events, "|") != "stdout:first\n|stdout:second\n" {
		t.Fatalf("ExecStream: %+v %v %q", res, err, events)
	}

	content := "binary\x00\xff and text\n"
	if err := w.PutFile(ctx, sb.ID, "dir/in.bin", strings.NewReader(content), 0o755); err != nil {
		t.Fatalf("PutFile: %v", err)
	}
	stdout.Reset()
	res, err = w.Exec(ctx, sb.ID, client.ExecRequest{Argv: []string{"sh", "-c", "stat -c %a in.bin; cat in.bin > out.bin"}, Cwd: "dir"}, &stdout, nil)
	if err != nil || res.ExitCode != 0 || stdout.String() != "755\n" {
		t.Fatalf("Exec in dir: %+v %v %q", res, err, stdout.String())
	}
	var got bytes.Buffer
	if err := w.GetFile(ctx, sb.ID, "dir/out.bin", &got); err != nil || got.String() != content {
		t.Fatalf("GetFile: %q %v", got.String(), err)
	}
	if err := w.GetFile(ctx, sb.ID, "dir/missing", &got); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("GetFile of a missing file: %v", err)
	}
	if err := w.PutFile(ctx, sb.ID, "../../etc/x", strings.NewReader("x"), 0); err == nil || !strings.Contains(err.Error(), "400") {
		t.Fatalf("PutFile outside the workspace: %v", err)
	}

	err = w.PutFile(ctx, sb.ID, "big", bytes.NewReader(make([]byte, 8<<20)), 0)
	if ae := (*client.APIError)(nil); !errors.As(err, &ae) || ae.Code != "workspace_full" {
		t.Fatalf("PutFile over the disk limit: %v", err)
	}

	res, err = w.Exec(ctx, sb.ID, client.ExecRequest{Argv: []string{"sleep", "60"}, Timeout: time.Second}, nil, nil)
	if err != nil || res.Reason != "timeout" {
		t.Fatalf("Exec with a timeout: %+v %v", res, err)
	}

	list, err := w.List(ctx)
	if err != nil || !slices.ContainsFunc(list, func(s client.SandboxInfo) bool { return s.ID == sb.ID }) {
		t.Fatalf("List: %+v %v", list, err)
	}
	if rep, err := w.Delete(ctx, sb.ID); err != nil || !rep.Verified || rep.Duration <= 0 {
		t.Fatalf("Delete: %+v %v", rep, err)
	}
	deleted = true
	if _, err := w.Exec(ctx, sb.ID, client.ExecRequest{Argv: []string{"true"}}, nil, nil); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("Exec after Delete: %v", err)
	}
	st, err := w.Status(ctx)
	if err != nil || st.Capacity != 1 || st.Active != 0 {
		t.Fatalf("Status after Delete: %+v %v", st, err)
	}
}

// rounds collects the durations of the phases of benchmark rounds.
type rounds map[string][]time.Duration

// timed runs f and adds its duration to phase.
func (r rounds) timed(phase string, f func()) {
	start := time.Now()
	f()
	r[phase] = append(r[phase], time.Since(start))
}

// report reports the p50 and p90 of each phase in milliseconds.
func (r rounds) report(b *testing.B) {
	for phase, ds := range r {
		slices.Sort(ds)
		for _, p := range []int{50, 90} {
			b.ReportMetric(float64(ds[(len(ds)-1)*p/100])/float64(time.Millisecond), phase+"-p"+strconv.Itoa(p)+"-ms")
		}
	}
}

// BenchmarkRealRoundTrip measures create + exec /bin/true + delete through
// the API with the client against the real runtime, and reports the p50
// and p90 of a round and of each call in milliseconds: "cold" without a
// pool (every create starts a sandbox), "pooled" with one sandbox started
// ahead (the wait for the pool to refill between rounds is not timed: an
// agent's sandboxes live far longer than a start). Run with -benchtime=100x
// for 100 rounds.
func BenchmarkRealRoundTrip(b *testing.B) {
	for _, tc := range []struct {
		name string
		pool int
	}{{"cold", 0}, {"pooled", 1}} {
		b.Run(tc.name, func(b *testing.B) {
			w, rt := newRealWorkerPool(b, 1, tc.pool, agentsandbox.Limits{})
			roundTrips(b, w, func() {
				for rt.Pooled() < tc.pool {
					time.Sleep(time.Millisecond)
				}
			})
		})
	}
}

// roundTrips runs the create, exec, delete rounds of BenchmarkRealRoundTrip,
// calling ready (untimed) before each.
func roundTrips(b *testing.B, w *client.Worker, ready func()) {
	ctx := context.Background()
	r := rounds{}
	for b.Loop() {
		b.StopTimer()
		ready()
		b.StartTimer()
		start := time.Now()
		var sb client.SandboxInfo
		var err error
		r.timed("create", func() { sb, err = w.Create(ctx, client.CreateOptions{}) })
		if err != nil {
			b.Fatalf("Create: %v", err)
		}
		var res client.ExecResult
		r.timed("exec", func() { res, err = w.Exec(ctx, sb.ID, client.ExecRequest{Argv: []string{"/bin/true"}}, nil, nil) })
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("Exec: %+v %v", res, err)
		}
		r.timed("delete", func() { _, err = w.Delete(ctx, sb.ID) })
		if err != nil {
			b.Fatalf("Delete: %v", err)
		}
		r["round"] = append(r["round"], time.Since(start))
	}
	r.report(b)
}

// BenchmarkRealRuntimeDirect is BenchmarkRealRoundTrip without the API:
// the same calls on the runtime itself, to show what HTTP adds.
func BenchmarkRealRuntimeDirect(b *testing.B) {
	testenv.RequireSandbox(b)
	rt, err := sandbox.NewRuntime(sandbox.Config{Capacity: 1})
	if err != nil {
		b.Fatalf("NewRuntime: %v", err)
	}
	defer rt.Close()
	ctx := context.Background()
	r := rounds{}
	for b.Loop() {
		start := time.Now()
		info, err := rt.Create(ctx, sandbox.Options{})
		if err != nil {
			b.Fatalf("Create: %v", err)
		}
		res, err := rt.Exec(ctx, info.ID, agentsandbox.ExecRequest{Argv: []string{"/bin/true"}}, io.Discard, io.Discard)
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("Exec: %+v %v", res, err)
		}
		if rep, err := rt.Delete(ctx, info.ID); err != nil || !rep.Verified {
			b.Fatalf("Delete: %+v %v", rep, err)
		}
		r["round"] = append(r["round"], time.Since(start))
	}
	r.report(b)
}
