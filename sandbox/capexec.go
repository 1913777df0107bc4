package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
	"openvibe.network/agentsandbox/internal/osthread"
)

// firstProcess is what a one-command sandbox (Run) runs as its pid 1.
type firstProcess int

const (
	// firstShim is the init's capped-exec shim: it sets the limits,
	// closes every descriptor from 3 on, and becomes the command.
	firstShim firstProcess = iota
	// firstPrlimit is util-linux's prlimit (findPrlimit): it sets the
	// limits and becomes the command.
	firstPrlimit
	// firstCommand is the command itself: the runtime sets the limits of
	// bubblewrap's child (capLimits) while bubblewrap holds it back before
	// it becomes the command, one program's start less.
	firstCommand
)

// firstProcess chooses a one-command sandbox's first process for a
// command the view found so (commandView.find): the command itself when
// the host can tell that the sandbox will find and run it (one that cannot
// be run starts through a first process that reports it as the shell
// would: 127, 126), else prlimit, else the shim; the shim whenever this
// process holds a descriptor the command would inherit.
func (r *Runtime) firstProcess(found commandVerdict) firstProcess {
	switch {
	case inheritableDescriptors():
		return firstShim
	case found == commandRuns:
		return firstCommand
	case r.prlimit != "":
		return firstPrlimit
	default:
		return firstShim
	}
}

// capLimits sets the limits a one-command sandbox's processes start with
// on the host process pid (bubblewrap's child, running as the slot's uid
// and gid and waiting to become the command; what it starts inherits
// them): maxFiles descriptors, soft and hard, so that no process of the
// sandbox can raise it, and no core dumps.
//
// Linux lets a process set another's limits when its real uid and gid are
// the other's, or with CAP_SYS_RESOURCE over the other's user namespace,
// which the root of a container may lack. So the calls are made from a
// thread of their own that takes the slot's real uid and gid for them and
// keeps its effective and saved root (so its capabilities, and its way
// back); a thread that cannot get back is never used again (osthread).
// Meanwhile the slot's uid could signal that thread, but the sandbox runs
// nothing yet: its only processes are bubblewrap's, and they cannot name it.
func capLimits(pid, slotID, maxFiles int) error {
	return osthread.Run(func() (bool, error) {
		ruid, _, _ := unix.Getresuid()
		rgid, _, _ := unix.Getresgid()
		if err := setRealIDs(slotID, slotID); err != nil {
			return setRealIDs(ruid, rgid) == nil, fmt.Errorf("set the sandbox's limits: %w", err)
		}
		files := unix.Rlimit{Cur: uint64(maxFiles), Max: uint64(maxFiles)}
		err := unix.Prlimit(pid, unix.RLIMIT_NOFILE, &files, nil)
		if err != nil {
			err = fmt.Errorf("set the descriptor limit of %d: %w", pid, err)
		} else if err = unix.Prlimit(pid, unix.RLIMIT_CORE, &unix.Rlimit{}, nil); err != nil {
			err = fmt.Errorf("set the core dump limit of %d: %w", pid, err)
		}
		return setRealIDs(ruid, rgid) == nil, err
	})
}

// setRealIDs sets the calling thread's real uid and gid (only: the
// effective and saved ids stay), with the raw system calls, which act on
// this thread alone (the syscall package's act on every thread).
func setRealIDs(uid, gid int) error {
	keep := uintptr(^uint32(0)) // -1: unchanged
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESGID, uintptr(gid), keep, keep); e != 0 {
		return fmt.Errorf("setresgid %d: %w", gid, e)
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, uintptr(uid), keep, keep); e != 0 {
		return fmt.Errorf("setresuid %d: %w", uid, e)
	}
	return nil
}

// prlimitPath is util-linux's prlimit. A one-command sandbox (Run) whose
// command the host cannot vouch for (see firstProcess) runs it as its first
// process to set the sandbox's limits and become the command:
// it starts in a fraction of the init's time (a C program against a Go
// runtime's start), and bubblewrap itself holds it back until the sandbox
// is in its cgroup (--block-fd). Every sandbox sees the host's /usr
// read-only at the same path.
const prlimitPath = "/usr/bin/prlimit"

// findPrlimit returns path when it is a program a sandbox may trust to set
// its limits: under /usr, a regular executable file (not a symlink, which
// could lead out of the sandbox's view) owned by root and writable by no
// one else, in a directory of the same kind. Otherwise it returns "", and
// one-command sandboxes use the init's capped-exec shim instead.
func findPrlimit(path string) string {
	if filepath.Clean(path) != path || !strings.HasPrefix(path, "/usr/") {
		return ""
	}
	for _, p := range []string{filepath.Dir(path), path} {
		fi, err := os.Lstat(p)
		if err != nil {
			return ""
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok || st.Uid != 0 || fi.Mode().Perm()&0o022 != 0 {
			return ""
		}
		if p == path && (!fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0) {
			return ""
		}
	}
	return path
}

// capExecArgv is the command of a one-command sandbox whose limits prlimit
// sets: the descriptor limit, soft and hard (so that no process of the
// sandbox can raise it), no core dumps, then argv (looked up in PATH as the
// shell would; 127 when it is not found, 126 when it cannot be run).
func capExecArgv(prlimit string, maxFiles int, argv []string) []string {
	n := strconv.Itoa(maxFiles)
	return append([]string{prlimit, "--nofile=" + n + ":" + n, "--core=0:0", "--"}, argv...)
}

// inheritableDescriptors reports whether this process holds a descriptor
// from 3 on without close-on-exec, which every program it starts inherits
// (one its own parent left it, say): prlimit would hand it on to the
// command, so a one-command sandbox then starts with the init's shim, which
// closes it. Errors count as such a descriptor.
func inheritableDescriptors() bool {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return true
	}
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil || fd < 3 {
			continue
		}
		flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
		if err == nil && flags&unix.FD_CLOEXEC == 0 {
			return true
		}
	}
	return false
}
