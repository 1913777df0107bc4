package cli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// Program is a command made of subcommands, at any level: "ovlive", or
// "ovlive admin person". Its Run sends help to stdout and usage errors to
// stderr, as every command of this module does (Dispatch, the older entry
// point, sends both to stderr).
type Program struct {
	// Name is how the usage names the program, e.g. "ovlive admin".
	Name string
	// Commands are the subcommands, in the order the usage lists them.
	Commands []Command
	// Version, when set, is printed by --version ("NAME VERSION").
	Version string
	// Footer, when set, is printed after the command list.
	Footer string
}

// Run runs the command of p named by args[0] with the rest of args. With no
// arguments it prints the usage on stderr and returns 2; with -h, --help or
// help it prints it on stdout and returns 0; with --version (when p has a
// version) it prints the version on stdout and returns 0; an unknown command
// is reported on stderr with the usage and returns 2.
func (p Program) Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	switch {
	case len(args) == 0:
		p.Usage(stderr)
		return 2
	case args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help":
		p.Usage(stdout)
		return 0
	case p.Version != "" && (args[0] == "--version" || args[0] == "-version" || args[0] == "version"):
		fmt.Fprintf(stdout, "%s %s\n", p.Name, p.Version)
		return 0
	}
	for _, c := range p.Commands {
		if c.Name == args[0] {
			return c.Run(ctx, args[1:], stdin, stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "%s: unknown command %q\n", p.Name, args[0])
	p.Usage(stderr)
	return 2
}

// Usage writes p's usage to w: one line per command, then the footer.
func (p Program) Usage(w io.Writer) {
	Usage(w, p.Name, p.Commands)
	if p.Footer != "" {
		fmt.Fprintln(w, strings.TrimRight(p.Footer, "\n"))
	}
}

// NewFlagSet returns a flag set for the command named name (e.g. "ovlive
// serve") that continues on errors; its usage is "usage: NAME SYNOPSIS",
// the help text when given, and the flags.
func NewFlagSet(name, synopsis, help string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "usage: %s %s\n", name, synopsis)
		if help != "" {
			fmt.Fprintf(w, "\n%s\n", strings.TrimRight(help, "\n"))
		}
		var any bool
		fs.VisitAll(func(*flag.Flag) { any = true })
		if any {
			fmt.Fprintln(w, "\nflags:")
			fs.PrintDefaults()
		}
	}
	return fs
}

// Parse parses args into fs and checks that between minArgs and maxArgs
// positional arguments follow the flags (maxArgs < 0: no upper bound). ok
// is false when the command must stop at once, with code: 0 after -h or
// --help (the usage went to stdout), 2 after a bad flag or a wrong number
// of arguments (the reason went to stderr, with the usage's first line and
// a hint: see UsageError).
func Parse(fs *flag.FlagSet, args []string, minArgs, maxArgs int, stdout, stderr io.Writer) (code int, ok bool) {
	var buf bytes.Buffer
	fs.SetOutput(&buf)
	err := fs.Parse(args)
	fs.SetOutput(stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fs.SetOutput(stdout)
		fs.Usage()
		fs.SetOutput(stderr)
		return 0, false
	case err != nil:
		// The flag package wrote the reason, then the whole usage.
		reason, _, _ := strings.Cut(buf.String(), "\n")
		fmt.Fprintf(stderr, "%s: %s\n", fs.Name(), reason)
		shortUsage(fs, stderr)
		return 2, false
	}
	if n := fs.NArg(); n < minArgs || (maxArgs >= 0 && n > maxArgs) {
		switch {
		case maxArgs == 0:
			return UsageError(fs, stderr, "unexpected arguments: %s", strings.Join(fs.Args(), " ")), false
		case minArgs == maxArgs:
			return UsageError(fs, stderr, "want %d argument(s), got %d", minArgs, n), false
		default:
			return UsageError(fs, stderr, "wrong number of arguments (%d)", n), false
		}
	}
	return 0, true
}

// UsageError writes "NAME: message", the first line of fs's usage (its
// synopsis) and a hint to run NAME --help for the rest to stderr, and
// returns 2, the exit code of a usage error.
func UsageError(fs *flag.FlagSet, stderr io.Writer, format string, args ...any) int {
	fmt.Fprintf(stderr, "%s: %s\n", fs.Name(), fmt.Sprintf(format, args...))
	shortUsage(fs, stderr)
	return 2
}

// shortUsage writes the first line of fs's usage and where the rest is.
func shortUsage(fs *flag.FlagSet, w io.Writer) {
	var buf bytes.Buffer
	fs.SetOutput(&buf)
	fs.Usage()
	fs.SetOutput(w)
	first, _, _ := strings.Cut(buf.String(), "\n")
	fmt.Fprintf(w, "%s\n(%s --help tells every flag)\n", first, fs.Name())
}
