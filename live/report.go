package live

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/big"
	"strings"

	"openvibe.network/agentsandbox"
)

// Report is a stored check-in report as the contract reads it: decoded from
// the JSON tree the validator checked, every key matched exactly (never
// folding case, as encoding/json's struct decoding does), every number as
// written (json.Number: the contract's integers include 2.0, 1e2 and values
// past 2^63). Absent fields are nil or empty. Strings are as the worker
// wrote them: clean them (CleanText) before showing them.
type Report struct {
	WorkerID, Service, Version *string
	Ready, Browser             *bool
	Reasons                    []string
	// Checks is the self-test, one boolean per check it ran.
	Checks map[string]bool
	// CheckedAt and At are the report's times as written; CheckedAt is nil
	// when absent or null.
	CheckedAt, At *string
	// Facts are the five isolation facts that the report states, by name,
	// as JSON values.
	Facts map[string]any
	// Isolation holds the isolation object's other keys.
	Isolation map[string]any
	// Capacity and Active are "" when absent.
	Capacity, Active json.Number
	// Other holds the top-level keys the contract does not name.
	Other map[string]any
}

// contractKeys are the top-level properties of the worker check-in contract.
var contractKeys = []string{"worker_id", "service", "version", "ready", "reasons", "checks", "checked_at", "isolation",
	"browser", "capacity", "active", "at"}

// errNotObject says a stored report is not a JSON object.
var errNotObject = errors.New("the stored report is not a JSON object")

// DecodeReport decodes a stored report (Registration.Report). Its error
// says, for a person, that the report is not a JSON object; a field of an
// unexpected type (which the contract would have refused) is left out.
func DecodeReport(report []byte) (*Report, error) {
	dec := json.NewDecoder(bytes.NewReader(report))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, errors.New("the stored report is not well-formed JSON")
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, errNotObject
	}
	return reportOf(obj), nil
}

// reportOf reads a report from its JSON object.
func reportOf(obj map[string]any) *Report {
	r := &Report{
		WorkerID: stringField(obj, "worker_id"), Service: stringField(obj, "service"), Version: stringField(obj, "version"),
		Ready: boolField(obj, "ready"), Browser: boolField(obj, "browser"),
		CheckedAt: stringField(obj, "checked_at"), At: stringField(obj, "at"),
		Capacity: numberField(obj, "capacity"), Active: numberField(obj, "active"),
	}
	if items, ok := obj["reasons"].([]any); ok {
		for _, it := range items {
			if s, ok := it.(string); ok {
				r.Reasons = append(r.Reasons, s)
			}
		}
	}
	if checks, ok := obj["checks"].(map[string]any); ok {
		r.Checks = make(map[string]bool, len(checks))
		for name, v := range checks {
			if b, ok := v.(bool); ok {
				r.Checks[name] = b
			}
		}
	}
	if iso, ok := obj["isolation"].(map[string]any); ok {
		for k, v := range iso {
			if isFact(k) {
				if r.Facts == nil {
					r.Facts = map[string]any{}
				}
				r.Facts[k] = v
				continue
			}
			if r.Isolation == nil {
				r.Isolation = map[string]any{}
			}
			r.Isolation[k] = v
		}
	}
	for k, v := range obj {
		if !contains(contractKeys, k) {
			if r.Other == nil {
				r.Other = map[string]any{}
			}
			r.Other[k] = v
		}
	}
	return r
}

func isFact(name string) bool { return contains(agentsandbox.IsolationFacts(), name) }

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func stringField(obj map[string]any, key string) *string {
	if s, ok := obj[key].(string); ok {
		return &s
	}
	return nil
}

func boolField(obj map[string]any, key string) *bool {
	if b, ok := obj[key].(bool); ok {
		return &b
	}
	return nil
}

func numberField(obj map[string]any, key string) json.Number {
	n, _ := obj[key].(json.Number)
	return n
}

// maxNumberDigits bounds how many digits NumberText writes out.
const maxNumberDigits = 40

// NumberText shows a JSON number as the contract reads it, for a person: an
// integer as its digits however it is written (2.0 is 2, 1e2 is 100, and
// 2^64 is 18446744073709551616), anything else, or an integer of more than
// 40 digits, as written.
func NumberText(n json.Number) string {
	r, ok := ratOf(n)
	if !ok || !r.IsInt() {
		return string(n)
	}
	s := r.Num().String()
	if len(strings.TrimPrefix(s, "-")) > maxNumberDigits {
		return string(n)
	}
	return s
}

// compareNumbers compares two JSON numbers by value: -1, 0 or 1, and false
// when either cannot be read.
func compareNumbers(a, b json.Number) (int, bool) {
	x, okA := ratOf(a)
	y, okB := ratOf(b)
	if !okA || !okB {
		return 0, false
	}
	return x.Cmp(y), true
}

// maxNumberText bounds the numbers read by value: a longer one (never an
// integer of at most 40 digits) is only shown as written.
const maxNumberText = 64

// ratOf reads n exactly; false for a number too long to read.
func ratOf(n json.Number) (*big.Rat, bool) {
	if len(n) > maxNumberText {
		return nil, false
	}
	return new(big.Rat).SetString(string(n))
}

// Display shows a JSON value of a report for a person: yes or no for a
// boolean, a string as it is, a number as NumberText, a list of plain values
// joined with ", ", null as "null", anything else as compact JSON. Clean
// the result (CleanText) before showing it.
func Display(v any) string {
	switch x := v.(type) {
	case bool:
		if x {
			return "yes"
		}
		return "no"
	case string:
		return x
	case json.Number:
		return NumberText(x)
	case []any:
		for _, e := range x {
			switch e.(type) {
			case map[string]any, []any:
				return compactJSON(v)
			}
		}
		return displayList(x)
	}
	return compactJSON(v)
}

// displayList joins the displayed items of a list of plain values.
func displayList(items []any) string {
	parts := make([]string, 0, len(items))
	for _, e := range items {
		parts = append(parts, Display(e))
	}
	return strings.Join(parts, ", ")
}

// JSONText is v, a value of a decoded report, as compact JSON (numbers as
// written); "" for a value that cannot be encoded.
func JSONText(v any) string { return compactJSON(v) }

// compactJSON is v as compact JSON (numbers as written).
func compactJSON(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return ""
	}
	return strings.TrimSuffix(b.String(), "\n")
}
