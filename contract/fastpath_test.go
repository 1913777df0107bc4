package contract

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"openvibe.network/agentsandbox"
)

// TestFastPathSchema pins the schema that fastpath.go mirrors: when the
// schema changes, update fastWorkerCheckIn to match, then this hash.
func TestFastPathSchema(t *testing.T) {
	data, err := Schema(agentsandbox.WorkerCheckInContract)
	if err != nil {
		t.Fatal(err)
	}
	const want = "6c3f9066c87bd36eb6e58ee011efdb46257e0b4fdb842c06730bffca6004a496"
	if got := sha256.Sum256(data); hex.EncodeToString(got[:]) != want {
		t.Fatalf("the schema's SHA-256 is %x, fastpath.go mirrors %s: update fastWorkerCheckIn to the schema, then the hash", got, want)
	}
}

// TestFastPathGolden: on every golden case, the fast path says yes only
// where ajv says valid, and Check gives ajv's verdict (a decode error where
// the text is not strict JSON).
func TestFastPathGolden(t *testing.T) {
	cases := loadGolden(t)[agentsandbox.WorkerCheckInContract]
	fast, valid := 0, 0
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			text := c.text()
			isFast := fastWorkerCheckIn(text)
			if isFast && !c.Valid {
				t.Fatalf("the fast path accepts %s, which ajv refuses: %+v", text, c.Errors)
			}
			if isFast {
				fast++
			}
			if c.Valid {
				valid++
			}
			checkAgrees(t, text)
		})
	}
	t.Logf("the fast path took %d of the %d valid golden cases", fast, valid)
	if fast < valid/2 {
		t.Errorf("the fast path took only %d of %d valid golden cases", fast, valid)
	}
}

// checkAgrees fails t unless Check gives ValidateJSON's verdict on text:
// the same Result, or a *DecodeError where ValidateJSON reports text as not
// well-formed, with the same reason.
func checkAgrees(t *testing.T, text []byte) {
	t.Helper()
	want, err := ValidateJSON(agentsandbox.WorkerCheckInContract, text)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Check(agentsandbox.WorkerCheckInContract, text)
	var de *DecodeError
	switch {
	case errors.As(err, &de):
		if len(want.Errors) != 1 || want.Errors[0].Message != "not well-formed JSON: "+de.Error() {
			t.Fatalf("Check: %v; ValidateJSON: %+v", err, want)
		}
	case err != nil:
		t.Fatalf("Check: %v", err)
	case !reflect.DeepEqual(got, want):
		t.Fatalf("Check = %+v, ValidateJSON = %+v, input %s", got, want, text)
	}
}

// TestFastPathTakes lists reports a worker sends: the fast path must take
// every one (and the full path agrees that they are valid).
func TestFastPathTakes(t *testing.T) {
	seed := string(readSeed(t, "valid-worker-check-in"))
	at := time.Date(2026, 11, 7, 12, 0, 0, 0, time.UTC)
	typed := func(edit func(*agentsandbox.WorkerCheckIn)) string {
		f, tr := false, true
		ws := agentsandbox.WorkspaceEphemeral
		w := agentsandbox.WorkerCheckIn{
			WorkerID: "sbw-host", Service: agentsandbox.ServiceCodesSandbox, Version: "1.2.3", Ready: &tr,
			Checks: map[string]bool{agentsandbox.CheckWipe: true}, CheckedAt: &at, At: &at,
			Isolation: agentsandbox.Isolation{HostNetwork: &f, Credentials: &f, Profile: &f, EgressProxy: &tr, Workspace: &ws,
				Extra: map[string]any{"limits": map[string]any{"enforced": true, "memory_mb": 2048, "cpu": 0.5, "list": []any{}}}},
		}
		edit(&w)
		b, err := json.Marshal(w)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for _, tc := range []struct{ name, doc string }{
		{"Seed", seed},
		{"SeedIsolationOnly", string(readSeed(t, "valid-isolation-only"))},
		{"Typed", typed(func(*agentsandbox.WorkerCheckIn) {})},
		{"NotReady", typed(func(w *agentsandbox.WorkerCheckIn) {
			f := false
			w.Ready = &f
			w.Reasons = []string{`slot 1 is out of use: its wipe could not be verified`, "read \"bubblewrap\" info:\tEOF", "ünïcødé ✓ 😀"}
		})},
		{"NoSelfTestYet", typed(func(w *agentsandbox.WorkerCheckIn) { w.CheckedAt, w.Checks = nil, nil })},
		{"Escapes", `{"version":"\u00e9\n\/","reasons":["\"x\""],"isolation":{"host_network":false,"credentials":false,"profile":false,"egress_proxy":true,"workspace":"eph\u0065meral"}}`},
		{"ReasonsMax", `{"reasons":["` + strings.Repeat("é", 500) + `","","","","","","","","",""],"isolation":{"host_network":false,"credentials":false,"profile":false,"egress_proxy":true,"workspace":"ephemeral"}}`},
		{"UnknownFields", `{"x":{"y":[1,-2.5,true,null,{"z":"w"}]},"capacity":12345678901234567890,"active":0,"isolation":{"workspace":"ephemeral","egress_proxy":true,"profile":false,"credentials":false,"host_network":false,"more":{}}}`},
		{"LowerCaseDate", `{"at":"2026-11-07t12:00:00z","checked_at":"2026-11-07 12:00:00.5+01:00","isolation":{"host_network":false,"credentials":false,"profile":false,"egress_proxy":true,"workspace":"ephemeral"}}`},
		{"Spaces", " \r\n\t{ \"isolation\" : { \"host_network\" : false , \"credentials\":false,\"profile\":false,\"egress_proxy\":true,\"workspace\":\"ephemeral\" } }\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !fastWorkerCheckIn([]byte(tc.doc)) {
				t.Fatalf("the fast path does not take %s", tc.doc)
			}
			if r, err := ValidateJSON(agentsandbox.WorkerCheckInContract, []byte(tc.doc)); err != nil || !r.Valid {
				t.Fatalf("the full path says %+v, %v for %s", r, err, tc.doc)
			}
		})
	}
}

// TestFastPathLeaves lists documents the fast path must leave to the full
// path (invalid ones, and valid ones it does not handle); Check still
// agrees with ValidateJSON on each.
func TestFastPathLeaves(t *testing.T) {
	iso := `"isolation":{"host_network":false,"credentials":false,"profile":false,"egress_proxy":true,"workspace":"ephemeral"}`
	for _, tc := range []struct{ name, doc string }{
		{"Empty", ``},
		{"NotObject", `[]`},
		{"NoIsolation", `{}`},
		{"MissingFact", `{"isolation":{"host_network":false,"credentials":false,"egress_proxy":true,"workspace":"ephemeral"}}`},
		{"WrongFact", strings.Replace(`{`+iso+`}`, `"profile":false`, `"profile":true`, 1)},
		{"WrongWorkspace", strings.Replace(`{`+iso+`}`, `"ephemeral"`, `"ephemeral "`, 1)},
		{"DuplicateKey", `{"version":"1","version":"2",` + iso + `}`},
		{"DuplicateFact", `{"isolation":{"host_network":false,"host_network":false,"credentials":false,"profile":false,"egress_proxy":true,"workspace":"ephemeral"}}`},
		{"DuplicateNested", `{"x":{"a":1,"a":1},` + iso + `}`},
		{"EscapedKey", `{"vers\u0069on":"1",` + iso + `}`},
		{"EscapedDuplicate", `{"a":1,"\u0061":2,` + iso + `}`},
		{"SurrogatePair", `{"version":"\ud83d\ude00",` + iso + `}`},
		{"LoneSurrogate", `{"version":"\ud83d",` + iso + `}`},
		{"Trailing", `{` + iso + `} x`},
		{"TwoValues", `{` + iso + `}{}`},
		{"Exponent", `{"capacity":1e2,` + iso + `}`},
		{"Fraction", `{"capacity":2.0,` + iso + `}`},
		{"CapacityZero", `{"capacity":0,` + iso + `}`},
		{"NegativeActive", `{"active":-1,` + iso + `}`},
		{"NegativeZero", `{"active":-0,` + iso + `}`},
		{"LeadingZero", `{"capacity":01,` + iso + `}`},
		{"Huge", `{"x":1` + strings.Repeat("0", 400) + `,` + iso + `}`},
		{"LongVersion", `{"version":"` + strings.Repeat("v", 65) + `",` + iso + `}`},
		{"ElevenReasons", `{"reasons":["","","","","","","","","","",""],` + iso + `}`},
		{"ReasonNotString", `{"reasons":[1],` + iso + `}`},
		{"CheckNotBool", `{"checks":{"wipe":1},` + iso + `}`},
		{"BadDate", `{"at":"2026-02-30T00:00:00Z",` + iso + `}`},
		{"CheckedAtNumber", `{"checked_at":5,` + iso + `}`},
		{"ReadyString", `{"ready":"true",` + iso + `}`},
		{"ControlChar", "{\"version\":\"a\x01\"," + iso + "}"},
		{"BadUTF8", "{\"version\":\"\xff\"," + iso + "}"},
		{"Deep", `{"x":` + strings.Repeat("[", 40) + strings.Repeat("]", 40) + `,` + iso + `}`},
		{"TrueTypo", `{"ready":truee,` + iso + `}`},
		{"Unclosed", `{` + iso},
		{"TrailingComma", `{` + iso + `,}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if fastWorkerCheckIn([]byte(tc.doc)) {
				t.Fatalf("the fast path takes %q", tc.doc)
			}
			checkAgrees(t, []byte(tc.doc))
		})
	}
}

// FuzzCheck: whatever the input, Check agrees with ValidateJSON, and the
// fast path says yes only for a document the full path finds valid.
func FuzzCheck(f *testing.F) {
	for _, c := range loadGolden(f)[agentsandbox.WorkerCheckInContract] {
		f.Add(c.text())
	}
	f.Add(readSeed(f, "valid-worker-check-in"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if fastWorkerCheckIn(data) {
			if r, err := ValidateJSON(agentsandbox.WorkerCheckInContract, data); err != nil || !r.Valid {
				t.Fatalf("the fast path takes %q, the full path says %+v, %v", data, r, err)
			}
		}
		checkAgrees(t, data)
	})
}
