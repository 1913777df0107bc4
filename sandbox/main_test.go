package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"openvibe.network/agentsandbox"
	"openvibe.network/agentsandbox/inside"
	"openvibe.network/agentsandbox/internal/testenv"
)

func TestMain(m *testing.M) {
	if code, ok := inside.MaybeRun(inside.Hooks{Bridge: fakeBridge}); ok {
		os.Exit(code)
	}
	if dir := os.Getenv(crashHelperEnv); dir != "" {
		os.Exit(crashHelper(dir))
	}
	if os.Getenv(timedHelperEnv) != "" {
		os.Exit(timedHelper())
	}
	// As codes-sandbox's main does: what this process inherited without
	// close-on-exec (a shell's descriptors, say) reaches no program it
	// starts, so that one-command sandboxes may start with prlimit (see
	// inheritableDescriptors).
	_ = unix.CloseRange(3, math.MaxUint32, unix.CLOSE_RANGE_CLOEXEC)
	code := m.Run()
	removeTestImages()
	os.Exit(code)
}

// fakeBridge stands in for the egress bridge: it binds the privileged ports
// the transparent mode needs (which proves the init may) and reports an env.
func fakeBridge(_ context.Context, socketPath string, transparent bool) (map[string]string, error) {
	if !transparent {
		return nil, errors.New("fake bridge: want transparent mode")
	}
	if _, err := os.Stat(socketPath); err != nil {
		return nil, err
	}
	for _, addr := range []string{"127.0.0.1:80", "127.0.0.1:443"} {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return nil, err
		}
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				_, _ = c.Write([]byte("bridge\n"))
				c.Close()
			}
		}()
	}
	return map[string]string{"HTTP_PROXY": "http://127.0.0.1:3128", "FAKE_BRIDGE": "up"}, nil
}

// testTimeout bounds every sandbox operation of a test (generous: the
// machine is loaded by other tests).
const testTimeout = 2 * time.Minute

// newRuntime returns a runtime closed (and checked) at the end of the test.
func newRuntime(tb testing.TB, cfg Config) *Runtime {
	tb.Helper()
	testenv.RequireSandbox(tb)
	rt, err := NewRuntime(cfg)
	if err != nil {
		tb.Fatalf("NewRuntime: %v", err)
	}
	tb.Cleanup(func() {
		if err := rt.Close(); err != nil {
			tb.Errorf("Close: %v", err)
		}
		if _, err := os.Stat(rt.dir); !errors.Is(err, fs.ErrNotExist) {
			tb.Errorf("runtime dir %s left after Close", rt.dir)
		}
	})
	return rt
}

// newBox creates a sandbox that is deleted, and checked to be gone, at the
// end of the test.
func newBox(tb testing.TB, rt *Runtime, o Options) Info {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	info, err := rt.Create(ctx, o)
	if err != nil {
		tb.Fatalf("Create: %v", err)
	}
	b := mustBox(tb, rt, info.ID)
	paths := b.group.Paths()
	dir := rt.boxPath(info.ID)
	tb.Cleanup(func() {
		before, _ := rt.HostPids(info.ID) // its processes, to be gone after the wipe
		rep, err := rt.Delete(context.Background(), info.ID)
		if err != nil && !errors.Is(err, ErrNotFound) {
			tb.Errorf("Delete: %v", err)
		}
		if err == nil && !rep.Verified {
			tb.Errorf("wipe not verified: %v", rep.Leftovers)
		}
		select { // a wipe started by the time box or the sandbox's end
		case <-b.wiped:
		case <-time.After(testTimeout):
			tb.Errorf("the wipe of %s did not finish", info.ID)
		}
		if rt.cfg.poolSize() > 0 {
			// The pool may already run the next sandbox as the same uid:
			// look for this one's own processes, not the uid's.
			for _, pid := range before {
				if u, ok := ownerOf(pid); ok && u == info.HostUID {
					tb.Errorf("process %d of the wiped sandbox is left", pid)
				}
			}
			assertGone(tb, -1, paths, dir)
			return
		}
		assertGone(tb, info.HostUID, paths, dir)
	})
	return info
}

// ownerOf returns the owner of /proc/PID (the process's uid), or false
// when it is gone.
func ownerOf(pid int) (int, bool) {
	var st syscall.Stat_t
	if err := syscall.Stat(fmt.Sprintf("/proc/%d", pid), &st); err != nil {
		return 0, false
	}
	return int(st.Uid), true
}

// assertGone checks independently of the wipe's own verification that no
// process of uid, no cgroup directory and no control directory is left.
func assertGone(tb testing.TB, uid int, cgroupPaths []string, dir string) {
	tb.Helper()
	if pids, err := uidProcesses(uid); uid >= 0 && (err != nil || len(pids) > 0) { // uid < 0: none to look at (see newBox)
		tb.Errorf("processes of uid %d left: %v (%v)", uid, pids, err)
	}
	for _, p := range append(cgroupPaths, dir) {
		if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
			tb.Errorf("%s left after the wipe (%v)", p, err)
		}
	}
}

func mustBox(tb testing.TB, rt *Runtime, id string) *sandboxState {
	tb.Helper()
	b, err := rt.get(id)
	if err != nil {
		tb.Fatalf("sandbox %s: %v", id, err)
	}
	return b
}

// result is one finished exec.
type result struct {
	agentsandbox.ExecResult
	stdout, stderr string
}

// run execs argv in the sandbox and fails the test on an error.
func run(tb testing.TB, rt *Runtime, id string, req agentsandbox.ExecRequest) result {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	var out, errb bytes.Buffer
	res, err := rt.Exec(ctx, id, req, &out, &errb)
	if err != nil {
		tb.Fatalf("Exec %q: %v", req.Argv, err)
	}
	return result{res, out.String(), errb.String()}
}

// sh runs a shell script in the sandbox.
func sh(tb testing.TB, rt *Runtime, id, script string) result {
	tb.Helper()
	return run(tb, rt, id, agentsandbox.ExecRequest{Argv: []string{"/bin/sh", "-c", script}})
}

// shOK runs a script that must exit 0 and returns its stdout.
func shOK(tb testing.TB, rt *Runtime, id, script string) string {
	tb.Helper()
	r := sh(tb, rt, id, script)
	if r.ExitCode != 0 {
		tb.Fatalf("%q: exit %d (%s), stderr: %s", script, r.ExitCode, r.Reason, r.stderr)
	}
	return r.stdout
}

func TestSmoke(t *testing.T) {
	rt := newRuntime(t, Config{Capacity: 1})
	info := newBox(t, rt, Options{})
	out := shOK(t, rt, info.ID, "echo hello; id -u")
	if out != "hello\n1000\n" {
		t.Fatalf("stdout %q", out)
	}
	if len(info.ID) != 20 || strings.Trim(info.ID, "0123456789abcdef") != "" || info.HostUID < DefaultUIDBase {
		t.Fatalf("info %+v", info)
	}
	if got := rt.List(); len(got) != 1 || got[0].ID != info.ID || rt.Active() != 1 || rt.Capacity() != 1 {
		t.Fatalf("List %+v, Active %d, Capacity %d", got, rt.Active(), rt.Capacity())
	}
}

// pendingConn reports, without blocking, whether a connection waits on ln.
func pendingConn(tb testing.TB, ln net.Listener) bool {
	tb.Helper()
	raw, err := ln.(syscall.Conn).SyscallConn()
	if err != nil {
		tb.Fatal(err)
	}
	var aerr error
	err = raw.Control(func(fd uintptr) {
		var nfd int
		if nfd, _, aerr = unix.Accept(int(fd)); aerr == nil {
			unix.Close(nfd)
		}
	})
	if err != nil {
		tb.Fatal(err)
	}
	if aerr != nil && !errors.Is(aerr, unix.EAGAIN) {
		tb.Fatalf("accept: %v", aerr)
	}
	return aerr == nil
}

// TestPendingConn proves pendingConn sees a connection that waits, so the
// tests that assert none reached a host listener can fail.
func TestPendingConn(t *testing.T) {
	for _, tc := range []struct {
		name, network, addr string
	}{
		{"TCP", "tcp", "127.0.0.1:0"},
		{"Unix", "unix", filepath.Join(t.TempDir(), "s.sock")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ln, err := net.Listen(tc.network, tc.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			if pendingConn(t, ln) {
				t.Fatal("a connection is pending before any dial")
			}
			c, err := net.Dial(tc.network, ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if !pendingConn(t, ln) {
				t.Fatal("the dialled connection is not seen")
			}
		})
	}
}
