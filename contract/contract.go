// Package contract holds the JSON contracts this project speaks, as embedded
// JSON Schema (draft 2020-12) documents, and validates values against them with
// the verdict the OpenVibe JS SDK gives (ajv 8 with ajv-formats, allErrors):
// every violation, as ajv's instancePath and message, sorted by (path, message).
//
// The schemas are compiled once, on first use, into immutable validators that
// are safe for concurrent use. The engine is santhosh-tekuri/jsonschema/v6;
// the package only adapts its errors to ajv's shape and supplies ajv-formats'
// date-time format.
package contract

import (
	"embed"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"openvibe.network/agentsandbox"
)

// ErrUnknownContract is wrapped by the errors of Schema, Validate and
// ValidateJSON when the contract name is not one of Names().
var ErrUnknownContract = errors.New("unknown contract")

//go:embed schemas/*.json
var schemaFiles embed.FS

// schemaFile maps a contract name to its embedded file: schemas/NAME.json.
func schemaFile(name string) string { return "schemas/" + name + ".json" }

// Names returns the names of the known contracts, sorted. The slice is the
// caller's own.
func Names() []string {
	entries, _ := schemaFiles.ReadDir("schemas") // embedded: cannot fail
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, strings.TrimSuffix(e.Name(), ".json"))
	}
	slices.Sort(names)
	return names
}

// Schema returns the JSON Schema document of the named contract, as embedded.
// The bytes are the caller's own. Its error wraps ErrUnknownContract when no
// contract has that name.
func Schema(name string) ([]byte, error) {
	if !slices.Contains(Names(), name) {
		return nil, unknown(name)
	}
	data, err := schemaFiles.ReadFile(schemaFile(name))
	if err != nil {
		return nil, fmt.Errorf("read schema %s: %w", name, err)
	}
	return data, nil
}

func unknown(name string) error {
	return fmt.Errorf("contract %q: %w (known: %s)", name, ErrUnknownContract, strings.Join(Names(), ", "))
}

// validators compiles every embedded schema once, on first use. The map and
// the validators in it are never modified afterwards.
var validators = sync.OnceValues(func() (map[string]*validator, error) {
	m := make(map[string]*validator)
	for _, name := range Names() {
		data, err := Schema(name)
		if err != nil {
			return nil, err
		}
		v, err := compile(data)
		if err != nil {
			return nil, fmt.Errorf("compile contract %s: %w", name, err)
		}
		m[name] = v
	}
	if v := m[agentsandbox.WorkerCheckInContract]; v != nil {
		v.fast = fastWorkerCheckIn
	}
	return m, nil
})

// lookup returns the compiled validator of a contract.
func lookup(name string) (*validator, error) {
	m, err := validators()
	if err != nil {
		return nil, err
	}
	v, ok := m[name]
	if !ok {
		return nil, unknown(name)
	}
	return v, nil
}
