package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"

	"openvibe.network/agentsandbox/contract"
)

// parseArgs parses a subcommand's arguments (it has no flags but --help) and
// checks their number. It returns the positional arguments, or the exit code
// when the command is done: 0 after --help (usage on stdout), 2 after a usage
// error (reason and usage on stderr).
func parseArgs(name, synopsis, help string, args []string, minArgs, maxArgs int, stdout, stderr io.Writer) ([]string, int, bool) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	printUsage := func(w io.Writer) {
		fmt.Fprintf(w, "usage: ovcontracts %s\n\n%s\n", synopsis, help)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printUsage(stdout)
			return nil, 0, false
		}
		fmt.Fprintf(stderr, "ovcontracts %s: %v\n", name, err)
		printUsage(stderr)
		return nil, 2, false
	}
	pos := fs.Args()
	if len(pos) < minArgs || len(pos) > maxArgs {
		fmt.Fprintf(stderr, "ovcontracts %s: wrong number of arguments (%d)\n", name, len(pos))
		printUsage(stderr)
		return nil, 2, false
	}
	return pos, 0, true
}

// knownContract reports whether name is a contract; if not, it says so on
// stderr with the names that are known.
func knownContract(cmd, name string, stderr io.Writer) bool {
	names := contract.Names()
	if slices.Contains(names, name) {
		return true
	}
	fmt.Fprintf(stderr, "ovcontracts %s: unknown contract %q; known contracts: %s (see ovcontracts list)\n", cmd, name, strings.Join(names, ", "))
	return false
}
