package httpapi

import (
	"context"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"openvibe.network/agentsandbox/client"
	"openvibe.network/agentsandbox/sandbox"
)

// promptly bounds a request that a slow attached reader must not delay.
const promptly = 10 * time.Second

// stalled is how long the slow reader of TestRealSlowAttachReader stops
// reading: far longer than `yes` needs to fill every buffer on the way.
const stalled = 2 * time.Second

// TestRealSlowAttachReader: while an attached client stops reading a
// process that writes flat out, the same sandbox and another one answer
// execs and the worker its status, promptly; once the client reads again
// it learns what it missed from a dropped message, and the exit follows.
func TestRealSlowAttachReader(t *testing.T) {
	api := newRealAPI(t, sandbox.Config{Capacity: 2}, nil)
	ctx := testCtx(t, 3*time.Minute)
	sb := api.newSandbox(t, ctx, client.CreateOptions{})
	other := api.newSandbox(t, ctx, client.CreateOptions{})

	yes, err := sb.Start(ctx, client.ExecRequest{Argv: []string{"yes", strings.Repeat("y", 99)}})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	term, err := yes.Attach(ctx)
	if err != nil {
		t.Fatalf("Attach: %v", err)
	}
	defer term.Close()
	readUntil(t, term, regexp.MustCompile(`y{99}\n`))

	// Nobody reads term now.
	for start := time.Now(); time.Since(start) < stalled; {
		for _, s := range []*client.Sandbox{sb, other} {
			execCtx, cancel := context.WithTimeout(ctx, promptly)
			if out := mustExec(t, execCtx, s, "echo", "ok"); out != "ok\n" {
				t.Fatalf("exec in %s: %q", s.ID(), out)
			}
			cancel()
		}
		statusCtx, cancel := context.WithTimeout(ctx, promptly)
		if _, err := api.w.Status(statusCtx); err != nil {
			t.Fatalf("Status: %v", err)
		}
		cancel()
	}

	timer := time.AfterFunc(waitLong, func() { term.Close() })
	defer timer.Stop()
	buf := make([]byte, 64<<10)
	for term.Dropped() == 0 {
		if _, err := term.Read(buf); err != nil {
			t.Fatalf("Read until a dropped message: %v", err)
		}
	}
	if err := yes.Signal(ctx, "KILL"); err != nil {
		t.Fatalf("Signal: %v", err)
	}
	if rec, err := term.Wait(); err != nil || rec.State != "exited" || rec.ExitCode != 128+9 {
		t.Fatalf("Wait: %+v %v", rec, err)
	}
}

// percentiles reports the p50 and p99 of ds in microseconds as metrics
// named prefix-p50-us and prefix-p99-us.
func percentiles(b *testing.B, prefix string, ds []time.Duration) {
	slices.Sort(ds)
	for _, p := range []int{50, 99} {
		b.ReportMetric(float64(ds[(len(ds)-1)*p/100])/float64(time.Microsecond), prefix+"-p"+strconv.Itoa(p)+"-us")
	}
}

// BenchmarkAttachEcho measures a round trip on an attached terminal
// through the API against the real runtime: one byte typed into `cat` on
// a raw terminal, until its echo is read back. It reports the p50 and p99
// in microseconds. Run with -benchtime=200x for 200 round trips.
func BenchmarkAttachEcho(b *testing.B) {
	api := newRealAPI(b, sandbox.Config{Capacity: 1}, nil)
	ctx := testCtx(b, 10*time.Minute)
	sb := api.newSandbox(b, ctx, client.CreateOptions{})
	term, err := sb.Terminal(ctx, client.TerminalOptions{Argv: []string{"sh", "-c", "stty raw -echo; echo ready; exec cat"}})
	if err != nil {
		b.Fatalf("Terminal: %v", err)
	}
	defer term.Close()
	readUntil(b, term, regexp.MustCompile(`ready\n`))
	in, out := []byte{'x'}, make([]byte, 1)
	var ds []time.Duration
	for b.Loop() {
		start := time.Now()
		if _, err := term.Write(in); err != nil {
			b.Fatalf("Write: %v", err)
		}
		if _, err := io.ReadFull(term, out); err != nil || out[0] != 'x' {
			b.Fatalf("Read: %q %v", out, err)
		}
		ds = append(ds, time.Since(start))
	}
	percentiles(b, "echo", ds)
}

// BenchmarkStartBackground measures the start of a background command
// through the API against the real runtime: POST …/exec with background
// until its 201. It reports the p50 and p99 in microseconds. Run with
// -benchtime=200x for 200 starts.
func BenchmarkStartBackground(b *testing.B) {
	api := newRealAPI(b, sandbox.Config{Capacity: 1}, nil)
	ctx := testCtx(b, 10*time.Minute)
	sb := api.newSandbox(b, ctx, client.CreateOptions{})
	var ds []time.Duration
	for b.Loop() {
		start := time.Now()
		p, err := sb.Start(ctx, client.ExecRequest{Argv: []string{"/bin/true"}})
		ds = append(ds, time.Since(start))
		if err != nil {
			b.Fatalf("Start: %v", err)
		}
		b.StopTimer()
		if _, err := p.Wait(ctx); err != nil { // untimed: the next start finds the sandbox idle
			b.Fatalf("Wait: %v", err)
		}
		b.StartTimer()
	}
	percentiles(b, "start", ds)
}
