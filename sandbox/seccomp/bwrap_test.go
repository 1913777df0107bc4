//go:build linux && amd64

package seccomp

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"openvibe.network/agentsandbox/internal/testenv"
)

// helperEnv makes the test binary, started inside a sandbox, act as an
// ordinary Go program instead of running the tests.
const helperEnv = "SECCOMP_TEST_GO_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		goHelper()
		return
	}
	os.Exit(m.Run())
}

// goHelper exercises what the Go runtime does under the filter: threads
// (clone without namespace flags) and fork+exec of a child.
func goHelper() {
	done := make(chan int)
	for i := range 8 {
		go func() { time.Sleep(time.Millisecond); done <- i }()
	}
	for range 8 {
		<-done
	}
	out, err := exec.Command("/bin/sh", "-c", "echo child").Output()
	if err != nil {
		fmt.Println("exec failed:", err)
		os.Exit(1)
	}
	fmt.Printf("go ok %s", out)
}

// probe makes one raw syscall (number and arguments from argv) and prints
// "ok" or the errno name. A successful clone returns 0 in the child, which
// leaves at once.
const probe = `import ctypes, errno, os, sys
libc = ctypes.CDLL(None, use_errno=True)
args = [ctypes.c_long(int(a, 0)) for a in sys.argv[1:]]
r = libc.syscall(*args)
if r == 0 and sys.argv[1] == "56":
    os._exit(0)
print(errno.errorcode[ctypes.get_errno()] if r < 0 else "ok")`

// sock opens a socket of the family, type and protocol in argv and prints
// "ok" or the errno name.
const sock = `import errno, socket, sys
try:
    socket.socket(*[int(a, 0) for a in sys.argv[1:]])
    print("ok")
except OSError as e:
    print(errno.errorcode[e.errno])`

// aio makes an AIO context (io_setup, syscall number argv[1]) with a real
// pointer and prints "ok" or the errno name.
const aio = `import ctypes, errno, sys
libc = ctypes.CDLL(None, use_errno=True)
ctx = ctypes.c_ulong(0)
r = libc.syscall(ctypes.c_long(int(sys.argv[1])), ctypes.c_long(1024), ctypes.byref(ctx))
print(errno.errorcode[ctypes.get_errno()] if r < 0 else "ok")`

// nobody is the unprivileged host uid the sandbox runs as.
const nobody = 65534

// goBinary copies the test binary where the unprivileged uid can run it
// (go test's build directory is private to root).
func goBinary(tb testing.TB) string {
	tb.Helper()
	self, err := os.Executable()
	if err != nil {
		tb.Fatal(err)
	}
	b, err := os.ReadFile(self)
	if err != nil {
		tb.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "seccomp-test-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	p := filepath.Join(dir, "gohelper")
	if err := os.WriteFile(p, b, 0o755); err != nil {
		tb.Fatal(err)
	}
	return p
}

// inBwrap runs sh -c script in a bubblewrap sandbox as an unprivileged uid,
// with the filter of options filter on fd 3 when filter is not nil, and
// returns stdout. The Go
// program at helper is mounted at /gohelper.
func inBwrap(tb testing.TB, bwrap, helper string, filter *Options, script string) string {
	tb.Helper()
	args := []string{"--unshare-all", "--die-with-parent", "--new-session",
		"--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib",
		"--symlink", "usr/lib64", "/lib64", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
		"--ro-bind", helper, "/gohelper", "--setenv", "PROBE", probe, "--setenv", "SOCK", sock,
		"--setenv", "AIO", aio,
		"--setenv", "HOME", "/tmp"}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bwrap)
	if filter != nil {
		prog, err := Program(*filter)
		if err != nil {
			tb.Fatal(err)
		}
		r, w, err := os.Pipe()
		if err != nil {
			tb.Fatal(err)
		}
		defer r.Close()
		go func() {
			_, _ = w.Write(prog) // fits the pipe buffer; bwrap reads it whole
			_ = w.Close()
		}()
		cmd.ExtraFiles = []*os.File{r}
		args = append(args, "--seccomp", "3")
	}
	cmd.Args = append(append([]string{bwrap}, args...), "--", "/bin/sh", "-c", script)
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		tb.Fatalf("bwrap: %v\nstdout: %s\nstderr: %s", err, stdout.String(), stderr.String())
	}
	return strings.TrimSpace(stdout.String())
}

// TestInBwrap runs each probe with the filter and, as the control that
// shows the probe can tell the difference, without it.
func TestInBwrap(t *testing.T) {
	testenv.RequireRoot(t) // to switch to the unprivileged uid
	bwrap := testenv.RequireBwrap(t)
	helper := goBinary(t)
	yesNo := func(cmd string) string { return cmd + " >/dev/null 2>&1 && echo yes || echo no" }
	for _, tc := range []struct {
		name, script string
		want         string
		control      string // without the filter; "" when it proves nothing
		v1           string // with Options.TCPOnlyInet; "" when it is want
	}{
		{"SeccompMode", "grep Seccomp: /proc/self/status", "Seccomp:\t2", "Seccomp:\t0", ""},
		{"UnshareUser", yesNo("unshare -U true"), "no", "yes", ""},
		{"UnshareNet", yesNo("unshare -n true"), "no", "", ""},
		{"UnshareUserNet", yesNo("unshare -Un true"), "no", "yes", ""},
		{"Mount", yesNo("mount -t tmpfs x /tmp"), "no", "", ""},
		{"MountInOwnUserns", yesNo("unshare -Urm mount -t tmpfs x /tmp"), "no", "yes", ""},
		{"CloneNewUser", `python3 -c "$PROBE" 56 0x10000011`, "EPERM", "ok", ""},
		{"CloneNewNet", `python3 -c "$PROBE" 56 0x50000011`, "EPERM", "ok", ""},
		{"Clone3", `python3 -c "$PROBE" 435 0 0`, "ENOSYS", "EINVAL", ""},
		{"Ptrace", `python3 -c "$PROBE" 101 0`, "EPERM", "ok", ""},
		{"Vsock", `python3 -c "$SOCK" 40 1`, "EAFNOSUPPORT", "", ""},
		{"NetlinkUsersock", `python3 -c "$SOCK" 16 3 2`, "EAFNOSUPPORT", "ok", ""},
		{"NetlinkSockDiag", `python3 -c "$SOCK" 16 3 4`, "EAFNOSUPPORT", "ok", ""},
		{"NetlinkRoute", `python3 -c "$SOCK" 16 3 0`, "ok", "ok", ""},
		{"IPAddr", "ip -o addr show lo | grep -c 127.0.0.1", "1", "1", ""},
		{"Packet", `python3 -c "$SOCK" 17 3`, "EAFNOSUPPORT", "EPERM", ""},
		{"InetTCP", `python3 -c "$SOCK" 2 1`, "ok", "ok", ""},
		{"Inet6TCP", `python3 -c "$SOCK" 10 0x80001`, "ok", "ok", ""},
		{"InetUDP", `python3 -c "$SOCK" 2 2`, "ok", "ok", "EPERM"},
		{"Inet6UDPNonblock", `python3 -c "$SOCK" 10 0x802`, "ok", "ok", "EPERM"},
		{"UnixDgram", `python3 -c "$SOCK" 1 2`, "ok", "ok", ""},
		{"IoSetup", `python3 -c "$AIO" 206`, "EPERM", "ok", ""},
		{"Echo", "echo ok", "ok", "ok", ""},
		{"PythonFork", `python3 -c 'import os; pid = os.fork(); os._exit(0) if pid == 0 else print("fork", os.waitpid(pid, 0)[1])'`, "fork 0", "fork 0", ""},
		{"PythonThread", `python3 -c 'import threading; t = threading.Thread(target=print, args=("thread",)); t.start(); t.join()'`, "thread", "thread", ""},
		{"Git", "cd /tmp && git init -q r && cd r && git -c user.name=a -c user.email=a@b commit -q --allow-empty -m m && git log --format=%s", "m", "m", ""},
		{"GoBinary", helperEnv + "=1 /gohelper", "go ok child", "go ok child", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := inBwrap(t, bwrap, helper, &Options{}, tc.script); got != tc.want {
				t.Errorf("with the filter: got %q, want %q", got, tc.want)
			}
			if v1 := cmp.Or(tc.v1, tc.want); v1 != tc.want || strings.HasPrefix(tc.name, "Inet") {
				if got := inBwrap(t, bwrap, helper, &Options{TCPOnlyInet: true}, tc.script); got != v1 {
					t.Errorf("with the cgroup v1 filter: got %q, want %q", got, v1)
				}
			}
			if tc.control == "" {
				return
			}
			if got := inBwrap(t, bwrap, helper, nil, tc.script); got != tc.control {
				t.Errorf("without the filter (control): got %q, want %q", got, tc.control)
			}
		})
	}
}
