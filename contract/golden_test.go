package contract

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"openvibe.network/agentsandbox"
)

// goldenCase is one case of testdata/golden/NAME.json; the verdicts come from
// ajv (scripts/ajv-golden/golden.mjs).
type goldenCase struct {
	Name   string                         `json:"name"`
	Input  json.RawMessage                `json:"input"`
	Raw    *string                        `json:"raw"`
	Valid  bool                           `json:"valid"`
	Errors []agentsandbox.ValidationError `json:"errors"`
}

// text is the case's input as JSON text, exactly as written in the file.
func (c goldenCase) text() []byte {
	if c.Raw != nil {
		return []byte(*c.Raw)
	}
	return c.Input
}

// loadGolden returns every golden case by contract name.
func loadGolden(tb testing.TB) map[string][]goldenCase {
	tb.Helper()
	files, err := filepath.Glob("testdata/golden/*.json")
	if err != nil || len(files) == 0 {
		tb.Fatalf("no golden files (err %v)", err)
	}
	all := make(map[string][]goldenCase)
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		var doc struct {
			Contract string       `json:"contract"`
			Cases    []goldenCase `json:"cases"`
		}
		if err := json.Unmarshal(data, &doc); err != nil {
			tb.Fatalf("%s: %v", f, err)
		}
		if want := strings.TrimSuffix(filepath.Base(f), ".json"); doc.Contract != want {
			tb.Fatalf("%s: contract %q, want %q", f, doc.Contract, want)
		}
		all[doc.Contract] = doc.Cases
	}
	return all
}

// TestGolden checks that the Go validator gives ajv's verdict on every case.
func TestGolden(t *testing.T) {
	all := loadGolden(t)
	if len(all[agentsandbox.WorkerCheckInContract]) < 300 {
		t.Fatalf("%d golden cases for %s, want the whole corpus", len(all[agentsandbox.WorkerCheckInContract]), agentsandbox.WorkerCheckInContract)
	}
	for name, cases := range all {
		for _, c := range cases {
			t.Run(name+"/"+c.Name, func(t *testing.T) {
				got, err := ValidateJSON(name, c.text())
				if err != nil {
					t.Fatal(err)
				}
				if got.Valid != c.Valid || !slices.Equal(got.Errors, c.Errors) {
					t.Errorf("input %s\n got %+v\nwant valid=%v errors=%+v", c.text(), got, c.Valid, c.Errors)
				}
			})
		}
	}
}

// TestSeedFixtures checks the contract's own fixtures: valid ones validate,
// rejected ones fail with the reason the seed names.
func TestSeedFixtures(t *testing.T) {
	tests := []struct {
		file string
		want Result
	}{
		{"valid-isolation-only", Result{Valid: true, Errors: []agentsandbox.ValidationError{}}},
		{"valid-worker-check-in", Result{Valid: true, Errors: []agentsandbox.ValidationError{}}},
		{"rejected-no-profile-fact", Result{Errors: []agentsandbox.ValidationError{{Path: "/isolation", Message: "must have required property 'profile'"}}}},
		{"rejected-not-host-isolated", Result{Errors: []agentsandbox.ValidationError{{Path: "/isolation/host_network", Message: "must be equal to constant"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			got, err := ValidateJSON(agentsandbox.WorkerCheckInContract, readSeed(t, tt.file))
			if err != nil {
				t.Fatal(err)
			}
			assertResult(t, got, tt.want)
		})
	}
}

func readSeed(tb testing.TB, name string) []byte {
	tb.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "seed", name+".json"))
	if err != nil {
		tb.Fatal(err)
	}
	return data
}

func assertResult(tb testing.TB, got, want Result) {
	tb.Helper()
	if got.Valid != want.Valid || !slices.Equal(got.Errors, want.Errors) {
		tb.Errorf("got %+v\nwant %+v", got, want)
	}
	if got.Errors == nil {
		tb.Errorf("Errors is nil; want an empty slice so that JSON says []")
	}
}
