// Command codes-sandbox runs agent code in sandboxes. It is two programs
// behind one name, split by the process each runs in:
//
//   - `codes-sandbox run -- CMD` is served here (runcmd), by a program that
//     links only the sandbox runtime, the capped-exec shim (inside/capexec)
//     and what they need, so that a one-off sandbox does not pay for the
//     worker's size: at a third of it, a run is about a tenth faster
//     (docs/benchmarks.md).
//   - Every other command (serve, selftest, checkin, egress, --help,
//     --version, and `run --image`, whose image store this program does
//     not link) is the worker's: this program becomes (exec, same pid)
//     codes-sandbox-worker, which must lie next to it, owned like it and
//     from the same build (sibling.Exec; the worker checks the build).
package main

import (
	"fmt"
	"io"
	"os"

	"openvibe.network/agentsandbox/inside/capexec"
	"openvibe.network/agentsandbox/internal/runcmd"
	"openvibe.network/agentsandbox/internal/sibling"
)

// workerName is the worker program (cmd/codes-sandbox-worker).
const workerName = "codes-sandbox-worker"

func main() {
	// This binary re-executed as a one-off sandbox's first process, when
	// neither the command itself nor prlimit can be (sandbox.Runtime.Run).
	if code, ok := capexec.MaybeRun(); ok {
		os.Exit(code)
	}
	args := os.Args[1:]
	if len(args) > 0 && args[0] == "run" && !runcmd.WantsImage(args[1:]) {
		os.Exit(runcmd.Main(args[1:]))
	}
	os.Exit(becomeWorker(args, os.Stderr))
}

// becomeWorker replaces this process with the worker, given args. It returns
// only when it cannot, with the exit code, once it said why on stderr.
func becomeWorker(args []string, stderr io.Writer) int {
	err := sibling.Exec(workerName, args)
	fmt.Fprintf(stderr, "codes-sandbox: every command but run is the worker's, and the worker cannot be started: %v\n"+
		"(install %s next to this program, from the same build: make build, or reinstall the package)\n", err, workerName)
	return 125
}
