// Command codes-sandbox-init is the init inside codes-sandbox's sandboxes:
// the program the runtime starts in each sandbox (sandbox.MaybeReexec), with
// the egress bridge. It is the worker's init code in a binary of its own that
// links only the sandbox runtime and the egress bridge: every Create waits for
// the init to start, and the whole worker binary spends several milliseconds
// in package initialisation (the JSON Schema compiler, metrics) before main.
// codes-sandbox uses it when it lies next to it, built by the same build
// (`make build` builds both); otherwise it re-executes itself as before.
//
// It is not meant to be run by hand: started any other way it says so and
// exits with code 2.
package main

import (
	"fmt"
	"io"
	"os"

	"openvibe.network/agentsandbox/egress"
	"openvibe.network/agentsandbox/sandbox"
)

func main() {
	code, ok := sandbox.MaybeReexec(sandbox.InitHooks{Bridge: egress.Bridge})
	if !ok {
		code = notInit(os.Stderr)
	}
	os.Exit(code)
}

// notInit explains that this program is started by the runtime only and
// returns the exit code 2.
func notInit(w io.Writer) int {
	fmt.Fprintln(w, "codes-sandbox-init: this is the init inside codes-sandbox's sandboxes, started by its runtime; run codes-sandbox instead")
	return 2
}
