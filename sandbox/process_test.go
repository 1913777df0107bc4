package sandbox

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"openvibe.network/agentsandbox"
)

// outputOf collects a process's output until it ends.
func outputOf(tb testing.TB, rt *Runtime, id string, pid int, follow bool) (string, int64, Process) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	var out bytes.Buffer
	var dropped int64
	p, err := rt.Output(ctx, id, pid, follow, func(o Output) error {
		out.Write(o.Data)
		dropped += o.Dropped
		return nil
	})
	if err != nil {
		tb.Fatalf("Output: %v", err)
	}
	return out.String(), dropped, p
}

// TestBackgroundProcess: a dev server started in the background serves a
// second exec on the sandbox's loopback, is listed, ends on TERM, and is
// gone with the sandbox.
func TestBackgroundProcess(t *testing.T) {
	rt := newRuntime(t, Config{Capacity: 1})
	id := newBox(t, rt, Options{}).ID
	ctx := context.Background()
	srv, err := rt.Start(ctx, id, agentsandbox.ExecRequest{Argv: []string{"python3", "-m", "http.server", "8000", "--bind", "127.0.0.1"}})
	if err != nil || srv.Pid <= 1 || !srv.Running || !srv.Background {
		t.Fatalf("Start: %+v %v", srv, err)
	}
	out := shOK(t, rt, id, `for i in $(seq 100); do python3 -c 'import urllib.request as u; print(u.urlopen("http://127.0.0.1:8000/").status)' 2>/dev/null && break; sleep 0.05; done`)
	if strings.TrimSpace(out) != "200" {
		t.Fatalf("the background server did not answer: %q", out)
	}
	ps, err := rt.Processes(ctx, id)
	if err != nil || len(ps) < 2 || ps[0].Pid != srv.Pid || !ps[0].Running || ps[1].Background {
		t.Fatalf("Processes: %+v %v", ps, err)
	}
	if err := rt.Signal(ctx, id, srv.Pid, "TERM"); err != nil {
		t.Fatal(err)
	}
	log, _, end := outputOf(t, rt, id, srv.Pid, true)
	if end.Running || end.ExitCode == 0 || !strings.Contains(log, "GET / HTTP") {
		t.Fatalf("after TERM: %+v, log %q", end, log)
	}
	for _, tc := range []struct {
		name string
		err  error
		want error
	}{
		{"SignalEnded", rt.Signal(ctx, id, srv.Pid, "TERM"), ErrExited},
		{"StdinEnded", rt.Stdin(ctx, id, srv.Pid, strings.NewReader("late\n"), true), ErrExited},
		{"StdinUnknown", rt.Stdin(ctx, id, 99999, strings.NewReader("late\n"), true), ErrNoProcess},
		{"SignalUnknown", rt.Signal(ctx, id, 99999, "TERM"), ErrNoProcess},
		{"BadSignal", func() error {
			p, _ := rt.Start(ctx, id, agentsandbox.ExecRequest{Argv: []string{"sleep", "30"}})
			return rt.Signal(ctx, id, p.Pid, "BOOM")
		}(), ErrInvalid},
	} {
		if !errors.Is(tc.err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, tc.err, tc.want)
		}
	}
	if _, err := rt.Start(ctx, id, agentsandbox.ExecRequest{Argv: []string{"no-such-program"}}); !errors.Is(err, ErrInvalid) {
		t.Errorf("Start of a missing program: %v", err)
	}
}

// TestStdinInPieces: stdin written in pieces, then closed, reaches the
// command whole.
func TestStdinInPieces(t *testing.T) {
	rt := newRuntime(t, Config{Capacity: 1})
	id := newBox(t, rt, Options{}).ID
	ctx := context.Background()
	p, err := rt.Start(ctx, id, agentsandbox.ExecRequest{Argv: []string{"python3", "-c", "import sys; print(sys.stdin.read().upper())"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, piece := range []string{"hel", "lo ", "world"} {
		if err := rt.Stdin(ctx, id, p.Pid, strings.NewReader(piece), false); err != nil {
			t.Fatal(err)
		}
	}
	if err := rt.Stdin(ctx, id, p.Pid, nil, true); err != nil {
		t.Fatal(err)
	}
	if out, _, end := outputOf(t, rt, id, p.Pid, true); out != "HELLO WORLD\n" || end.ExitCode != 0 {
		t.Fatalf("output %q, end %+v", out, end)
	}
}

// TestOutputRing: a background command's buffer keeps the last MiB of its
// output, and a reader learns how much it missed.
func TestOutputRing(t *testing.T) {
	rt := newRuntime(t, Config{Capacity: 1})
	id := newBox(t, rt, Options{}).ID
	p, err := rt.Start(context.Background(), id, agentsandbox.ExecRequest{Argv: []string{"sh", "-c", "seq 1 400000"}})
	if err != nil {
		t.Fatal(err)
	}
	outputOf(t, rt, id, p.Pid, true) // until it ends
	out, dropped, _ := outputOf(t, rt, id, p.Pid, false)
	const total = 2_688_895 // bytes of `seq 1 400000`
	if int64(len(out))+dropped != total || len(out) > 1<<20 || !strings.HasSuffix(out, "399999\n400000\n") {
		t.Fatalf("kept %d bytes, dropped %d, want %d in all and at most 1 MiB kept", len(out), dropped, total)
	}
}

// TestTerminal: a command on a terminal sees one of the sandbox's own ptys
// of the size asked, a resize reaches it, typed input is echoed, and
// TIOCSTI stays refused.
func TestTerminal(t *testing.T) {
	rt := newRuntime(t, Config{Capacity: 1})
	id := newBox(t, rt, Options{}).ID
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	var out bytes.Buffer
	res, err := rt.Exec(ctx, id, agentsandbox.ExecRequest{TTY: true, Argv: []string{"sh", "-c",
		`tty; stty size; python3 -c 'import fcntl, termios, sys
try:
    fcntl.ioctl(0, termios.TIOCSTI, b"x"); print("tiocsti-allowed")
except OSError as e: print("tiocsti-refused", e.errno)'`}}, &out, io.Discard)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("exec on a terminal: %+v %v %q", res, err, out.String())
	}
	if got := strings.ReplaceAll(out.String(), "\r", ""); !strings.HasPrefix(got, "/dev/pts/") || !strings.Contains(got, "\n24 80\n") || !strings.Contains(got, "tiocsti-refused 1") {
		t.Fatalf("on a terminal: %q", got)
	}
	p, err := rt.Start(ctx, id, agentsandbox.ExecRequest{TTY: true, Rows: 30, Cols: 100, Argv: []string{"sh", "-c", "stty size; read line; stty size; echo got:$line"}})
	if err != nil {
		t.Fatal(err)
	}
	a, err := rt.Attach(ctx, id, p.Pid)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	var seen strings.Builder
	waitFor := func(want string) {
		t.Helper()
		for !strings.Contains(strings.ReplaceAll(seen.String(), "\r", ""), want) {
			o, _, err := a.Next()
			if err != nil {
				t.Fatalf("waiting for %q: %v (saw %q)", want, err, seen.String())
			}
			seen.Write(o.Data)
		}
	}
	waitFor("30 100\n")
	if err := a.Resize(40, 120); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // the resize and the input are two frames; let the first land
	if err := a.Input([]byte("hi\n")); err != nil {
		t.Fatal(err)
	}
	waitFor("hi\n")
	waitFor("40 120\ngot:hi\n")
	for {
		_, end, err := a.Next()
		if errors.Is(err, io.EOF) {
			if end.ExitCode != 0 || end.Running {
				t.Fatalf("end %+v", end)
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}
