// Command ovcontracts validates JSON documents against the project's contracts
// (the sandbox worker check-in, live.agent-sandbox-worker-request@1), prints a
// contract's JSON Schema and lists the contracts. Its verdicts are the JS SDK's
// (ajv): `{"valid":…,"errors":[{"path":…,"message":…}]}`.
//
// Exit codes: 0 valid (or success), 1 invalid, 2 usage error, unknown
// contract or unreadable input. Help goes to stdout, usage errors to stderr.
// One file per subcommand; main only dispatches.
package main

import (
	"context"
	"io"
	"os"

	"openvibe.network/agentsandbox/internal/buildinfo"
	"openvibe.network/agentsandbox/internal/cli"
)

// program is ovcontracts and its subcommands.
func program() cli.Program {
	return cli.Program{
		Name:    "ovcontracts",
		Version: buildinfo.Read().String(),
		Commands: []cli.Command{
			{Name: "validate", Summary: "NAME [FILE|-]  check a JSON document (a file, or standard input) against contract NAME", Run: validateCmd},
			{Name: "schema", Summary: "NAME           print the JSON Schema of contract NAME", Run: schemaCmd},
			{Name: "list", Summary: "               print the names of the known contracts", Run: listCmd},
		},
		Footer: "exit status: 0 valid or done, 1 invalid, 2 usage error, unknown contract or unreadable input",
	}
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run is the whole command, in process: tests call it directly.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return program().Run(context.Background(), args, stdin, stdout, stderr)
}
