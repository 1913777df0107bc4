package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"openvibe.network/agentsandbox"
	"openvibe.network/agentsandbox/contract"
)

const name = agentsandbox.WorkerCheckInContract

func TestRun(t *testing.T) {
	dir := t.TempDir()
	seed := filepath.Join("..", "..", "contract", "testdata", "seed")
	valid := filepath.Join(seed, "valid-worker-check-in.json")
	rejected := filepath.Join(seed, "rejected-no-profile-fact.json")
	malformed := filepath.Join(dir, "malformed.json")
	if err := os.WriteFile(malformed, []byte(`{"isolation":{},"isolation":{}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	validJSON, err := os.ReadFile(valid)
	if err != nil {
		t.Fatal(err)
	}
	schema, err := contract.Schema(name)
	if err != nil {
		t.Fatal(err)
	}
	okVerdict := `{"valid":true,"errors":[]}`
	tests := []struct {
		name       string
		args       []string
		stdin      string
		wantCode   int
		wantStdout string // exact, after compacting JSON; "" means empty
		wantStderr string // substring; "" means empty
	}{
		{"validate/file-valid", []string{"validate", name, valid}, "", 0, okVerdict, ""},
		{"validate/file-invalid", []string{"validate", name, rejected}, "", 1,
			`{"valid":false,"errors":[{"path":"/isolation","message":"must have required property 'profile'"}]}`, ""},
		{"validate/stdin-dash", []string{"validate", name, "-"}, string(validJSON), 0, okVerdict, ""},
		{"validate/stdin-implicit", []string{"validate", name}, `{"isolation":{"host_network":true}}`, 1,
			`{"valid":false,"errors":[{"path":"/isolation","message":"must have required property 'credentials'"},` +
				`{"path":"/isolation","message":"must have required property 'egress_proxy'"},` +
				`{"path":"/isolation","message":"must have required property 'profile'"},` +
				`{"path":"/isolation","message":"must have required property 'workspace'"},` +
				`{"path":"/isolation/host_network","message":"must be equal to constant"}]}`, ""},
		{"validate/not-well-formed", []string{"validate", name, malformed}, "", 1,
			`{"valid":false,"errors":[{"path":"","message":"not well-formed JSON: duplicate key \"isolation\" at byte offset 16"}]}`, ""},
		{"validate/empty-stdin", []string{"validate", name}, "", 1,
			`{"valid":false,"errors":[{"path":"","message":"not well-formed JSON: no JSON value (the input is empty or only whitespace) at byte offset 0"}]}`, ""},
		{"validate/ErrUnknownContract", []string{"validate", "live.nope@1", valid}, "", 2, "", `unknown contract "live.nope@1"`},
		{"validate/ErrUnreadableFile", []string{"validate", name, filepath.Join(dir, "missing.json")}, "", 2, "", "give a readable JSON file"},
		{"validate/ErrDirectory", []string{"validate", name, dir}, "", 2, "", "read input"},
		{"validate/ErrNoName", []string{"validate"}, "", 2, "", "wrong number of arguments (0)"},
		{"validate/ErrTooMany", []string{"validate", name, valid, valid}, "", 2, "", "wrong number of arguments (3)"},
		{"validate/ErrBadFlag", []string{"validate", "--strict", name}, "", 2, "", "flag provided but not defined"},
		{"validate/help", []string{"validate", "--help"}, "", 0, "usage: ovcontracts validate NAME [FILE|-]", ""},
		{"schema/ok", []string{"schema", name}, "", 0, string(schema), ""},
		{"schema/ErrUnknownContract", []string{"schema", "x"}, "", 2, "", `unknown contract "x"`},
		{"schema/ErrNoName", []string{"schema"}, "", 2, "", "usage: ovcontracts schema NAME"},
		{"schema/help", []string{"schema", "-h"}, "", 0, "usage: ovcontracts schema NAME", ""},
		{"list/ok", []string{"list"}, "", 0, name + "\n", ""},
		{"list/ErrArgs", []string{"list", "x"}, "", 2, "", "unexpected arguments: x"},
		{"list/help", []string{"list", "--help"}, "", 0, "usage: ovcontracts list", ""},
		{"help", []string{"--help"}, "", 0, "usage: ovcontracts COMMAND", ""},
		{"help-word", []string{"help"}, "", 0, "usage: ovcontracts COMMAND", ""},
		{"ErrNoCommand", nil, "", 2, "", "usage: ovcontracts COMMAND"},
		{"ErrUnknownCommand", []string{"check"}, "", 2, "", `unknown command "check"`},
		{"version", []string{"--version"}, "", 0, "ovcontracts ", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(tt.args, strings.NewReader(tt.stdin), &stdout, &stderr)
			if code != tt.wantCode {
				t.Errorf("exit %d, want %d (stderr %q)", code, tt.wantCode, stderr.String())
			}
			if got := compactJSON(stdout.Bytes()); tt.wantStdout == "" && stdout.Len() != 0 ||
				tt.wantStdout != "" && got != tt.wantStdout && !strings.HasPrefix(got, tt.wantStdout) {
				t.Errorf("stdout %q\n want %q", got, tt.wantStdout)
			}
			if tt.wantStderr == "" && stderr.Len() != 0 || !strings.Contains(stderr.String(), tt.wantStderr) {
				t.Errorf("stderr %q, want it to contain %q", stderr.String(), tt.wantStderr)
			}
		})
	}
}

// compactJSON compacts a verdict so that cases can be written on one line;
// anything else is returned as it is.
func compactJSON(b []byte) string {
	if !bytes.HasPrefix(b, []byte(`{`+"\n"+`  "valid"`)) {
		return string(b)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return string(b)
	}
	return buf.String()
}
