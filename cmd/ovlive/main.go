// Command ovlive is OpenVibe.Live's side of the sandbox worker check-in: it
// serves the check-in endpoint and the owner's view (`ovlive serve`) and
// administers persons, streams, service principals and credentials
// (`ovlive admin`), on SQLite or PostgreSQL.
//
// One file per subcommand; main only dispatches.
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
		{Name: "serve", Summary: "serve the check-in endpoint, the owner's view, /healthz and /metrics", Run: serveCmd},
		{Name: "admin", Summary: "create persons, streams and services; issue, list and revoke credentials", Run: adminCmd},
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
	return cli.Dispatch(ctx, "ovlive", commands(), args, stdin, stdout, stderr)
}
