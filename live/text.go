package live

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// CleanText makes s, a string a worker wrote (a reason, a value of its
// report, a refusal's error), safe to show a person on one line: invalid
// UTF-8 is replaced, control characters and line or paragraph separators
// become spaces, the invisible characters that reorder text (the
// bidirectional overrides, embeddings, isolates and marks, such as U+202E)
// are shown by their code point ("[U+202E]"), so that text cannot pretend
// to say what it does not, anything that looks like one of Live's secrets
// is redacted, surrounding space is trimmed, and the result is clipped to
// max characters (with "…"; max <= 0 means no clip).
func CleanText(s string, max int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if needsCleaning(s) {
		var b strings.Builder
		b.Grow(len(s))
		for _, r := range s {
			switch {
			case isBidiControl(r):
				fmt.Fprintf(&b, "[U+%04X]", r)
			case unicode.IsControl(r) || r == '\u2028' || r == '\u2029':
				b.WriteByte(' ')
			default:
				b.WriteRune(r)
			}
		}
		s = b.String()
	}
	s = strings.TrimSpace(RedactSecrets(s))
	if max > 0 && utf8.RuneCountInString(s) > max {
		s = strings.TrimSpace(string([]rune(s)[:max-1])) + "…"
	}
	return s
}

// needsCleaning reports whether s has a character CleanText changes.
func needsCleaning(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && (unicode.IsControl(r) || r == '\u2028' || r == '\u2029' || isBidiControl(r))) {
			return true
		}
	}
	return false
}

// isBidiControl reports whether r is one of the invisible characters that
// change the order in which text is displayed (Unicode's
// Bidi_Control property).
func isBidiControl(r rune) bool {
	return unicode.Is(unicode.Bidi_Control, r)
}

// Plural says n of a unit, "1 second" or "2 seconds": unit is the singular
// and the plural adds an s.
func Plural(n int64, unit string) string {
	if n == 1 || n == -1 {
		return fmt.Sprintf("%d %s", n, unit)
	}
	return fmt.Sprintf("%d %ss", n, unit)
}
