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
	"io"
	"os"
	"os/signal"
	"syscall"

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

func main() {
	if code, ok := maybeInit(); ok {
		os.Exit(code)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := dispatch(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// dispatch is the whole command after the init check, in process: tests
// call it directly.
func dispatch(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return cli.Dispatch(ctx, "codes-sandbox", commands(), args, stdin, stdout, stderr)
}
