// Package capexec is the capped-exec shim: the first process of a one-off
// sandbox when neither the command itself nor prlimit can be (see
// sandbox.Runtime.Run). It caps its own limits, waits for the runtime's
// go-ahead and becomes the command. The sandbox's init (package inside)
// shares its limits, its lookup and its exit codes. It imports the standard
// library, x/sys/unix and sandbox/control only, so that cmd/codes-sandbox,
// which serves one-off runs and is their shim, stays small.
package capexec

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
	"openvibe.network/agentsandbox/sandbox/control"
)

// MaybeRun runs the shim when this process was started as one (its first
// argument is control.ExecMarker) and returns its exit code with ok true;
// ok is false for any other process. Call it first thing in main.
func MaybeRun() (code int, ok bool) {
	if len(os.Args) > 2 && os.Args[1] == control.ExecMarker {
		return Run(os.Args[2:]), true
	}
	return 0, false
}

// CapSelf sets this process's descriptor limit to maxFiles (soft and hard,
// so no process of the sandbox can raise it) and turns core dumps off. It
// runs as the sandbox's first process, before any sandboxed code, and every
// process of the sandbox inherits both. (The runtime cannot set them from
// outside: prlimit on another user's process needs CAP_SYS_RESOURCE, which
// the worker does not hold.)
func CapSelf(maxFiles int) error {
	if maxFiles <= 0 {
		return fmt.Errorf("descriptor limit %d", maxFiles)
	}
	for _, l := range []struct {
		name     string
		resource int
		value    uint64
	}{
		{"open files", syscall.RLIMIT_NOFILE, uint64(maxFiles)},
		{"core dumps", syscall.RLIMIT_CORE, 0},
	} {
		// syscall.Setrlimit also stops the Go runtime from restoring its
		// original soft limit in the processes it starts.
		if err := syscall.Setrlimit(l.resource, &syscall.Rlimit{Cur: l.value, Max: l.value}); err != nil {
			return fmt.Errorf("cap %s: %w", l.name, err)
		}
	}
	return nil
}

// Run is the first process of a one-command sandbox: args are the
// descriptor limit, "--" and the command. It caps the limits, waits until
// the runtime has moved the sandbox into its cgroup, and replaces itself with
// the command (found in PATH like the shell would); it returns
// an exit code only when it cannot (127: not found, 126: not executable).
func Run(args []string) int {
	if len(args) < 3 || args[1] != "--" {
		return Fail("exec", fmt.Errorf("usage: %s MAX_FILES -- COMMAND", control.ExecMarker))
	}
	n, err := strconv.Atoi(args[0])
	if err != nil {
		return Fail("exec", err)
	}
	if err := CapSelf(n); err != nil {
		return Fail("cap limits", err)
	}
	if err := AwaitGo(); err != nil {
		return Fail("wait for the runtime", err)
	}
	// Nothing but the standard streams reaches the command: not what
	// bubblewrap left open, not this program's own.
	_ = unix.CloseRange(3, math.MaxUint32, unix.CLOSE_RANGE_CLOEXEC)
	argv := args[2:]
	env := os.Environ()
	prog, err := LookPath(argv[0], env)
	if err == nil {
		err = syscall.Exec(prog, argv, env)
	}
	fmt.Fprintf(os.Stderr, "sandbox: %v\n", err)
	return ExitCode(err)
}

// AwaitGo waits for the runtime's byte on control.FDGo, which it writes
// once the sandbox is in its cgroup. Errors: the runtime closed the pipe
// without it (the start failed).
func AwaitGo() error {
	f := os.NewFile(control.FDGo, "go")
	defer f.Close()
	var b [1]byte
	if _, err := io.ReadFull(f, b[:]); err != nil {
		return fmt.Errorf("read go: %w", err)
	}
	return nil
}

// Fail reports a failed start of the sandbox's first process (the shim or
// the init) on stderr, which the runtime shows, and returns its exit code,
// 126.
func Fail(op string, err error) int {
	fmt.Fprintf(os.Stderr, "sandbox init: %s: %v\n", op, err)
	return 126
}

// ExitCode maps a start failure to the shell's codes: 127 not found, 126
// not executable.
func ExitCode(err error) int {
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
		return 127
	}
	return 126
}

// LookPath finds a program like the shell would, in the command's PATH.
func LookPath(name string, env []string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	pathEnv := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			pathEnv = v
		}
	}
	for _, dir := range filepath.SplitList(pathEnv) {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: %w", name, exec.ErrNotFound)
}
