// Command codes-sandbox is the sandbox worker of OpenVibe.Codes: it runs
// agent code in bubblewrap sandboxes, guards their egress, proves its
// isolation with a self-test and checks in with OpenVibe.Live.
//
// Its sandboxes run the lean codes-sandbox-init as their init when it lies
// next to this binary from the same build, else this binary re-executed (see
// initbin.go). One file per subcommand; main only dispatches.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"math"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"
	"openvibe.network/agentsandbox/internal/buildinfo"
	"openvibe.network/agentsandbox/internal/cli"
)

// commands are the subcommands, in the order the usage lists them.
func commands() []cli.Command {
	return []cli.Command{
		{Name: "run", Summary: "run one command in a fresh sandbox", Run: runCmd},
		{Name: "serve", Summary: "run the worker: API for Codes, egress proxy, self-test, check-in loop", Run: serveCmd},
		{Name: "selftest", Summary: "prove each isolation fact in a real sandbox", Run: selftestCmd},
		{Name: "checkin", Summary: "check in with Live once and print its answer", Run: checkinCmd},
		{Name: "egress", Summary: "egress tools: `egress check HOST:PORT`", Run: egressCmd},
	}
}

// canaryEnv names the variable the worker puts in its own environment at
// start, with a random value the self-test must never find in a sandbox.
const canaryEnv = "CODES_SANDBOX_CANARY"

func main() {
	if code, ok := maybeInit(); ok {
		os.Exit(code)
	}
	// This process's own state, set once before anything runs: descriptors
	// it inherited without close-on-exec never reach a sandbox, and the
	// canary is in its environment for the self-test to look for.
	_ = unix.CloseRange(3, math.MaxUint32, unix.CLOSE_RANGE_CLOEXEC)
	_ = os.Setenv(canaryEnv, "canary-"+randomHex(16))
	ctx, stop := interruptible(context.Background())
	code := dispatch(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// interruptible returns a context that ends at the first SIGINT or SIGTERM;
// later ones are ignored (a run wipes its sandbox, a worker drains). The
// handlers are put in place by a goroutine of its own: enabling a signal,
// and disabling it again, waits for the Go runtime's signal thread (about a
// millisecond each, a tenth of a one-off `run`), which the command need not
// wait for. A signal before they are in place has its default effect, as it
// has before main: the process ends, and the parent-death signal ends any
// sandbox it started.
func interruptible(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(parent)
	go func() {
		signalled, _ := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM) // never stopped: later signals stay ignored
		<-signalled.Done()
		cancel()
	}()
	return ctx, cancel
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
