package contract

import (
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"

	"openvibe.network/agentsandbox"
)

// isolated is a valid isolation report; with returns a check-in holding it and
// the given top-level fields.
var isolatedJSON = `{"host_network":false,"credentials":false,"profile":false,"egress_proxy":true,"workspace":"ephemeral"}`

func with(fields string) string {
	if fields == "" {
		return `{"isolation":` + isolatedJSON + `}`
	}
	return `{` + fields + `,"isolation":` + isolatedJSON + `}`
}

// TestBoundaries checks each constraint of the contract just inside and just
// outside, independently of the golden corpus.
func TestBoundaries(t *testing.T) {
	astral := "\U0001F600"
	ok := []agentsandbox.ValidationError{}
	tests := []struct {
		name string
		json string
		want []agentsandbox.ValidationError
	}{
		{"worker_id/64", with(`"worker_id":"` + strings.Repeat("a", 64) + `"`), ok},
		{"worker_id/65", with(`"worker_id":"` + strings.Repeat("a", 65) + `"`), []agentsandbox.ValidationError{{Path: "/worker_id", Message: "must NOT have more than 64 characters"}}},
		{"service/64-astral", with(`"service":"` + strings.Repeat(astral, 64) + `"`), ok},
		{"service/65-astral", with(`"service":"` + strings.Repeat(astral, 65) + `"`), []agentsandbox.ValidationError{{Path: "/service", Message: "must NOT have more than 64 characters"}}},
		{"version/65", with(`"version":"` + strings.Repeat("v", 65) + `"`), []agentsandbox.ValidationError{{Path: "/version", Message: "must NOT have more than 64 characters"}}},
		{"version/number", with(`"version":1`), []agentsandbox.ValidationError{{Path: "/version", Message: "must be string"}}},
		{"ready/string", with(`"ready":"true"`), []agentsandbox.ValidationError{{Path: "/ready", Message: "must be boolean"}}},
		{"reasons/10", with(`"reasons":["a","a","a","a","a","a","a","a","a","a"]`), ok},
		{"reasons/11", with(`"reasons":["a","a","a","a","a","a","a","a","a","a","a"]`), []agentsandbox.ValidationError{{Path: "/reasons", Message: "must NOT have more than 10 items"}}},
		{"reasons/item-500", with(`"reasons":["` + strings.Repeat(astral, 500) + `"]`), ok},
		{"reasons/item-501", with(`"reasons":["` + strings.Repeat("x", 501) + `"]`), []agentsandbox.ValidationError{{Path: "/reasons/0", Message: "must NOT have more than 500 characters"}}},
		{"reasons/3-number", with(`"reasons":["a","b","c",4]`), []agentsandbox.ValidationError{{Path: "/reasons/3", Message: "must be string"}}},
		{"checks/x", with(`"checks":{"x":"yes","y":true}`), []agentsandbox.ValidationError{{Path: "/checks/x", Message: "must be boolean"}}},
		{"checks/escaped", with(`"checks":{"a/b~c":0}`), []agentsandbox.ValidationError{{Path: "/checks/a~1b~0c", Message: "must be boolean"}}},
		{"checks/array", with(`"checks":[]`), []agentsandbox.ValidationError{{Path: "/checks", Message: "must be object"}}},
		{"checked_at/null", with(`"checked_at":null`), ok},
		{"checked_at/number", with(`"checked_at":0`), []agentsandbox.ValidationError{{Path: "/checked_at", Message: "must be string,null"}}},
		{"checked_at/bare-date", with(`"checked_at":"2026-11-07"`), []agentsandbox.ValidationError{{Path: "/checked_at", Message: `must match format "date-time"`}}},
		{"at/null", with(`"at":null`), []agentsandbox.ValidationError{{Path: "/at", Message: "must be string"}}},
		{"at/leap-second", with(`"at":"2016-12-31T23:59:60Z"`), ok},
		{"at/hour-25", with(`"at":"2026-11-07T25:00:00Z"`), []agentsandbox.ValidationError{{Path: "/at", Message: `must match format "date-time"`}}},
		{"browser/number", with(`"browser":1`), []agentsandbox.ValidationError{{Path: "/browser", Message: "must be boolean"}}},
		{"capacity/1", with(`"capacity":1`), ok},
		{"capacity/0", with(`"capacity":0`), []agentsandbox.ValidationError{{Path: "/capacity", Message: "must be >= 1"}}},
		{"capacity/2.0", with(`"capacity":2.0`), ok},
		{"capacity/1.5", with(`"capacity":1.5`), []agentsandbox.ValidationError{{Path: "/capacity", Message: "must be integer"}}},
		{"capacity/0.5", with(`"capacity":0.5`), []agentsandbox.ValidationError{{Path: "/capacity", Message: "must be >= 1"}, {Path: "/capacity", Message: "must be integer"}}},
		{"active/0", with(`"active":0`), ok},
		{"active/-1", with(`"active":-1`), []agentsandbox.ValidationError{{Path: "/active", Message: "must be >= 0"}}},
		{"active/string", with(`"active":"0"`), []agentsandbox.ValidationError{{Path: "/active", Message: "must be integer"}}},
		{"isolation/missing", `{"worker_id":"w"}`, []agentsandbox.ValidationError{{Path: "", Message: "must have required property 'isolation'"}}},
		{"isolation/array", `{"isolation":[]}`, []agentsandbox.ValidationError{{Path: "/isolation", Message: "must be object"}}},
		{"isolation/no-profile", `{"isolation":{"host_network":false,"credentials":false,"egress_proxy":true,"workspace":"ephemeral"}}`,
			[]agentsandbox.ValidationError{{Path: "/isolation", Message: "must have required property 'profile'"}}},
		{"isolation/workspace", `{"isolation":{"host_network":false,"credentials":false,"profile":false,"egress_proxy":true,"workspace":"disk"}}`,
			[]agentsandbox.ValidationError{{Path: "/isolation/workspace", Message: "must be equal to constant"}}},
		{"isolation/egress-proxy-string", `{"isolation":{"host_network":false,"credentials":false,"profile":false,"egress_proxy":"true","workspace":"ephemeral"}}`,
			[]agentsandbox.ValidationError{{Path: "/isolation/egress_proxy", Message: "must be equal to constant"}}},
		{"isolation/extra-keys", `{"isolation":{"host_network":false,"credentials":false,"profile":false,"egress_proxy":true,"workspace":"ephemeral","seccomp":"yes"}}`, ok},
		{"top-level/unknown", with(`"whatever":{"x":[1]}`), ok},
		{"root/array", `[]`, []agentsandbox.ValidationError{{Path: "", Message: "must be object"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ValidateJSON(agentsandbox.WorkerCheckInContract, []byte(tt.json))
			if err != nil {
				t.Fatal(err)
			}
			assertResult(t, got, Result{Valid: len(tt.want) == 0, Errors: tt.want})
		})
	}
}

// TestValidateValues checks Validate on decoded values and on plain Go values.
func TestValidateValues(t *testing.T) {
	decoded, err := DecodeStrict(readSeed(t, "valid-worker-check-in"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		value any
		want  Result
	}{
		{"decoded", decoded, Result{Valid: true, Errors: []agentsandbox.ValidationError{}}},
		{"go-struct", struct {
			Isolation map[string]any `json:"isolation"`
			Capacity  int            `json:"capacity"`
		}{map[string]any{"host_network": false, "credentials": false, "profile": false, "egress_proxy": true, "workspace": "ephemeral"}, 0},
			Result{Errors: []agentsandbox.ValidationError{{Path: "/capacity", Message: "must be >= 1"}}}},
		{"map-with-go-ints", map[string]any{"active": -2, "isolation": map[string]any{}}, Result{Errors: []agentsandbox.ValidationError{
			{Path: "/active", Message: "must be >= 0"},
			{Path: "/isolation", Message: "must have required property 'credentials'"},
			{Path: "/isolation", Message: "must have required property 'egress_proxy'"},
			{Path: "/isolation", Message: "must have required property 'host_network'"},
			{Path: "/isolation", Message: "must have required property 'profile'"},
			{Path: "/isolation", Message: "must have required property 'workspace'"},
		}}},
		{"json-number-2.0", map[string]any{"capacity": json.Number("2.0"), "isolation": mustDecode(t, isolatedJSON)}, Result{Valid: true, Errors: []agentsandbox.ValidationError{}}},
		{"invalid-utf8-string", map[string]any{"worker_id": "\xff", "isolation": mustDecode(t, isolatedJSON)}, Result{Valid: true, Errors: []agentsandbox.ValidationError{}}},
		{"nil", nil, Result{Errors: []agentsandbox.ValidationError{{Path: "", Message: "must be object"}}}},
		{"typed-check-in", seedCheckIn(), Result{Valid: true, Errors: []agentsandbox.ValidationError{}}},
		{"typed-check-in-unproven-fact", agentsandbox.WorkerCheckIn{Isolation: factsOnly(agentsandbox.Isolation{HostNetwork: new(false)})}, Result{Errors: []agentsandbox.ValidationError{
			{Path: "/isolation", Message: "must have required property 'credentials'"},
			{Path: "/isolation", Message: "must have required property 'egress_proxy'"},
			{Path: "/isolation", Message: "must have required property 'profile'"},
			{Path: "/isolation", Message: "must have required property 'workspace'"},
		}}},
		{"raw-message", json.RawMessage(with(`"capacity":1.5`)), Result{Errors: []agentsandbox.ValidationError{{Path: "/capacity", Message: "must be integer"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Validate(agentsandbox.WorkerCheckInContract, tt.value)
			if err != nil {
				t.Fatal(err)
			}
			assertResult(t, got, tt.want)
		})
	}
}

func mustDecode(tb testing.TB, s string) any {
	tb.Helper()
	v, err := DecodeStrict([]byte(s))
	if err != nil {
		tb.Fatal(err)
	}
	return v
}

// TestValidateErrors checks the errors that are not verdicts.
func TestValidateErrors(t *testing.T) {
	tests := []struct {
		name     string
		contract string
		value    any
		unknown  bool
	}{
		{"ErrUnknownContract", "live.agent-sandbox-worker-request@2", map[string]any{}, true},
		{"ErrUnencodable", agentsandbox.WorkerCheckInContract, map[string]any{"c": make(chan int)}, false},
		{"ErrNaN", agentsandbox.WorkerCheckInContract, []any{1.0, nanValue()}, false},
		{"ErrNumberOutOfRange", agentsandbox.WorkerCheckInContract, json.Number("1e400"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Validate(tt.contract, tt.value)
			if err == nil {
				t.Fatal("no error")
			}
			if errors.Is(err, ErrUnknownContract) != tt.unknown {
				t.Errorf("errors.Is(%v, ErrUnknownContract) = %v, want %v", err, !tt.unknown, tt.unknown)
			}
		})
	}
	if _, err := ValidateJSON("nope", []byte(`{}`)); !errors.Is(err, ErrUnknownContract) {
		t.Errorf("ValidateJSON unknown name: err %v, want ErrUnknownContract", err)
	}
	if _, err := Schema("nope"); !errors.Is(err, ErrUnknownContract) {
		t.Errorf("Schema unknown name: err %v, want ErrUnknownContract", err)
	}
}

func nanValue() float64 {
	zero := 0.0
	return zero / zero
}

// TestNamesAndSchema checks the catalogue and the embedded schema.
func TestNamesAndSchema(t *testing.T) {
	names := Names()
	if len(names) != 1 || names[0] != agentsandbox.WorkerCheckInContract {
		t.Fatalf("Names() = %v", names)
	}
	names[0] = "changed"
	if Names()[0] != agentsandbox.WorkerCheckInContract {
		t.Error("Names() shares its slice with the caller")
	}
	data, err := Schema(agentsandbox.WorkerCheckInContract)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	if doc["$id"] != "https://openvibe.network/contracts/live/agent-sandbox-worker-request.v1.json" ||
		doc["$schema"] != "https://json-schema.org/draft/2020-12/schema" {
		t.Errorf("$id %v, $schema %v", doc["$id"], doc["$schema"])
	}
	if _, ok := doc["additionalProperties"]; ok {
		t.Error("the contract must allow unknown top-level fields")
	}
}

// TestConcurrentValidate runs validations from many goroutines at once (for
// the race detector) and checks each gets the right verdict.
func TestConcurrentValidate(t *testing.T) {
	good, bad := readSeed(t, "valid-worker-check-in"), readSeed(t, "rejected-no-profile-fact")
	var wg sync.WaitGroup
	errs := make(chan string, 16)
	for i := range 16 {
		wg.Go(func() {
			data, want := good, true
			if i%2 == 1 {
				data, want = bad, false
			}
			for range 20 {
				r, err := ValidateJSON(agentsandbox.WorkerCheckInContract, data)
				if err != nil || r.Valid != want {
					errs <- "wrong verdict"
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}
