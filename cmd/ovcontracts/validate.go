package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"openvibe.network/agentsandbox/contract"
)

const validateHelp = `Checks the JSON document in FILE (or standard input when FILE is - or
absent) against contract NAME and prints the verdict as JSON on stdout:
  {"valid": false, "errors": [{"path": "/isolation", "message": "must have required property 'profile'"}]}
errors is always an array, sorted by (path, message). Input that is not
well-formed JSON (or has duplicate keys, trailing data, invalid UTF-8) is
invalid, with one error at path "" saying what is wrong and where.

Exit status: 0 valid, 1 invalid, 2 usage error, unknown contract or
unreadable file.`

func validateCmd(_ context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	pos, code, ok := parseArgs("validate", "NAME [FILE|-]", validateHelp, args, 1, 2, stdout, stderr)
	if !ok {
		return code
	}
	name := pos[0]
	if !knownContract("validate", name, stderr) {
		return 2
	}
	data, err := readInput(pos[1:], stdin)
	if err != nil {
		fmt.Fprintf(stderr, "ovcontracts validate: %v; give a readable JSON file, or - for standard input\n", err)
		return 2
	}
	res, err := contract.ValidateJSON(name, data)
	if err != nil {
		fmt.Fprintf(stderr, "ovcontracts validate: %v\n", err)
		return 2
	}
	enc := json.NewEncoder(stdout)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(res); err != nil {
		fmt.Fprintf(stderr, "ovcontracts validate: write verdict: %v\n", err)
		return 2
	}
	if !res.Valid {
		return 1
	}
	return 0
}

// readInput reads the file named in args, or stdin when there is none or it is "-".
func readInput(args []string, stdin io.Reader) ([]byte, error) {
	if len(args) == 0 || args[0] == "-" {
		data, err := io.ReadAll(stdin)
		if err != nil {
			return nil, fmt.Errorf("read standard input: %w", err)
		}
		return data, nil
	}
	data, err := os.ReadFile(args[0])
	if err != nil {
		return nil, fmt.Errorf("read input: %w", err)
	}
	return data, nil
}
