package sandbox

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"openvibe.network/agentsandbox"
)

// TestRun covers the one-command sandbox of `codes-sandbox run`: the same
// isolation, streams handed over directly, limits named, a verified wipe.
func TestRun(t *testing.T) {
	rt := newRuntime(t, Config{Capacity: 1})
	for _, tc := range []struct {
		name       string
		opts       Options
		argv       []string
		stdin      string
		wantCode   int
		wantReason string
		wantOut    string
	}{
		{name: "ExitCode", argv: []string{"sh", "-c", "exit 7"}, wantCode: 7},
		{name: "Streams", argv: []string{"sh", "-c", "tr a-z A-Z; ls /proc/self/fd | tr '\\n' ' '"}, stdin: "abc\n", wantOut: "ABC\n0 1 2 3 "},
		{name: "Isolation", argv: []string{"sh", "-c", "id -u; grep -E '^(CapEff|Seccomp):' /proc/self/status | cut -f2; tail -n +3 /proc/net/dev | cut -d: -f1"},
			wantOut: "1000\n0000000000000000\n2\n    lo\n"},
		{name: "Env", opts: Options{Env: map[string]string{"A": "b"}}, argv: []string{"sh", "-c", "env | sort"},
			wantOut: "A=b\nHOME=/workspace\nLANG=C.UTF-8\nPATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\nPWD=/workspace\nTERM=dumb\nUSER=sandbox\n"},
		{name: "TimeBox", opts: Options{TimeBox: time.Second}, argv: []string{"sleep", "60"}, wantCode: 137, wantReason: "time_box"},
		{name: "Memory", opts: Options{Limits: agentsandbox.Limits{MemoryMB: 64}}, argv: []string{"python3", "-c", "x = b'a' * (512 << 20)"}, wantCode: 137, wantReason: "memory"},
		{name: "Pids", opts: Options{Limits: agentsandbox.Limits{Pids: 24}}, argv: []string{"sh", "-c", "i=0; while [ $i -lt 100 ]; do sleep 30 & i=$((i+1)); done; wait"}, wantCode: 2, wantReason: "pids"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			var out bytes.Buffer
			res, rep, err := rt.Run(ctx, tc.opts, tc.argv, strings.NewReader(tc.stdin), &out, &bytes.Buffer{})
			if err != nil {
				t.Fatal(err)
			}
			if res.ExitCode != tc.wantCode || res.Reason != tc.wantReason || (tc.wantOut != "" && out.String() != tc.wantOut) {
				t.Fatalf("got %+v %q, want exit %d reason %q out %q", res, out.String(), tc.wantCode, tc.wantReason, tc.wantOut)
			}
			if !rep.Verified || rt.Active() != 0 {
				t.Fatalf("wipe %+v, active %d", rep, rt.Active())
			}
		})
	}
	t.Run("Cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		out := &signalWriter{want: "started", seen: make(chan struct{})}
		go func() { <-out.seen; cancel() }()
		res, rep, err := rt.Run(ctx, Options{}, []string{"sh", "-c", "echo started; exec sleep 60"}, nil, out, &bytes.Buffer{})
		if !errors.Is(err, context.Canceled) || res.Reason != "deleted" || !rep.Verified {
			t.Fatalf("cancelled run: %v %+v %+v", err, res, rep)
		}
	})
	t.Run("ErrEgress", func(t *testing.T) {
		if _, _, err := rt.Run(context.Background(), Options{Egress: true}, []string{"true"}, nil, nil, nil); err == nil {
			t.Fatal("Run with egress succeeded")
		}
	})
}

// TestRunCapsLimits: a one-command sandbox's command has the descriptor
// limit, soft and hard, and no core dumps, whichever first process it
// starts with (the command itself, its limits set by the runtime while
// bubblewrap holds it; util-linux's prlimit; the init's shim where the host
// has neither), sees no descriptor of the runtime's, and a command that
// cannot be run exits as a shell's would (such a command never starts as
// itself: in the "command" way it goes through the shim); a command the
// host's view finds missing is ErrNoCommand, before any sandbox starts.
func TestRunCapsLimits(t *testing.T) {
	for _, way := range []string{"command", "prlimit", "init-shim"} {
		t.Run(way, func(t *testing.T) {
			rt := newRuntime(t, Config{Capacity: 1, MaxOpenFiles: 300})
			switch {
			case way == "command":
				// Whatever does not start as the command itself goes
				// through the shim, which /.init shows.
				rt.prlimit = ""
			case way == "init-shim":
				rt.prlimit, rt.view = "", commandView{}
			case rt.prlimit == "":
				t.Fatalf("no usable %s on this host (util-linux)", prlimitPath)
			default:
				rt.view = commandView{}
			}
			first := map[string]string{"command": "no-init", "prlimit": "no-init", "init-shim": "init-shim"}[way]
			for _, tc := range []struct {
				name     string
				argv     []string
				wantCode int
				wantOut  string
				wantErr  error
			}{
				{"FirstProcess", []string{"sh", "-c", "test -e /.init && echo init-shim || echo no-init"}, 0, first + "\n", nil},
				{"Limits", []string{"sh", "-c", "ulimit -n; ulimit -Hn; ulimit -c; ulimit -n 301 2>/dev/null || echo refused"}, 0, "300\n300\n0\nrefused\n", nil},
				{"Descriptors", []string{"ls", "/proc/self/fd"}, 0, "0\n1\n2\n3\n", nil},
				{"NotFound", []string{"./no-such-command"}, 127, "", nil},
				{"NotExecutable", []string{"/workspace"}, 126, "", nil},
				{"NotInView", []string{"no-such-command"}, 127, "", map[string]error{"command": ErrNoCommand}[way]},
			} {
				t.Run(tc.name, func(t *testing.T) {
					var out, errOut bytes.Buffer
					res, rep, err := rt.Run(context.Background(), Options{}, tc.argv, nil, &out, &errOut)
					if tc.wantErr != nil {
						if !errors.Is(err, tc.wantErr) || rep.Verified || len(rep.Leftovers) > 0 {
							t.Fatalf("err %v, wipe %+v; want %v before any sandbox", err, rep, tc.wantErr)
						}
						return
					}
					if err != nil {
						t.Fatal(err)
					}
					if res.ExitCode != tc.wantCode || out.String() != tc.wantOut || !rep.Verified {
						t.Fatalf("got exit %d %q (stderr %q), wipe %+v; want exit %d %q", res.ExitCode, out.String(), errOut.String(), rep, tc.wantCode, tc.wantOut)
					}
				})
			}
		})
	}
}

// TestRunInheritableDescriptor: a descriptor of the runtime's process that
// is not close-on-exec never reaches a one-command sandbox's command: the
// run starts with the init's shim, which closes it, instead of prlimit.
func TestRunInheritableDescriptor(t *testing.T) {
	rt := newRuntime(t, Config{Capacity: 1})
	fd, err := unix.Dup(2) // no close-on-exec
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	res, rep, err := rt.Run(context.Background(), Options{}, []string{"sh", "-c", "test -e /.init && echo init-shim; ls /proc/self/fd"}, nil, &out, &bytes.Buffer{})
	unix.Close(fd)
	if err != nil || res.ExitCode != 0 || !rep.Verified {
		t.Fatalf("run: %v %+v %+v", err, res, rep)
	}
	if want := "init-shim\n0\n1\n2\n3\n"; out.String() != want {
		t.Fatalf("got %q, want %q (descriptor %d inherited)", out.String(), want, fd)
	}
}

// TestRunCancelledBeforeStart: a run whose context is already done fails
// with the context's error, never runs its command and is wiped, whichever
// its first process.
func TestRunCancelledBeforeStart(t *testing.T) {
	for _, way := range []string{"command", "prlimit", "init-shim"} {
		t.Run(way, func(t *testing.T) {
			rt := newRuntime(t, Config{Capacity: 1})
			switch way {
			case "prlimit":
				rt.view = commandView{}
			case "init-shim":
				rt.prlimit, rt.view = "", commandView{}
			}
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			for range 5 {
				var out bytes.Buffer
				_, rep, err := rt.Run(ctx, Options{}, []string{"echo", "ran"}, nil, &out, &bytes.Buffer{})
				if !errors.Is(err, context.Canceled) || !rep.Verified || out.Len() != 0 {
					t.Fatalf("run: %v, wipe %+v, output %q; want context.Canceled, a verified wipe and no output", err, rep, out.String())
				}
			}
		})
	}
}
