package main

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"openvibe.network/agentsandbox/contract"
	"openvibe.network/agentsandbox/internal/cli"
)

// parseArgs parses a subcommand's arguments (it has no flags but --help) and
// checks their number. It returns the positional arguments, or the exit code
// when the command is done: 0 after --help (usage on stdout), 2 after a usage
// error (reason and usage on stderr).
func parseArgs(name, synopsis, help string, args []string, minArgs, maxArgs int, stdout, stderr io.Writer) ([]string, int, bool) {
	fs := cli.NewFlagSet("ovcontracts "+name, synopsis, help)
	if code, ok := cli.Parse(fs, args, minArgs, maxArgs, stdout, stderr); !ok {
		return nil, code, false
	}
	return fs.Args(), 0, true
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
