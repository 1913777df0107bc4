package sandbox

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// prlimitPath is util-linux's prlimit. A one-command sandbox (Run) runs it
// as its first process to set the sandbox's limits and become the command:
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
