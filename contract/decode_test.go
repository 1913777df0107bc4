package contract

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"openvibe.network/agentsandbox"
)

func TestDecodeStrict(t *testing.T) {
	t.Run("OK", func(t *testing.T) {
		got, err := DecodeStrict([]byte(" {\"a\":[1,2.0,-0,\"\\u00e9\",true,null],\"b\":{}} \n"))
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]any{"a": []any{json.Number("1"), json.Number("2.0"), json.Number("-0"), "é", true, nil}, "b": map[string]any{}}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("got %#v\nwant %#v", got, want)
		}
	})
	tests := []struct {
		name  string
		input string
		want  string
	}{
		{"ErrEmpty", "", "no JSON value (the input is empty or only whitespace) at byte offset 0"},
		{"ErrWhitespace", " \n", "no JSON value (the input is empty or only whitespace) at byte offset 0"},
		{"ErrDuplicateKey", `{"a":1,"a":2}`, `duplicate key "a" at byte offset 7`},
		{"ErrDuplicateKeyNested", `{"isolation":{"x":[{"y":1,"y":2}]}}`, `duplicate key "y" in /isolation/x/0 at byte offset 26`},
		{"ErrTrailingData", `{} {}`, "trailing data after the JSON value at byte offset 3"},
		{"ErrTrailingGarbage", "{}\n]", "trailing data after the JSON value at byte offset 3"},
		{"ErrInvalidUTF8", "{\"a\":\"\xc3\x28\"}", "invalid UTF-8 at byte offset 6"},
		{"ErrLoneSurrogate", `{"a":"\ud800"}`, "invalid surrogate pair `\\ud800\"}` in string in /a at byte offset 6"},
		{"ErrTruncated", `{"a":`, "unexpected end of input in /a at byte offset 5"},
		{"ErrMissingComma", `[1 2]`, "invalid character '2' after array element (expecting ',' or ']') at byte offset 3"},
		{"ErrTrailingComma", `{"a":[1,]}`, "invalid character ',' at start of value in /a at byte offset 7"},
		{"ErrNonStringKey", `{1:2}`, "object member name must be a string at byte offset 1"},
		{"ErrNumberOutOfRange", `{"capacity":-1e400}`, "number -1e400 is out of the range of a double at byte offset 12"},
		{"ErrBareWord", `nul`, "unexpected end of input at byte offset 3"},
		{"ErrTooDeep", `{"x":` + strings.Repeat("[", 10001), "exceeded max depth in /x" + strings.Repeat("/0", 59) + "… at byte offset 10004"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := DecodeStrict([]byte(tt.input))
			if err == nil {
				t.Fatalf("no error, value %#v", v)
			}
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("error %T, want *DecodeError", err)
			}
			if err.Error() != tt.want {
				t.Errorf("error %q\n      want %q", err, tt.want)
			}
		})
	}
}

// TestValidateJSONNotWellFormed checks that refused text is a verdict, not an error.
func TestValidateJSONNotWellFormed(t *testing.T) {
	got, err := ValidateJSON(agentsandbox.WorkerCheckInContract, []byte(`{"isolation":{},"isolation":{}}`))
	if err != nil {
		t.Fatal(err)
	}
	assertResult(t, got, Result{Errors: []agentsandbox.ValidationError{{Path: "", Message: `not well-formed JSON: duplicate key "isolation" at byte offset 16`}}})
}
