package main

import (
	"context"
	"fmt"
	"io"

	"openvibe.network/agentsandbox/contract"
)

const listHelp = `Prints the names of the known contracts, one a line. Exit status: 0.`

func listCmd(_ context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	if _, code, ok := parseArgs("list", "", listHelp, args, 0, 0, stdout, stderr); !ok {
		return code
	}
	for _, name := range contract.Names() {
		fmt.Fprintln(stdout, name)
	}
	return 0
}
