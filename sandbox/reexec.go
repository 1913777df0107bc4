package sandbox

import (
	"os"
)

// initMarker is argv[1] of the init, this program re-executed inside a
// sandbox.
const initMarker = "__sandbox-init"

// InitHooks are what the init needs from packages the sandbox package does not
// import.
type InitHooks struct {
	// Bridge, when set, is run by the init of a sandbox with egress before
	// its first command. Nil: a sandbox created with egress fails to start.
	Bridge EgressBridge
}

// MaybeReexec runs the init when this process was started as one (inside a
// sandbox, by the runtime) and returns its exit code with ok true; ok is
// false for any other process. Call it first thing in main and in the
// TestMain of every package that creates sandboxes, and exit with code when
// ok.
func MaybeReexec(hooks InitHooks) (code int, ok bool) {
	switch {
	case len(os.Args) == 2 && os.Args[1] == initMarker:
		return RunInit(hooks), true
	case len(os.Args) > 2 && os.Args[1] == execMarker:
		return runCappedExec(os.Args[2:]), true
	}
	return 0, false
}
