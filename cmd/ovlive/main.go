// Command ovlive is OpenVibe.Live's side of the sandbox worker check-in: it
// serves the check-in endpoint, the owner's view and pages (`ovlive serve`)
// and administers persons, streams, service principals and credentials
// (`ovlive admin`), on SQLite or PostgreSQL.
//
// Help goes to stdout (exit 0), usage errors to stderr (exit 2). One file
// per subcommand; main only dispatches.
package main

import (
	"context"
	"io"
	"os"
	"os/signal"
	"syscall"

	"openvibe.network/agentsandbox/internal/buildinfo"
	"openvibe.network/agentsandbox/internal/cli"
)

// program is ovlive and its subcommands.
func program() cli.Program {
	return cli.Program{
		Name:    "ovlive",
		Version: buildinfo.Read().String(),
		Commands: []cli.Command{
			{Name: "serve", Summary: "serve the check-in endpoint, the owner's view and pages, /healthz and /metrics", Run: serveCmd},
			{Name: "admin", Summary: "create and delete persons, streams and services; issue, list and revoke credentials", Run: adminCmd},
		},
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
	return program().Run(ctx, args, stdin, stdout, stderr)
}
