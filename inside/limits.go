package inside

import (
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
	"openvibe.network/agentsandbox/sandbox/control"
)

// capSelf sets this process's descriptor limit to maxFiles (soft and hard,
// so no process of the sandbox can raise it) and turns core dumps off. It
// runs as the sandbox's first process, before any sandboxed code, and every
// process of the sandbox inherits both. (The runtime cannot set them from
// outside: prlimit on another user's process needs CAP_SYS_RESOURCE, which
// the worker does not hold.)
func capSelf(maxFiles int) error {
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

// runCappedExec is the init of a one-command sandbox: args are the
// descriptor limit, "--" and the command. It caps the limits, waits until
// the runtime has moved the sandbox into its cgroup, and replaces itself with
// the command (found in PATH like the shell would); it returns
// an exit code only when it cannot (127: not found, 126: not executable).
func runCappedExec(args []string) int {
	if len(args) < 3 || args[1] != "--" {
		return initFail("exec", fmt.Errorf("usage: %s MAX_FILES -- COMMAND", control.ExecMarker))
	}
	n, err := strconv.Atoi(args[0])
	if err != nil {
		return initFail("exec", err)
	}
	if err := capSelf(n); err != nil {
		return initFail("cap limits", err)
	}
	if err := awaitGo(); err != nil {
		return initFail("wait for the runtime", err)
	}
	// Nothing but the standard streams reaches the command: not what
	// bubblewrap left open, not this program's own.
	_ = unix.CloseRange(3, math.MaxUint32, unix.CLOSE_RANGE_CLOEXEC)
	argv := args[2:]
	env := os.Environ()
	prog, err := lookPath(argv[0], env)
	if err == nil {
		err = syscall.Exec(prog, argv, env)
	}
	fmt.Fprintf(os.Stderr, "sandbox: %v\n", err)
	return exitCodeOf(err)
}

// awaitGo waits for the runtime's byte on control.FDGo, which it writes
// once the sandbox is in its cgroup. Errors: the runtime closed the pipe
// without it (the start failed).
func awaitGo() error {
	f := os.NewFile(control.FDGo, "go")
	defer f.Close()
	var b [1]byte
	if _, err := io.ReadFull(f, b[:]); err != nil {
		return fmt.Errorf("read go: %w", err)
	}
	return nil
}
