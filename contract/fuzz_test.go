package contract

import (
	"encoding/json"
	"reflect"
	"testing"

	"openvibe.network/agentsandbox"
)

// FuzzValidateJSON: ValidateJSON never panics, never errs for a known
// contract, gives the same verdict twice, and its verdict is well-formed.
func FuzzValidateJSON(f *testing.F) {
	for _, cases := range loadGolden(f) {
		for _, c := range cases {
			f.Add(c.text())
		}
	}
	f.Add([]byte(`{"a":1,"a":2}`))
	f.Add([]byte("\xff"))
	f.Fuzz(func(t *testing.T, data []byte) {
		first, err := ValidateJSON(agentsandbox.WorkerCheckInContract, data)
		if err != nil {
			t.Fatalf("error for a known contract: %v", err)
		}
		second, _ := ValidateJSON(agentsandbox.WorkerCheckInContract, data)
		if !reflect.DeepEqual(first, second) {
			t.Fatalf("not deterministic:\n%+v\n%+v", first, second)
		}
		if first.Valid != (len(first.Errors) == 0) || first.Errors == nil {
			t.Fatalf("inconsistent verdict %+v", first)
		}
		for i := 1; i < len(first.Errors); i++ {
			if compareErrors(first.Errors[i-1], first.Errors[i]) > 0 {
				t.Fatalf("errors not sorted: %+v", first.Errors)
			}
		}
		if _, err := json.Marshal(first); err != nil {
			t.Fatalf("verdict does not encode: %v", err)
		}
	})
}

// BenchmarkParseValidate measures parsing + validating the seed's
// worker-check-in example, what Live does for each check-in: "Check" is
// Check (the fast path, as Live calls it), "Full" is DecodeStrict + Validate
// (the path every document that is not valid takes).
func BenchmarkParseValidate(b *testing.B) {
	data := readSeed(b, "valid-worker-check-in")
	if _, err := Validate(agentsandbox.WorkerCheckInContract, nil); err != nil { // compile outside the loop
		b.Fatal(err)
	}
	b.Run("Check", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			r, err := Check(agentsandbox.WorkerCheckInContract, data)
			if err != nil || !r.Valid {
				b.Fatalf("%+v %v", r, err)
			}
		}
	})
	b.Run("Full", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			v, err := DecodeStrict(data)
			if err != nil {
				b.Fatal(err)
			}
			r, err := Validate(agentsandbox.WorkerCheckInContract, v)
			if err != nil || !r.Valid {
				b.Fatalf("%+v %v", r, err)
			}
		}
	})
}
