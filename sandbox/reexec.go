package sandbox

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Markers in argv[1] of the re-executed stages of this program.
const (
	launchMarker = "__sandbox-launch"
	initMarker   = "__sandbox-init"
)

// InitHooks are what the init needs from packages the sandbox package does not
// import.
type InitHooks struct {
	// Bridge, when set, is run by the init of a sandbox with egress before
	// its first command. Nil: a sandbox created with egress fails to start.
	Bridge EgressBridge
}

// MaybeReexec runs the re-executed stage this process was started as (the
// launcher, as root on the host, or the init, inside the sandbox) and returns
// its exit code with ok true; ok is false for any other process. Call it
// first thing in main and in the TestMain of every package that creates
// sandboxes, and exit with code when ok.
func MaybeReexec(hooks InitHooks) (code int, ok bool) {
	if len(os.Args) < 3 {
		return 0, false
	}
	switch os.Args[1] {
	case launchMarker:
		return runLauncher(os.Args[2]), true
	case initMarker:
		return RunInit(os.Args[2], hooks), true
	}
	return 0, false
}

// launchSpec is the launcher's argument: how to enter the cgroup, which host
// uid to become, and the bubblewrap command to exec.
type launchSpec struct {
	ProcsFiles []string `json:"procs_files"`
	UID        int      `json:"uid"`
	GID        int      `json:"gid"`
	PPID       int      `json:"ppid"`
	Bwrap      string   `json:"bwrap"`
	Args       []string `json:"args"`
}

// runLauncher is the launcher stage, started as root with an empty
// environment: it enters the sandbox's cgroup (so every later process of the
// sandbox is in it from its first instruction), drops to the slot's host uid
// and gid with no supplementary groups, arranges to die with the runtime, and
// execs bubblewrap with an empty environment. It returns only on failure.
func runLauncher(arg string) int {
	var spec launchSpec
	if err := json.Unmarshal([]byte(arg), &spec); err != nil {
		return launchFail("decode spec", err)
	}
	for _, f := range spec.ProcsFiles {
		if err := os.WriteFile(f, []byte("0"), 0); err != nil {
			return launchFail("enter cgroup", err)
		}
	}
	if spec.UID <= 0 || spec.GID <= 0 {
		return launchFail("drop privileges", fmt.Errorf("refusing uid %d gid %d", spec.UID, spec.GID))
	}
	// The parent-death signal is per thread and cleared by a credential
	// change, so set it on the thread that execs, after setuid.
	runtime.LockOSThread()
	if err := syscall.Setgroups(nil); err != nil {
		return launchFail("setgroups", err)
	}
	if err := syscall.Setresgid(spec.GID, spec.GID, spec.GID); err != nil {
		return launchFail("setgid", err)
	}
	if err := syscall.Setresuid(spec.UID, spec.UID, spec.UID); err != nil {
		return launchFail("setuid", err)
	}
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(syscall.SIGKILL), 0, 0, 0); err != nil {
		return launchFail("set parent-death signal", err)
	}
	if os.Getppid() != spec.PPID {
		return launchFail("check parent", fmt.Errorf("the runtime (pid %d) is gone", spec.PPID))
	}
	argv := append([]string{"bwrap"}, spec.Args...)
	err := syscall.Exec(spec.Bwrap, argv, []string{})
	return launchFail("exec bwrap", err)
}

func launchFail(op string, err error) int {
	fmt.Fprintf(os.Stderr, "sandbox launcher: %s: %s\n", op, strings.TrimSpace(err.Error()))
	return 125
}
