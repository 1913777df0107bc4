// Command codes-sandbox-init is the init inside codes-sandbox's sandboxes:
// the program the runtime starts in each sandbox (package inside), with the
// egress bridge (package inside/bridge). It links only those two and the
// standard library (a test checks), nothing of the worker: every Create
// waits for the init to start, and the whole worker binary spends
// milliseconds in package initialisation (metrics, the stores' drivers)
// before main.
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

	"openvibe.network/agentsandbox/inside"
	"openvibe.network/agentsandbox/inside/bridge"
)

func main() {
	code, ok := inside.MaybeRun(inside.Hooks{Bridge: bridge.Run})
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
