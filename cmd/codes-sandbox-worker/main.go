// Command codes-sandbox-worker is the sandbox worker of OpenVibe.Codes: it
// runs agent code in bubblewrap sandboxes, guards their egress, proves its
// isolation with a self-test and checks in with OpenVibe.Live. Users call
// it as codes-sandbox (cmd/codes-sandbox), which serves a one-off `run`
// itself and becomes this program for every other command; its usage and
// messages say codes-sandbox.
//
// Its sandboxes run the lean codes-sandbox-init as their init when it lies
// next to this binary from the same build, else this binary re-executed (see
// initbin.go). One file per subcommand; main only dispatches.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"math"
	"os"

	"golang.org/x/sys/unix"
	"openvibe.network/agentsandbox/internal/buildinfo"
	"openvibe.network/agentsandbox/internal/cli"
	"openvibe.network/agentsandbox/internal/runcmd"
	"openvibe.network/agentsandbox/internal/sibling"
)

// commands are the subcommands, in the order the usage lists them.
func commands() []cli.Command {
	return []cli.Command{
		{Name: "run", Summary: runcmd.Summary, Run: runCmd},
		{Name: "serve", Summary: "run the worker: API for Codes, egress proxy, self-test, check-in loop", Run: serveCmd},
		{Name: "selftest", Summary: "prove each isolation fact in a real sandbox", Run: selftestCmd},
		{Name: "checkin", Summary: "check in with Live once and print its answer", Run: checkinCmd},
		{Name: "egress", Summary: "egress tools: `egress check HOST:PORT`", Run: egressCmd},
		{Name: "mcp", Summary: "serve the worker's MCP tools over stdio for a local agent host", Run: mcpCmd},
		{Name: "probe", Summary: "ask the running worker whether it is live or ready (a container's probes)", Run: probeCmd},
	}
}

// canaryEnv names the variable the worker puts in its own environment at
// start, with a random value the self-test must never find in a sandbox.
const canaryEnv = "CODES_SANDBOX_CANARY"

func main() {
	if code, ok := maybeInit(); ok {
		os.Exit(code)
	}
	if err := sibling.CheckCaller(); err != nil { // started by codes-sandbox
		fmt.Fprintf(os.Stderr, "codes-sandbox: %v\n", err)
		os.Exit(125)
	}
	// This process's own state, set once before anything runs: descriptors
	// it inherited without close-on-exec never reach a sandbox, and the
	// canary is in its environment for the self-test to look for.
	_ = unix.CloseRange(3, math.MaxUint32, unix.CLOSE_RANGE_CLOEXEC)
	_ = os.Setenv(canaryEnv, "canary-"+randomHex(16))
	ctx, stop := cli.Interruptible(context.Background())
	code := dispatch(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// dispatch is the whole command after the init check, in process: tests
// call it directly.
func dispatch(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return cli.Program{Name: "codes-sandbox", Commands: commands(), Version: buildinfo.Read().String()}.Run(ctx, args, stdin, stdout, stderr)
}

// randomHex returns n random bytes in hex.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// setFlags returns the names of the flags the command line gave.
func setFlags(fs *flag.FlagSet) map[string]bool {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return set
}
