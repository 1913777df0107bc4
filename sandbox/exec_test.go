package sandbox

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"openvibe.network/agentsandbox"
	"openvibe.network/agentsandbox/internal/unixsock"
)

// signalWriter reports on a channel once what was written contains want.
type signalWriter struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	want string
	seen chan struct{}
}

func (s *signalWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	had := strings.Contains(s.buf.String(), s.want)
	s.buf.Write(p)
	if !had && strings.Contains(s.buf.String(), s.want) {
		close(s.seen)
	}
	return len(p), nil
}

func TestExec(t *testing.T) {
	rt := newRuntime(t, Config{Capacity: 2})
	id := newBox(t, rt, Options{Env: map[string]string{"FROM_OPTIONS": "1", "LANG": "C"}}).ID

	t.Run("Streaming", func(t *testing.T) {
		// The command waits for stdin that is written only after its first
		// line arrived: without streaming this would never finish.
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		out := &signalWriter{want: "first\n", seen: make(chan struct{})}
		pr, pw := io.Pipe()
		go func() {
			select {
			case <-out.seen:
				_, _ = pw.Write([]byte("go\n"))
				pw.Close()
			case <-ctx.Done():
				pw.CloseWithError(ctx.Err())
			}
		}()
		res, err := rt.ExecStream(ctx, id, agentsandbox.ExecRequest{Argv: []string{"sh", "-c", "echo first; read x; echo second $x"}}, pr, out, io.Discard)
		if err != nil || res.ExitCode != 0 || out.buf.String() != "first\nsecond go\n" {
			t.Fatalf("streaming: %v %+v %q", err, res, out.buf.String())
		}
	})
	t.Run("Stdin", func(t *testing.T) {
		r := run(t, rt, id, agentsandbox.ExecRequest{Argv: []string{"cat"}, Stdin: []byte("abc")})
		if r.stdout != "abc" {
			t.Fatalf("stdout %q", r.stdout)
		}
	})
	t.Run("Cwd", func(t *testing.T) {
		shOK(t, rt, id, "mkdir -p sub/dir")
		for _, cwd := range []string{"sub/dir", "/workspace/sub/dir", "./sub/../sub/dir"} {
			r := run(t, rt, id, agentsandbox.ExecRequest{Argv: []string{"pwd"}, Cwd: cwd})
			if r.stdout != "/workspace/sub/dir\n" {
				t.Errorf("cwd %q: pwd %q", cwd, r.stdout)
			}
		}
		for _, cwd := range []string{"../etc", "/etc", "/workspace/../etc"} {
			_, err := rt.Exec(context.Background(), id, agentsandbox.ExecRequest{Argv: []string{"pwd"}, Cwd: cwd}, io.Discard, io.Discard)
			if !errors.Is(err, ErrPath) {
				t.Errorf("cwd %q: %v, want ErrPath", cwd, err)
			}
		}
	})
	t.Run("Env", func(t *testing.T) {
		r := run(t, rt, id, agentsandbox.ExecRequest{Argv: []string{"/usr/bin/env"}, Env: map[string]string{"FROM_REQUEST": "2"}})
		got := strings.Split(strings.TrimSpace(r.stdout), "\n")
		sort.Strings(got)
		want := []string{"FROM_OPTIONS=1", "FROM_REQUEST=2", "HOME=/workspace", "LANG=C",
			"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "PWD=/workspace", "TERM=dumb", "USER=sandbox"}
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Fatalf("env:\n%q\nwant\n%q", got, want)
		}
	})
	t.Run("ExitCodes", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			argv []string
			want int
		}{
			{"Zero", []string{"true"}, 0},
			{"Three", []string{"sh", "-c", "exit 3"}, 3},
			{"Killed", []string{"sh", "-c", "kill -9 $$"}, 137},
			{"NotFound", []string{"no-such-program"}, 127},
			{"NotExecutable", []string{"/etc/passwd"}, 126},
		} {
			t.Run(tc.name, func(t *testing.T) {
				if r := run(t, rt, id, agentsandbox.ExecRequest{Argv: tc.argv}); r.ExitCode != tc.want || r.Reason != "" {
					t.Fatalf("exit %d reason %q, want %d", r.ExitCode, r.Reason, tc.want)
				}
			})
		}
	})
	t.Run("Concurrent", func(t *testing.T) {
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := run(t, rt, id, agentsandbox.ExecRequest{Argv: []string{"sh", "-c", "echo $N; echo err >&2"}, Env: map[string]string{"N": string(rune('a' + i))}})
				if r.stdout != string(rune('a'+i))+"\n" || r.stderr != "err\n" {
					t.Errorf("exec %d: %q %q", i, r.stdout, r.stderr)
				}
			}()
		}
		wg.Wait()
	})
	t.Run("CancelKills", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		out := &signalWriter{want: "started", seen: make(chan struct{})}
		go func() { <-out.seen; cancel() }()
		_, err := rt.Exec(ctx, id, agentsandbox.ExecRequest{Argv: []string{"sh", "-c", "echo started; exec sleep 60"}}, out, io.Discard)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled exec: %v", err)
		}
		// The init kills the group once it sees the connection close.
		r := run(t, rt, id, agentsandbox.ExecRequest{Argv: []string{"sh", "-c", "while pgrep -x sleep >/dev/null; do sleep 0.05; done; echo gone"}, Timeout: time.Minute})
		if r.stdout != "gone\n" {
			t.Fatalf("the cancelled command survived: %+v", r)
		}
	})
	t.Run("UnknownSandbox", func(t *testing.T) {
		if _, err := rt.Exec(context.Background(), "nope", agentsandbox.ExecRequest{Argv: []string{"true"}}, nil, nil); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Exec: %v", err)
		}
		if _, err := rt.Delete(context.Background(), "nope"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Delete: %v", err)
		}
	})
}

// TestTwoSandboxes proves two sandboxes cannot see each other's processes
// or files.
func TestTwoSandboxes(t *testing.T) {
	rt := newRuntime(t, Config{Capacity: 2})
	a := newBox(t, rt, Options{})
	b := newBox(t, rt, Options{})
	if a.HostUID == b.HostUID {
		t.Fatalf("both sandboxes run as host uid %d", a.HostUID)
	}
	shOK(t, rt, a.ID, "echo secret-a > /workspace/a.txt; echo secret-a > /tmp/a.txt; sleep 300 >/dev/null 2>&1 &")
	out := shOK(t, rt, b.ID, "ls /workspace /tmp; cat /proc/[0-9]*/comm; P=secret; grep -rls \"$P-a\" / --exclude-dir=proc --exclude-dir=usr || true")
	if strings.Contains(out, "a.txt") || strings.Contains(out, "sleep") || strings.Contains(out, "secret-a") {
		t.Fatalf("sandbox b sees sandbox a:\n%s", out)
	}
	if _, err := rt.Create(context.Background(), Options{}); !errors.Is(err, ErrCapacity) {
		t.Fatalf("third Create: %v, want ErrCapacity", err)
	}
	pids, err := rt.HostPids(a.ID)
	if err != nil || len(pids) < 3 { // bubblewrap, the init (pid 1), sleep
		t.Fatalf("host pids of a: %v %v", pids, err)
	}
}

func TestCreateValidates(t *testing.T) {
	rt := newRuntime(t, Config{Capacity: 1})
	for _, tc := range []struct {
		name string
		opts Options
		want string
	}{
		{"TimeBoxTooLong", Options{TimeBox: 31 * time.Minute}, "time box"},
		{"TimeBoxTooShort", Options{TimeBox: time.Millisecond}, "time box"},
		{"NegativeMemory", Options{Limits: agentsandbox.Limits{MemoryMB: -1}}, "memory_mb"},
		{"NegativeDisk", Options{Limits: agentsandbox.Limits{DiskMB: -1}}, "disk_mb"},
		{"NegativePids", Options{Limits: agentsandbox.Limits{Pids: -5}}, "pids"},
		{"NegativeCPU", Options{Limits: agentsandbox.Limits{CPUPercent: -1}}, "cpu_percent"},
		{"BadEnv", Options{Env: map[string]string{"A=B": "x"}}, "env"},
		{"EgressWithoutProxy", Options{Egress: true}, "egress"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := rt.Create(context.Background(), tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Create: %v, want an error about %s", err, tc.want)
			}
		})
	}
	if rt.Active() != 0 {
		t.Fatalf("active %d after refused creates", rt.Active())
	}
}

// fakeAttacher serves a unix socket per sandbox, as the egress proxy does.
type fakeAttacher struct {
	mu       sync.Mutex
	attached map[string]bool
	policies map[string]agentsandbox.EgressPolicy // what each sandbox was attached with
}

func (f *fakeAttacher) Attach(_ context.Context, id, tempPath string, uid int, opts AttachOptions) (*os.File, func(), error) {
	h, err := unixsock.Listen(tempPath, 4, uid)
	if err != nil {
		return nil, nil, err
	}
	f.mu.Lock()
	f.attached[id] = true
	if f.policies != nil {
		f.policies[id] = opts.Policy
	}
	f.mu.Unlock()
	return h.Path, func() {
		h.Listener.Close()
		f.mu.Lock()
		delete(f.attached, id)
		f.mu.Unlock()
	}, nil
}

// TestEgressBridge proves the init runs the bridge before the first command,
// that the bridge may bind the transparent ports, that its env reaches
// commands, and that commands still have no capability.
func TestEgressBridge(t *testing.T) {
	att := &fakeAttacher{attached: map[string]bool{}, policies: map[string]agentsandbox.EgressPolicy{}}
	rt := newRuntime(t, Config{Capacity: 1, Egress: att})
	pol := agentsandbox.EgressPolicy{Mode: agentsandbox.EgressAllow, Allow: agentsandbox.EgressHosts("pypi.org")}
	info := newBox(t, rt, Options{Egress: true, EgressPolicy: pol})
	if !info.Egress || !att.attached[info.ID] {
		t.Fatalf("info %+v, attached %v", info, att.attached)
	}
	if diff := cmp.Diff(pol, att.policies[info.ID]); diff != "" || !cmp.Equal(pol, info.EgressPolicy) {
		t.Fatalf("the policy was not passed to the attacher and kept in Info (-want +got):\n%s\ninfo %+v", diff, info)
	}
	r := run(t, rt, info.ID, agentsandbox.ExecRequest{Argv: []string{"/bin/bash", "-c",
		"echo $FAKE_BRIDGE $HTTP_PROXY; exec 3<>/dev/tcp/127.0.0.1/80; cat <&3; grep -E '^Cap(Inh|Eff|Prm|Bnd|Amb)' /proc/self/status | cut -f2 | sort -u"}})
	if r.stdout != "up http://127.0.0.1:3128\nbridge\n0000000000000000\n" {
		t.Fatalf("inside an egress sandbox: %q %q", r.stdout, r.stderr)
	}
	if _, err := rt.Delete(context.Background(), info.ID); err != nil {
		t.Fatal(err)
	}
	if len(att.attached) != 0 {
		t.Fatalf("egress still attached after the wipe: %v", att.attached)
	}
}
