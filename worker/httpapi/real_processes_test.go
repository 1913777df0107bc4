package httpapi

import (
	"context"
	"errors"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"openvibe.network/agentsandbox/client"
	"openvibe.network/agentsandbox/sandbox"
)

// The processes routes against real sandboxes, through the client.

// testCtx is a context the test's end cancels, bounded by d.
func testCtx(tb testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	tb.Cleanup(cancel)
	return ctx
}

// newSandbox creates a sandbox through the client; the test's end deletes
// it (a sandbox the test deleted already is no error).
func (api *realAPI) newSandbox(tb testing.TB, ctx context.Context, opts client.CreateOptions) *client.Sandbox {
	tb.Helper()
	info, err := api.w.Create(ctx, opts)
	if err != nil {
		tb.Fatalf("Create: %v", err)
	}
	sb := api.w.Sandbox(info.ID)
	tb.Cleanup(func() {
		if _, err := sb.Delete(context.Background()); err != nil && !errors.Is(err, client.ErrSandboxNotFound) {
			tb.Errorf("delete %s: %v", info.ID, err)
		}
	})
	return sb
}

// mustExec runs argv in the foreground and returns its stdout; an error or
// an exit other than 0 fails the test.
func mustExec(tb testing.TB, ctx context.Context, sb *client.Sandbox, argv ...string) string {
	tb.Helper()
	var stdout, stderr strings.Builder
	res, err := sb.Exec(ctx, client.ExecRequest{Argv: argv}, &stdout, &stderr)
	if err != nil || res.ExitCode != 0 {
		tb.Fatalf("exec %q: %+v %v (stderr %q)", argv, res, err, stderr.String())
	}
	return stdout.String()
}

// readUntil reads term until what it read matches re and returns the
// match; after waitLong it closes term, failing the test with what it read.
func readUntil(tb testing.TB, term *client.Terminal, re *regexp.Regexp) []string {
	tb.Helper()
	timer := time.AfterFunc(waitLong, func() { term.Close() })
	defer timer.Stop()
	var got []byte
	buf := make([]byte, 4096)
	for {
		if m := re.FindSubmatch(got); m != nil {
			out := make([]string, len(m))
			for i, s := range m {
				out[i] = string(s)
			}
			return out
		}
		n, err := term.Read(buf)
		got = append(got, buf[:n]...)
		if err != nil {
			tb.Fatalf("read until %s: %v; read %q", re, err, got)
		}
	}
}

// ignoreStart leaves the start time out of comparisons of records.
var ignoreStart = cmpopts.IgnoreFields(client.ProcessInfo{}, "StartedAt")

// fetchScript fetches http://127.0.0.1:8000/ from inside the sandbox,
// without any proxy, retrying while the server starts.
const fetchScript = `
import time, urllib.request
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
for i in range(400):
    try:
        print(opener.open("http://127.0.0.1:8000/", timeout=5).read().decode())
        break
    except OSError:
        time.sleep(0.05)
else:
    raise SystemExit("the server never answered")
`

// TestRealBackgroundServer: a dev server started in the background is
// reached from a second exec on the sandbox's loopback, listed, read with
// and without follow, signalled, and gone with its sandbox.
func TestRealBackgroundServer(t *testing.T) {
	api := newRealAPI(t, sandbox.Config{Capacity: 1}, nil)
	ctx := testCtx(t, 3*time.Minute)
	sb := api.newSandbox(t, ctx, client.CreateOptions{})
	if err := api.w.PutFile(ctx, sb.ID(), "hello.txt", strings.NewReader("hi"), 0); err != nil {
		t.Fatal(err)
	}

	argv := []string{"python3", "-m", "http.server", "8000", "--bind", "127.0.0.1"}
	srv, err := sb.Start(ctx, client.ExecRequest{Argv: argv})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	fetch := []string{"python3", "-c", fetchScript}
	if page := mustExec(t, ctx, sb, fetch...); !strings.Contains(page, "Directory listing for /") || !strings.Contains(page, "hello.txt") {
		t.Fatalf("the page of the server: %q", page)
	}

	ps, err := sb.Processes(ctx)
	if err != nil || len(ps) != 2 {
		t.Fatalf("Processes: %+v %v", ps, err)
	}
	want := []client.ProcessInfo{
		{Pid: srv.Pid(), Argv: argv, Background: true, State: "running"},
		{Pid: ps[1].Pid, Argv: fetch, State: "exited"},
	}
	if diff := cmp.Diff(want, ps, ignoreStart); diff != "" {
		t.Fatalf("Processes (-want +got):\n%s", diff)
	}
	if info, err := srv.Info(ctx); err != nil || !cmp.Equal(info, want[0], ignoreStart) || info.StartedAt.IsZero() {
		t.Fatalf("Info: %+v %v", info, err)
	}

	var logged strings.Builder
	rec, err := srv.Output(ctx, false, func(ev client.ExecEvent) error {
		if ev.Stream == "stderr" {
			logged.Write(ev.Data)
		}
		return nil
	})
	if err != nil || !cmp.Equal(rec, want[0], ignoreStart) || !strings.Contains(logged.String(), `"GET / HTTP/1.1" 200`) {
		t.Fatalf("Output: %+v %v; stderr %q", rec, err, logged.String())
	}

	if err := srv.Signal(ctx, "TERM"); err != nil {
		t.Fatalf("Signal: %v", err)
	}
	logged.Reset()
	rec, err = srv.Output(ctx, true, func(ev client.ExecEvent) error { logged.Write(ev.Data); return nil })
	exited := client.ProcessInfo{Pid: srv.Pid(), Argv: argv, Background: true, State: "exited", ExitCode: 128 + 15}
	if err != nil || !cmp.Equal(rec, exited, ignoreStart) || !strings.Contains(logged.String(), "GET /") {
		t.Fatalf("Output with follow: %v; output %q; diff (-want +got):\n%s", err, logged.String(), cmp.Diff(exited, rec, ignoreStart))
	}
	// Signal and stdin to the exited process: one answer for both, 409
	// process_exited.
	for name, err := range map[string]error{
		"Signal": srv.Signal(ctx, "TERM"),
		"Stdin":  srv.Stdin(ctx, strings.NewReader("late\n"), true),
	} {
		var apiErr *client.APIError
		if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusConflict || !errors.Is(err, client.ErrProcessExited) {
			t.Errorf("%s of an exited process: %v, want 409 process_exited", name, err)
		}
	}
	if _, err := sb.Process(999999).Info(ctx); !errors.Is(err, client.ErrProcessNotFound) {
		t.Fatalf("Info of an unknown pid: %v", err)
	}

	again, err := sb.Start(ctx, client.ExecRequest{Argv: argv})
	if err != nil {
		t.Fatalf("Start again: %v", err)
	}
	if rep, err := sb.Delete(ctx); err != nil || !rep.Verified {
		t.Fatalf("Delete: %+v %v", rep, err)
	}
	if _, err := again.Info(ctx); !errors.Is(err, client.ErrSandboxNotFound) {
		t.Fatalf("Info after Delete: %v", err)
	}
	if _, err := sb.Processes(ctx); !errors.Is(err, client.ErrSandboxNotFound) {
		t.Fatalf("Processes after Delete: %v", err)
	}
}

// TestRealTerminal: a command on a terminal of the sandbox's own sees the
// size it was started with, then the size of a resize; its exit ends the
// session.
func TestRealTerminal(t *testing.T) {
	api := newRealAPI(t, sandbox.Config{Capacity: 1}, nil)
	ctx := testCtx(t, 2*time.Minute)
	sb := api.newSandbox(t, ctx, client.CreateOptions{})

	term, err := sb.Terminal(ctx, client.TerminalOptions{Argv: []string{"sh"}, Rows: 30, Cols: 100})
	if err != nil {
		t.Fatalf("Terminal: %v", err)
	}
	defer term.Close()
	if _, err := io.WriteString(term, "stty size; tty\n"); err != nil {
		t.Fatal(err)
	}
	readUntil(t, term, regexp.MustCompile(`\b30 100\r\n/dev/pts/\d+\r\n`))
	if err := term.Resize(50, 160); err != nil {
		t.Fatalf("Resize: %v", err)
	}
	if _, err := io.WriteString(term, "stty size\n"); err != nil {
		t.Fatal(err)
	}
	readUntil(t, term, regexp.MustCompile(`\b50 160\r\n`))
	if _, err := io.WriteString(term, "exit 7\n"); err != nil {
		t.Fatal(err)
	}
	rec, err := term.Wait()
	want := client.ProcessInfo{Pid: term.Process().Pid(), Argv: []string{"sh"}, TTY: true, Background: true, State: "exited", ExitCode: 7}
	if err != nil || !cmp.Equal(rec, want, ignoreStart) {
		t.Fatalf("Wait: %v; diff (-want +got):\n%s", err, cmp.Diff(want, rec, ignoreStart))
	}
	if n, err := term.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Fatalf("Read after the exit: %d %v, want io.EOF", n, err)
	}
	if _, err := sb.Process(999999).Attach(ctx); !errors.Is(err, client.ErrProcessNotFound) {
		t.Fatalf("Attach to an unknown pid: %v", err)
	}
}

// lineWaiter is a writer that lets a test wait for a line in what was
// written to it.
type lineWaiter struct {
	mu   sync.Mutex
	buf  strings.Builder
	seen chan struct{} // signalled on every write
}

func newLineWaiter() *lineWaiter { return &lineWaiter{seen: make(chan struct{}, 1)} }

// Write implements io.Writer.
func (lw *lineWaiter) Write(p []byte) (int, error) {
	lw.mu.Lock()
	lw.buf.Write(p)
	lw.mu.Unlock()
	select {
	case lw.seen <- struct{}{}:
	default:
	}
	return len(p), nil
}

// String returns what was written.
func (lw *lineWaiter) String() string {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	return lw.buf.String()
}

// wait waits until line was written, or ctx ends.
func (lw *lineWaiter) wait(ctx context.Context, line string) error {
	for !strings.Contains(lw.String(), line+"\n") {
		select {
		case <-lw.seen:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// upperScript reads all of stdin and prints it in upper case.
const upperScript = "import sys; print(sys.stdin.read().upper())"

// TestRealStdinStreamed: stdin reaches a command in pieces, as it is
// written, through Run and through the stdin route; a run whose ctx ends
// kills its command.
func TestRealStdinStreamed(t *testing.T) {
	api := newRealAPI(t, sandbox.Config{Capacity: 1}, nil)
	ctx := testCtx(t, 2*time.Minute)
	sb := api.newSandbox(t, ctx, client.CreateOptions{})

	t.Run("RunInPieces", func(t *testing.T) {
		pr, pw := io.Pipe()
		go func() {
			for _, piece := range []string{"hello ", "streamed ", "world"} {
				if _, err := io.WriteString(pw, piece); err != nil {
					return
				}
			}
			pw.Close()
		}()
		var out strings.Builder
		res, err := sb.Run(ctx, client.ExecRequest{Argv: []string{"python3", "-c", upperScript}}, pr, &out, nil)
		if err != nil || res != (client.ExecResult{}) || out.String() != "HELLO STREAMED WORLD\n" {
			t.Fatalf("Run: %+v %v %q", res, err, out.String())
		}
	})

	t.Run("RunAsWritten", func(t *testing.T) {
		// Each line is written only once the echo of the last came back:
		// stdin held back until its end would never finish.
		pr, pw := io.Pipe()
		out := newLineWaiter()
		go func() {
			for _, line := range []string{"one", "two", "three"} {
				if _, err := io.WriteString(pw, line+"\n"); err != nil || out.wait(ctx, strings.ToUpper(line)) != nil {
					return
				}
			}
			pw.Close()
		}()
		script := "import sys\nfor line in sys.stdin: print(line.strip().upper(), flush=True)"
		res, err := sb.Run(ctx, client.ExecRequest{Argv: []string{"python3", "-c", script}}, pr, out, nil)
		if err != nil || res.ExitCode != 0 || out.String() != "ONE\nTWO\nTHREE\n" {
			t.Fatalf("Run: %+v %v %q", res, err, out.String())
		}
	})

	t.Run("StdinRoute", func(t *testing.T) {
		p, err := sb.Start(ctx, client.ExecRequest{Argv: []string{"python3", "-c", upperScript}})
		if err != nil {
			t.Fatalf("Start: %v", err)
		}
		for _, piece := range []struct {
			data  string
			close bool
		}{{"hello ", false}, {"in ", false}, {"pieces", true}} {
			if err := p.Stdin(ctx, strings.NewReader(piece.data), piece.close); err != nil {
				t.Fatalf("Stdin %q: %v", piece.data, err)
			}
		}
		var out strings.Builder
		rec, err := p.Output(ctx, true, func(ev client.ExecEvent) error { out.Write(ev.Data); return nil })
		if err != nil || rec.State != "exited" || rec.ExitCode != 0 || out.String() != "HELLO IN PIECES\n" {
			t.Fatalf("Output: %+v %v %q", rec, err, out.String())
		}
	})

	t.Run("RunCancelledKills", func(t *testing.T) {
		runCtx, cancel := context.WithCancel(ctx)
		defer cancel()
		pr, pw := io.Pipe() // never closed: cat would run on
		defer pw.Close()
		out := newLineWaiter()
		go func() {
			if _, err := io.WriteString(pw, "x\n"); err == nil && out.wait(runCtx, "x") == nil {
				cancel()
			}
		}()
		_, err := sb.Run(runCtx, client.ExecRequest{Argv: []string{"cat"}}, pr, out, nil)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Run with its ctx cancelled: %v", err)
		}
		ps, err := sb.Processes(ctx)
		if err != nil {
			t.Fatal(err)
		}
		cat := ps[len(ps)-1]
		waitFor(t, func() bool {
			info, err := sb.Process(cat.Pid).Info(ctx)
			return err == nil && !info.Running()
		})
		if info, _ := sb.Process(cat.Pid).Info(ctx); info.ExitCode != 128+9 || !slices.Equal(info.Argv, []string{"cat"}) {
			t.Fatalf("cat after the run ended: %+v", info)
		}
	})
}
