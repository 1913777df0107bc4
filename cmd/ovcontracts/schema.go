package main

import (
	"context"
	"fmt"
	"io"

	"openvibe.network/agentsandbox/contract"
)

const schemaHelp = `Prints the JSON Schema (draft 2020-12) of contract NAME, as embedded in
this binary. Exit status: 0 done, 2 usage error or unknown contract.`

func schemaCmd(_ context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	pos, code, ok := parseArgs("schema", "NAME", schemaHelp, args, 1, 1, stdout, stderr)
	if !ok {
		return code
	}
	if !knownContract("schema", pos[0], stderr) {
		return 2
	}
	data, err := contract.Schema(pos[0])
	if err != nil {
		fmt.Fprintf(stderr, "ovcontracts schema: %v\n", err)
		return 2
	}
	if _, err := stdout.Write(data); err != nil {
		fmt.Fprintf(stderr, "ovcontracts schema: write: %v\n", err)
		return 2
	}
	return 0
}
