package contract

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
)

func TestDiffTmp(t *testing.T) {
	data, err := os.ReadFile("/tmp/diff-cases.json")
	if err != nil {
		t.Skip()
	}
	var doc struct{ Cases []goldenCase }
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	bad, skipped := 0, 0
	for _, c := range doc.Cases {
		got, _ := ValidateJSON(WorkerCheckInName, c.text())
		if len(got.Errors) == 1 && (strings.Contains(got.Errors[0].Message, "out of the range") || strings.Contains(got.Errors[0].Message, "surrogate")) {
			skipped++
			continue
		}
		if got.Valid != c.Valid || !slices.Equal(got.Errors, c.Errors) {
			bad++
			if bad < 15 {
				t.Errorf("%.300s\n got %+v\nwant %v %+v", *c.Raw, got, c.Valid, c.Errors)
			}
		}
	}
	t.Logf("%d cases, %d differ, %d skipped", len(doc.Cases), bad, skipped)
}
