// Package cli dispatches a program's subcommands and parses their flags:
// one table of commands (Program), exit code 2 for a usage error (the
// reason and the usage on stderr), 0 for help (on stdout), --version, and a
// context that ends at SIGINT or SIGTERM (Interruptible). Every command of
// this module (codes-sandbox, ovlive, ovcontracts) is built on it.
package cli

import (
	"context"
	"fmt"
	"io"
)

// Command is one subcommand: its name, one-line summary and entry point,
// which returns the process exit code.
type Command struct {
	Name    string
	Summary string
	Run     func(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int
}

// Usage writes the usage of prog to w: one line per command, in the order
// of cmds.
func Usage(w io.Writer, prog string, cmds []Command) {
	fmt.Fprintf(w, "usage: %s COMMAND [flags]  (COMMAND --help for its flags)\n", prog)
	width := 0
	for _, c := range cmds {
		width = max(width, len(c.Name))
	}
	for _, c := range cmds {
		fmt.Fprintf(w, "  %-*s %s\n", width+1, c.Name, c.Summary)
	}
}
