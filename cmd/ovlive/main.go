// Command ovlive is OpenVibe.Live's side of the sandbox worker check-in: it
// serves the check-in endpoint and the owner's view (`ovlive serve`) and
// administers persons, streams, service principals and credentials
// (`ovlive admin`), on SQLite or PostgreSQL.
//
// One file per subcommand; main only dispatches.
package main

import (
	"context"
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
		"serve": {"serve the check-in endpoint, the owner's view, /healthz and /metrics", serveCmd},
		"admin": {"create persons, streams and services; issue, list and revoke credentials", adminCmd},
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is the whole command, in process: tests call it directly.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
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
		fmt.Fprintf(stderr, "ovlive: unknown command %q\n", args[0])
		usage(stderr, cmds)
		return 2
	}
	return c.run(ctx, args[1:], stdin, stdout, stderr)
}

func usage(w io.Writer, cmds map[string]command) {
	fmt.Fprintln(w, "usage: ovlive COMMAND [flags]  (COMMAND --help for its flags)")
	for _, name := range []string{"serve", "admin"} {
		fmt.Fprintf(w, "  %-6s %s\n", name, cmds[name].summary)
	}
}
