package inside

import (
	"fmt"
	"os"
	"runtime"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
	"openvibe.network/agentsandbox/inside/capexec"
	"openvibe.network/agentsandbox/sandbox/control"
)

// Isolation modes of the isolate step (control.IsolateMarker).
const (
	// isolateLandlock: each command runs in a Landlock domain of its own.
	isolateLandlock = "landlock"
	// isolateNone: the kernel has no Landlock; commands share the sandbox's
	// domain (and any process of the sandbox may write another's memory).
	isolateNone = "none"
)

// LandlockABI returns the Landlock ABI version of the running kernel, 0
// when it has none (too old, or Landlock is not among its active LSMs), or
// when a seccomp filter refuses the call.
func LandlockABI() int {
	v, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if errno != 0 {
		return 0
	}
	return int(v)
}

// isolationMode is the mode the init starts its commands in. Landlock's
// first version refuses every link and rename across directories to a
// process in a domain; from the second on a ruleset can allow them (see
// restrictSelf).
func isolationMode() string {
	if LandlockABI() >= 2 {
		return isolateLandlock
	}
	return isolateNone
}

// isolateArgv is the argv that runs prog (found already) as argv through
// the isolate step of the init binary.
func isolateArgv(mode, prog string, argv []string) []string {
	return append([]string{control.InitPath, control.IsolateMarker, mode, prog, "--"}, argv...)
}

// runIsolated is the isolate step (args: mode, program, "--", argv): it
// makes itself a child subreaper, so that whatever the command starts stays
// its descendant even when an intermediate parent exits (a double fork and
// setsid leave no process outside the command's tree, which the init kills
// whole: see killTree); with mode isolateLandlock it enters a new Landlock
// domain, a sibling of every other command's, so no command can read or
// write the memory, descriptors or environment of another's processes
// through /proc (ptrace-class access needs the target in the caller's own
// domain or below it), whatever their uid; then it replaces itself with the
// command. Only a failure returns (126 or 127, as the shell's).
func runIsolated(args []string) int {
	if len(args) < 4 || args[2] != "--" {
		return capexec.Fail("isolate", fmt.Errorf("usage: %s MODE PROGRAM -- ARGV", control.IsolateMarker))
	}
	mode, prog, argv := args[0], args[1], args[3:]
	// The domain and the subreaper flag are the calling thread's: the one
	// that execs.
	runtime.LockOSThread()
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return capexec.Fail("isolate: become a subreaper", err)
	}
	switch mode {
	case isolateLandlock:
		if err := restrictSelf(); err != nil {
			return capexec.Fail("isolate: enter a Landlock domain", err)
		}
	case isolateNone:
	default:
		return capexec.Fail("isolate", fmt.Errorf("unknown mode %q", mode))
	}
	err := syscall.Exec(prog, argv, os.Environ())
	fmt.Fprintf(os.Stderr, "sandbox: %v\n", err)
	return capexec.ExitCode(err)
}

// restrictSelf puts the calling thread in a new Landlock domain that
// changes no file access: the ruleset handles executing files and
// reparenting them (linking or renaming across directories, which a domain
// refuses unless a rule allows it, handled or not), and allows both beneath
// "/". What the domain does is Landlock's scoping of ptrace-class access
// (/proc/PID/mem, fd/, environ and the like) to the domain and those nested
// in it. It needs Landlock ABI 2 or later.
func restrictSelf() error {
	const access = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_REFER
	// Only the first field (ABI 1's whole struct), which every version
	// takes.
	attr := unix.LandlockRulesetAttr{Handled_access_fs: access}
	fd, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr.Handled_access_fs), 0)
	if errno != 0 {
		return fmt.Errorf("create ruleset: %w", errno)
	}
	ruleset := int(fd)
	defer unix.Close(ruleset)
	root, err := unix.Open("/", unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open /: %w", err)
	}
	defer unix.Close(root)
	rule := unix.LandlockPathBeneathAttr{Allowed_access: access, Parent_fd: int32(root)}
	if _, _, errno := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(ruleset), unix.LANDLOCK_RULE_PATH_BENEATH,
		uintptr(unsafe.Pointer(&rule)), 0, 0, 0); errno != 0 {
		return fmt.Errorf("allow executing and reparenting beneath /: %w", errno)
	}
	// Required unless the thread has CAP_SYS_ADMIN; bubblewrap's seccomp
	// filter has set it already for every process of the sandbox.
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("set no_new_privs: %w", err)
	}
	if _, _, errno := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, uintptr(ruleset), 0, 0); errno != 0 {
		return fmt.Errorf("restrict self: %w", errno)
	}
	return nil
}
