package contract

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"openvibe.network/agentsandbox"
)

// Validate checks value against the named contract. value is a decoded JSON
// value (map[string]any, []any, string, bool, nil, json.Number or float64, as
// DecodeStrict or encoding/json produce) or any other Go value, which is first
// marshalled with encoding/json and decoded again.
//
// Numbers are compared as the JS SDK sees them, as doubles: 2.0 is an
// integer, 1.5 is not.
//
// A violation is not an error: it is a Result with Valid false and every
// violation in Errors. The error wraps ErrUnknownContract for an unknown name,
// or says why value cannot be encoded as JSON (a channel, NaN, a number out of
// the range of a double).
func Validate(name string, value any) (Result, error) {
	v, err := lookup(name)
	if err != nil {
		return Result{}, err
	}
	inst, err := normalize(value)
	if err != nil {
		return Result{}, fmt.Errorf("validate %s: %w", name, err)
	}
	return v.check(inst), nil
}

// ValidateJSON checks the JSON text data against the named contract. Text that
// DecodeStrict refuses (not well-formed, invalid UTF-8, trailing data,
// duplicate keys, a number out of range) is invalid with one error at path ""
// whose message starts "not well-formed JSON: ". The error wraps
// ErrUnknownContract for an unknown name; it is nil otherwise.
func ValidateJSON(name string, data []byte) (Result, error) {
	v, err := lookup(name)
	if err != nil {
		return Result{}, err
	}
	doc, err := DecodeStrict(data)
	if err != nil {
		return Result{Errors: []agentsandbox.ValidationError{{Path: "", Message: "not well-formed JSON: " + err.Error()}}}, nil
	}
	inst, err := normalize(doc)
	if err != nil { // DecodeStrict refuses every number normalize would
		return Result{}, fmt.Errorf("validate %s: %w", name, err)
	}
	return v.check(inst), nil
}

// normalize turns value into the value tree the engine checks: JSON types
// only, and numbers with the value JSON.parse gives the JS SDK (a double). It
// copies only the containers it has to change (copy on write); the caller's
// value is never modified.
func normalize(value any) (any, error) {
	n, _, err := normalizeValue(value)
	return n, err
}

// normalizeValue returns the normalized value and whether it differs from value.
func normalizeValue(value any) (any, bool, error) {
	switch x := value.(type) {
	case nil, bool:
		return x, false, nil
	case string:
		if !utf8.ValidString(x) {
			n, err := roundTrip(x)
			return n, true, err
		}
		return x, false, nil
	case json.Number:
		return normalizeNumber(x)
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, false, fmt.Errorf("number %v is not finite", x)
		}
		return x, false, nil
	case []any:
		return normalizeArray(x)
	case map[string]any:
		return normalizeObject(x)
	default:
		n, err := roundTrip(x)
		return n, true, err
	}
}

// normalizeNumber keeps a short integer as it is (a double holds it exactly)
// and turns any other number into the double it rounds to, so that the engine
// sees 1.0000000000000000001 as the integer 1, as JavaScript does.
func normalizeNumber(x json.Number) (any, bool, error) {
	digits := strings.TrimPrefix(string(x), "-")
	if len(digits) > 0 && len(digits) <= 15 && isDigits(digits) {
		return x, false, nil
	}
	f, err := strconv.ParseFloat(string(x), 64)
	if err != nil || math.IsInf(f, 0) {
		return nil, false, fmt.Errorf("number %q is not a finite double", string(x))
	}
	return f, true, nil
}

func normalizeArray(x []any) (any, bool, error) {
	var out []any
	for i, item := range x {
		n, changed, err := normalizeValue(item)
		if err != nil {
			return nil, false, err
		}
		if changed {
			if out == nil {
				out = slices.Clone(x)
			}
			out[i] = n
		}
	}
	if out == nil {
		return x, false, nil
	}
	return out, true, nil
}

func normalizeObject(x map[string]any) (any, bool, error) {
	var out map[string]any
	for k, item := range x {
		n, changed, err := normalizeValue(item)
		if err != nil {
			return nil, false, err
		}
		if changed {
			if out == nil {
				out = maps.Clone(x)
			}
			out[k] = n
		}
	}
	if out == nil {
		return x, false, nil
	}
	return out, true, nil
}

// roundTrip encodes a Go value with encoding/json, decodes it strictly and
// normalizes the result.
func roundTrip(value any) (any, error) {
	data, err := json.Marshal(value)
	if err != nil {
		return nil, fmt.Errorf("encode value: %w", err)
	}
	doc, err := DecodeStrict(data)
	if err != nil {
		return nil, fmt.Errorf("decode encoded value: %w", err)
	}
	return normalize(doc)
}

// validator is one compiled contract; immutable after compile.
type validator struct {
	schema *jsonschema.Schema
	doc    any // the schema document, to read keyword values in source order
	// fast, when set, says yes only for text that is strict JSON and valid
	// (see Check); false means "ask the engine".
	fast func(data []byte) bool
}

// compile compiles a schema document with format assertion on and date-time
// decided as ajv-formats decides it.
func compile(data []byte) (*validator, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("parse schema: %w", err)
	}
	obj, _ := doc.(map[string]any)
	id, _ := obj["$id"].(string)
	if id == "" {
		return nil, fmt.Errorf("schema has no $id")
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	c.RegisterFormat(&jsonschema.Format{Name: "date-time", Validate: validateDateTime})
	if err := c.AddResource(id, doc); err != nil {
		return nil, fmt.Errorf("add schema: %w", err)
	}
	sch, err := c.Compile(id)
	if err != nil {
		return nil, err
	}
	return &validator{schema: sch, doc: doc}, nil
}

// check validates a normalized instance and shapes the verdict like ajv's.
func (v *validator) check(inst any) Result {
	err := v.schema.Validate(inst)
	if err == nil {
		return Result{Valid: true, Errors: []agentsandbox.ValidationError{}}
	}
	verr, ok := err.(*jsonschema.ValidationError)
	if !ok { // the engine returns only *ValidationError
		return Result{Errors: []agentsandbox.ValidationError{{Message: err.Error()}}}
	}
	var errs []agentsandbox.ValidationError
	errs = v.flatten(verr, errs)
	slices.SortFunc(errs, compareErrors)
	return Result{Valid: false, Errors: errs}
}

// compareErrors orders by path, then message, comparing UTF-16 code units as
// JavaScript's < does, so that the order is the JS SDK's.
func compareErrors(a, b agentsandbox.ValidationError) int {
	if c := compareUTF16(a.Path, b.Path); c != 0 {
		return c
	}
	return compareUTF16(a.Message, b.Message)
}

// compareUTF16 compares two strings by their UTF-16 encoding. It differs from
// byte order only where a character above U+FFFF meets one in U+E000..U+FFFF.
func compareUTF16(a, b string) int {
	for a != "" && b != "" {
		ra, na := utf8.DecodeRuneInString(a)
		rb, nb := utf8.DecodeRuneInString(b)
		if ra != rb {
			return utf16Key(ra) - utf16Key(rb)
		}
		a, b = a[na:], b[nb:]
	}
	return len(a) - len(b)
}

// utf16Key maps a rune to a number ordered like its first UTF-16 code unit
// (then the rest): surrogate pairs sort between U+D7FF and U+E000.
func utf16Key(r rune) int {
	switch {
	case r < 0xd800:
		return int(r)
	case r >= 0x10000:
		return 0xd800 + int(r-0x10000) // a surrogate pair: D800..DBFF first
	default:
		return int(r) + 0x100000 // U+E000..U+FFFF after every pair
	}
}

// Check parses data strictly (as DecodeStrict does) and validates it
// against the named contract, as ValidateJSON does, but tells the two
// failures apart: text that is not strict JSON is an error (a *DecodeError,
// for a 400), a contract violation is a Result with Valid false (for a 422).
// The error wraps ErrUnknownContract for an unknown name.
//
// A valid worker check-in takes a fast path that builds no value tree and
// does not run the engine; every other document takes the full path, so
// the errors of an invalid one are exactly Validate's.
func Check(name string, data []byte) (Result, error) {
	v, err := lookup(name)
	if err != nil {
		return Result{}, err
	}
	if v.fast != nil && v.fast(data) {
		return Result{Valid: true, Errors: []agentsandbox.ValidationError{}}, nil
	}
	doc, err := DecodeStrict(data)
	if err != nil {
		return Result{}, err
	}
	inst, err := normalize(doc)
	if err != nil { // DecodeStrict refuses every number normalize would
		return Result{}, fmt.Errorf("check %s: %w", name, err)
	}
	return v.check(inst), nil
}
