package live

import (
	"strings"
	"testing"
)

func TestCleanText(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		max  int
		want string
	}{
		{"Plain", "all good", 0, "all good"},
		{"Controls", "  a\nb\tc\x00d\u2028e\x7f  ", 0, "a b c d e"},
		{"Bidi", "evil\u202etxt.exe \u2066x\u2069 \u200f", 0, "evil[U+202E]txt.exe [U+2066]x[U+2069] [U+200F]"},
		{"Secret", "token ovs_abc123 and ovsess_Z-9", 0, "token [redacted] and [redacted]"},
		{"InvalidUTF8", "a\xffb", 0, "a\uFFFDb"},
		{"Clip", strings.Repeat("é", 20), 10, strings.Repeat("é", 9) + "…"},
		{"ClipTrimsBeforeTheEllipsis", "abcd    efgh", 6, "abcd…"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := CleanText(tc.in, tc.max); got != tc.want {
				t.Fatalf("CleanText(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestPlural(t *testing.T) {
	for n, want := range map[int64]string{0: "0 seconds", 1: "1 second", 2: "2 seconds"} {
		if got := Plural(n, "second"); got != want {
			t.Errorf("Plural(%d) = %q, want %q", n, got, want)
		}
	}
}
