// Command ovcontracts validates JSON documents against the project's contracts
// (the sandbox worker check-in, live.agent-sandbox-worker-request@1), prints a
// contract's JSON Schema and lists the contracts. Its verdicts are the JS SDK's
// (ajv): `{"valid":…,"errors":[{"path":…,"message":…}]}`.
//
// Exit codes: 0 valid (or success), 1 invalid, 2 usage error, unknown
// contract or unreadable input. One file per subcommand; main only dispatches.
package main

import (
	"fmt"
	"io"
	"os"
	"sort"
)

// command is one subcommand: its one-line usage, summary and entry point,
// which returns the exit code.
type command struct {
	usage   string
	summary string
	run     func(args []string, stdin io.Reader, stdout, stderr io.Writer) int
}

func commands() map[string]command {
	return map[string]command{
		"validate": {"validate NAME [FILE|-]", "check a JSON document (a file, or standard input) against contract NAME", validateCmd},
		"schema":   {"schema NAME", "print the JSON Schema of contract NAME", schemaCmd},
		"list":     {"list", "print the names of the known contracts", listCmd},
	}
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run is the whole command, in process: tests call it directly.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	cmds := commands()
	if len(args) == 0 {
		usage(stderr, cmds)
		return 2
	}
	if isHelp(args[0]) {
		usage(stdout, cmds)
		return 0
	}
	c, ok := cmds[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "ovcontracts: unknown command %q\n", args[0])
		usage(stderr, cmds)
		return 2
	}
	return c.run(args[1:], stdin, stdout, stderr)
}

func isHelp(arg string) bool {
	return arg == "-h" || arg == "-help" || arg == "--help" || arg == "help"
}

func usage(w io.Writer, cmds map[string]command) {
	fmt.Fprintln(w, "usage: ovcontracts COMMAND [ARGS]  (ovcontracts COMMAND --help for more)")
	names := make([]string, 0, len(cmds))
	for name := range cmds {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		fmt.Fprintf(w, "  %-24s %s\n", cmds[name].usage, cmds[name].summary)
	}
	fmt.Fprintln(w, "exit status: 0 valid or done, 1 invalid, 2 usage error, unknown contract or unreadable input")
}
