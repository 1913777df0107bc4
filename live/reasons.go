package live

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Bounds of the reasons kept from a refused report: the contract's own
// (at most 10, each at most 500 characters), which a refused report need
// not keep.
const (
	MaxRefusedReasons     = 10
	MaxRefusedReasonChars = 500
)

// RefusedReasons returns what a refused report says of why its worker is not
// ready, cleaned for the owner's page: report is the report's decoded JSON
// value (as contract.DecodeStrict gives it); its "reasons", when an array,
// give their strings (other items are skipped), at most MaxRefusedReasons,
// each clipped to MaxRefusedReasonChars characters, with control characters
// turned into spaces, surrounding space trimmed, empty ones dropped and
// anything that looks like a secret redacted. The slice is never nil.
func RefusedReasons(report any) []string {
	out := []string{}
	obj, _ := report.(map[string]any)
	items, _ := obj["reasons"].([]any)
	for _, it := range items {
		s, ok := it.(string)
		if !ok {
			continue
		}
		if s = cleanReason(s); s != "" {
			out = append(out, s)
		}
		if len(out) == MaxRefusedReasons {
			break
		}
	}
	return out
}

// cleanReason makes s one readable line of bounded length.
func cleanReason(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' {
			return ' '
		}
		return r
	}, s)
	s = strings.TrimSpace(RedactSecrets(s))
	if utf8.RuneCountInString(s) > MaxRefusedReasonChars {
		s = string([]rune(s)[:MaxRefusedReasonChars-1]) + "…"
	}
	return s
}
