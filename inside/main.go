// Package inside is the part of a sandbox that runs inside it: its init,
// the sandbox's pid 1, started by the runtime (package sandbox) in every
// sandbox. The init makes itself undumpable and caps the sandbox's limits,
// reads its spec, starts the egress bridge (a hook: package inside/bridge),
// then serves the control protocol of package sandbox/control on the socket
// the runtime made: it runs commands with streamed output and confines file
// operations to the workspace. It imports nothing of the host side, so the
// lean codes-sandbox-init links only this, the bridge and the standard
// library.
package inside

import (
	"context"
	"os"

	"openvibe.network/agentsandbox/inside/capexec"
	"openvibe.network/agentsandbox/sandbox/control"
)

// Bridge bridges an in-sandbox loopback proxy address to the worker's
// proxy socket at socketPath (a /proc/self/fd path of the init's) and, when
// transparent, serves the in-sandbox resolver and the 80/443 listeners. It
// returns only once every listener accepts connections, with the
// environment variables (HTTP_PROXY and the like) to add to every command.
// Package inside/bridge implements it (bridge.Run).
type Bridge func(ctx context.Context, socketPath string, transparent bool) (env map[string]string, err error)

// Hooks are what the init needs from packages it does not import.
type Hooks struct {
	// Bridge, when set, is run by the init of a sandbox with egress before
	// its first command. Nil: a sandbox created with egress fails to start.
	Bridge Bridge
}

// MaybeRun runs the init when this process was started as one (inside a
// sandbox, by the runtime: its first argument is control.InitMarker,
// control.ExecMarker, control.IsolateMarker, control.ServeMarker or control.FetchMarker) and returns its exit code with ok true; ok is false
// for any other process. Call it first thing in main, and in the TestMain of
// every package that creates sandboxes with its test binary as the init,
// and exit with code when ok.
func MaybeRun(hooks Hooks) (code int, ok bool) {
	switch {
	case len(os.Args) == 2 && os.Args[1] == control.InitMarker:
		return Run(hooks), true
	case len(os.Args) > 2 && os.Args[1] == control.ExecMarker:
		return capexec.Run(os.Args[2:]), true
	case len(os.Args) > 2 && os.Args[1] == control.IsolateMarker:
		return runIsolated(os.Args[2:]), true
	case len(os.Args) == 4 && os.Args[1] == control.ServeMarker:
		return servePage(os.Args[2], os.Args[3]), true
	case len(os.Args) == 4 && os.Args[1] == control.FetchMarker:
		return fetchOnce(os.Args[2], os.Args[3]), true
	}
	return 0, false
}
