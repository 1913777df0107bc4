// Package cli dispatches a program's subcommands and parses their flags:
// one table of commands, exit code 2 for a usage error (the reason on
// stderr), 0 for help.
//
// Program.Run and Parse print help on stdout, as ovlive and ovcontracts do;
// Dispatch and ParseFlags, which codes-sandbox still uses, print it on
// stderr.
package cli

import (
	"context"
	"errors"
	"flag"
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

// Dispatch runs the command of cmds named by args[0] with the rest of args.
// With no arguments it prints the usage of prog on stderr and returns 2; with
// -h, --help or help it prints it and returns 0; an unknown command is
// reported with the usage and returns 2.
func Dispatch(ctx context.Context, prog string, cmds []Command, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		Usage(stderr, prog, cmds)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	for _, c := range cmds {
		if c.Name == args[0] {
			return c.Run(ctx, args[1:], stdin, stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "%s: unknown command %q\n", prog, args[0])
	Usage(stderr, prog, cmds)
	return 2
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

// ParseFlags parses args into fs (made with flag.ContinueOnError). ok is
// false when the command must stop at once, with code: 0 after -h or --help,
// 2 after a bad flag (fs has printed why and its usage).
func ParseFlags(fs *flag.FlagSet, args []string) (code int, ok bool) {
	err := fs.Parse(args)
	switch {
	case err == nil:
		return 0, true
	case errors.Is(err, flag.ErrHelp):
		return 0, false
	}
	return 2, false
}
