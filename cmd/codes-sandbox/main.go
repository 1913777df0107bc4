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
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// command is one subcommand: its one-line summary and its entry point, which
// returns the process exit code.
type command struct {
	summary string
	run     func(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int
}

func commands() map[string]command {
	return map[string]command{
		"run":      {"run one command in a fresh sandbox", runCmd},
		"egress":   {"egress tools: `egress check HOST:PORT`", egressCmd},
		"selftest": {"prove each isolation fact in a real sandbox", selftestCmd},
		"serve":    {"run the worker: API for Codes, egress proxy, self-test, check-in loop", serveCmd},
		"checkin":  {"check in with Live once and print its answer", checkinCmd},
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

func dispatch(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	cmds := commands()
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr, cmds)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	c, ok := cmds[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "codes-sandbox: unknown command %q\n", args[0])
		usage(stderr, cmds)
		return 2
	}
	return c.run(ctx, args[1:], stdin, stdout, stderr)
}

func usage(w io.Writer, cmds map[string]command) {
	fmt.Fprintln(w, "usage: codes-sandbox COMMAND [flags]  (COMMAND --help for its flags)")
	for _, name := range []string{"run", "serve", "selftest", "checkin", "egress"} {
		fmt.Fprintf(w, "  %-9s %s\n", name, cmds[name].summary)
	}
}

// parseFlags parses args into fs. ok is false when the command must stop at
// once, with code: 0 after -h or --help, 2 after a bad flag (fs has printed
// why and its usage).
func parseFlags(fs *flag.FlagSet, args []string) (code int, ok bool) {
	err := fs.Parse(args)
	switch {
	case err == nil:
		return 0, true
	case errors.Is(err, flag.ErrHelp):
		return 0, false
	}
	return 2, false
}
