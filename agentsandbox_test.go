package agentsandbox_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"

	"openvibe.network/agentsandbox"
)

// deps lists the packages pkg links, standard library excluded.
func deps(tb testing.TB, pkg string) []string {
	tb.Helper()
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", pkg).Output()
	if err != nil {
		tb.Fatalf("go list -deps %s: %v", pkg, err)
	}
	return strings.Fields(string(out))
}

// TestImportsOnlyStandardLibrary: the shared vocabulary links nothing else.
func TestImportsOnlyStandardLibrary(t *testing.T) {
	if got := deps(t, "openvibe.network/agentsandbox"); !slices.Equal(got, []string{"openvibe.network/agentsandbox"}) {
		t.Errorf("the root package links %v; it must import only the standard library", got)
	}
}

// TestLeanImporters: a program that imports only the Go client, or Live's
// domain, does not link the JSON Schema engine.
func TestLeanImporters(t *testing.T) {
	for _, pkg := range []string{"openvibe.network/agentsandbox/client", "openvibe.network/agentsandbox/live"} {
		for _, d := range deps(t, pkg) {
			if strings.Contains(d, "jsonschema") || d == "openvibe.network/agentsandbox/contract" {
				t.Errorf("%s links %s", pkg, d)
			}
		}
	}
}

func TestLimitsWithDefaults(t *testing.T) {
	tests := []struct {
		name    string
		in, out agentsandbox.Limits
	}{
		{"Zero", agentsandbox.Limits{}, agentsandbox.Limits{MemoryMB: 2048, DiskMB: 512, Pids: 256, CPUPercent: 100}},
		{"Given", agentsandbox.Limits{MemoryMB: 64, DiskMB: 8, Pids: 16, CPUPercent: 50}, agentsandbox.Limits{MemoryMB: 64, DiskMB: 8, Pids: 16, CPUPercent: 50}},
		{"Partial", agentsandbox.Limits{Pids: 32}, agentsandbox.Limits{MemoryMB: 2048, DiskMB: 512, Pids: 32, CPUPercent: 100}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.in.WithDefaults(); got != tt.out {
				t.Errorf("got %+v, want %+v", got, tt.out)
			}
		})
	}
}

// TestVocabularyIsCopied: the lists are the caller's own.
func TestVocabularyIsCopied(t *testing.T) {
	agentsandbox.Checks()[0] = "x"
	agentsandbox.IsolationFacts()[0] = "x"
	agentsandbox.EgressPorts()[0] = 1
	if agentsandbox.Checks()[0] != agentsandbox.CheckNetworkNamespace || agentsandbox.IsolationFacts()[0] != agentsandbox.FactHostNetwork || agentsandbox.EgressPorts()[0] != 80 {
		t.Error("a caller changed the shared vocabulary")
	}
}
