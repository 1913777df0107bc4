package live

import (
	"encoding/json"

	"openvibe.network/agentsandbox"
)

// Bounds of what a refusal keeps of a refused report: its reasons (the
// contract's own bounds: at most 10, each at most 500 characters, which a
// refused report need not keep), its errors (at most 20, each part at most
// 500 characters; ErrorsTotal counts them all) and its five facts (each at
// most 100 characters of JSON).
const (
	MaxRefusedReasons     = 10
	MaxRefusedReasonChars = 500
	MaxRefusalErrors      = 20
	MaxRefusalErrorChars  = 500
	MaxRefusedFactChars   = 100
)

// RefusedReasons returns what a refused report says of why its worker is not
// ready, cleaned for the owner's page: report is the report's decoded JSON
// value (as contract.DecodeStrict gives it); its "reasons", when an array,
// give their strings (other items are skipped), at most MaxRefusedReasons,
// each cleaned by CleanText and clipped to MaxRefusedReasonChars
// characters, empty ones dropped. The slice is never nil.
func RefusedReasons(report any) []string {
	out := []string{}
	obj, _ := report.(map[string]any)
	items, _ := obj["reasons"].([]any)
	for _, it := range items {
		s, ok := it.(string)
		if !ok {
			continue
		}
		if s = CleanText(s, MaxRefusedReasonChars); s != "" {
			out = append(out, s)
		}
		if len(out) == MaxRefusedReasons {
			break
		}
	}
	return out
}

// RefusedFacts returns the five isolation facts that a refused report
// states, by name, each as the compact JSON of its value cleaned by
// CleanText and clipped to MaxRefusedFactChars: what the owner's page shows
// beside the value each must have. report is as for RefusedReasons. The map
// is never nil; a fact the report does not state is not in it.
func RefusedFacts(report any) map[string]string {
	out := map[string]string{}
	obj, _ := report.(map[string]any)
	iso, _ := obj["isolation"].(map[string]any)
	for _, name := range agentsandbox.IsolationFacts() {
		v, ok := iso[name]
		if !ok {
			continue
		}
		b, err := json.Marshal(v)
		if err != nil {
			continue
		}
		out[name] = CleanText(string(b), MaxRefusedFactChars)
	}
	return out
}

// RefusalErrors bounds and cleans a refusal's errors for keeping: at most
// MaxRefusalErrors of them, each path and message cleaned by CleanText and
// clipped to MaxRefusalErrorChars; it returns them with how many there
// were. The slice is never nil.
func RefusalErrors(errs []agentsandbox.ValidationError) ([]agentsandbox.ValidationError, int) {
	n := min(len(errs), MaxRefusalErrors)
	out := make([]agentsandbox.ValidationError, n)
	for i, e := range errs[:n] {
		out[i] = agentsandbox.ValidationError{Path: CleanText(e.Path, MaxRefusalErrorChars), Message: CleanText(e.Message, MaxRefusalErrorChars)}
	}
	return out, len(errs)
}
