package agentsandbox_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
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

func TestLimitsCheckAndWithin(t *testing.T) {
	type L = agentsandbox.Limits
	bounds := L{MemoryMB: 1024, DiskMB: 256, Pids: 128, CPUPercent: 100}
	tests := []struct {
		name        string
		in          L
		check, with error
	}{
		{"Defaults", L{}.WithDefaults(), nil, &agentsandbox.LimitError{Field: "memory_mb", Value: 2048, Min: 16, Max: 1024}},
		{"Zero", L{}, &agentsandbox.LimitError{Field: "memory_mb", Value: 0, Min: 16}, nil},
		{"AtBounds", bounds, nil, nil},
		{"AtMinimums", L{MemoryMB: 16, DiskMB: 1, Pids: 16, CPUPercent: 1}, nil, nil},
		{"PidsLow", L{MemoryMB: 64, DiskMB: 8, Pids: 15, CPUPercent: 50},
			&agentsandbox.LimitError{Field: "pids", Value: 15, Min: 16}, &agentsandbox.LimitError{Field: "pids", Value: 15, Min: 16, Max: 128}},
		{"CPUHigh", L{CPUPercent: 101}, &agentsandbox.LimitError{Field: "memory_mb", Value: 0, Min: 16},
			&agentsandbox.LimitError{Field: "cpu_percent", Value: 101, Min: 1, Max: 100}},
		{"DiskNegative", L{DiskMB: -1}, &agentsandbox.LimitError{Field: "memory_mb", Value: 0, Min: 16},
			&agentsandbox.LimitError{Field: "disk_mb", Value: -1, Min: 1, Max: 256}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.check, tt.in.Check()); diff != "" {
				t.Errorf("Check (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.with, tt.in.Within(bounds)); diff != "" {
				t.Errorf("Within (-want +got):\n%s", diff)
			}
		})
	}
	if got, want := (&agentsandbox.LimitError{Field: "pids", Value: 200, Min: 16, Max: 128}).Error(), "pids is 200; give 16 to 128"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if got, want := (L{Pids: 32}).Or(bounds), (L{MemoryMB: 1024, DiskMB: 256, Pids: 32, CPUPercent: 100}); got != want {
		t.Errorf("Or = %+v, want %+v", got, want)
	}
}

// TestLimitsCheckBrowser: a browser sandbox's limits must hold Chromium;
// the first short one is named with the minimum.
func TestLimitsCheckBrowser(t *testing.T) {
	type L = agentsandbox.Limits
	tests := []struct {
		name string
		in   L
		want error
	}{
		{"Defaults", L{}.WithDefaults(), nil},
		{"AtMinimums", L{MemoryMB: 512, DiskMB: 128, Pids: 256, CPUPercent: 1}, nil},
		{"MemoryLow", L{MemoryMB: 256, DiskMB: 512, Pids: 256}, &agentsandbox.LimitError{Field: "memory_mb", Value: 256, Min: 512, Browser: true}},
		{"DiskLow", L{MemoryMB: 1024, DiskMB: 64, Pids: 256}, &agentsandbox.LimitError{Field: "disk_mb", Value: 64, Min: 128, Browser: true}},
		{"PidsLow", L{MemoryMB: 1024, DiskMB: 512, Pids: 64}, &agentsandbox.LimitError{Field: "pids", Value: 64, Min: 256, Browser: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, tt.in.CheckBrowser()); diff != "" {
				t.Errorf("CheckBrowser (-want +got):\n%s", diff)
			}
		})
	}
	if got, want := (&agentsandbox.LimitError{Field: "memory_mb", Value: 256, Min: 512, Browser: true}).Error(), "memory_mb is 256; a browser sandbox needs at least 512"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
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

func TestValidEnvName(t *testing.T) {
	var got []string
	for _, name := range []string{"PATH", "_x1", "a", "A_B_9", "", "1X", "A-B", "A=B", "Ä", "A B", "x\x00"} {
		if agentsandbox.ValidEnvName(name) {
			got = append(got, name)
		}
	}
	if want := []string{"PATH", "_x1", "a", "A_B_9"}; !slices.Equal(got, want) {
		t.Errorf("valid names %q, want %q", got, want)
	}
}
