package mcpserver

import (
	"strings"
	"testing"
)

// TestBounded: output within the bound is kept whole; past it, its start and
// end are kept with a note of how much was cut between them.
func TestBounded(t *testing.T) {
	tests := []struct {
		name   string
		max    int
		writes []string
		want   string
		cut    int64
	}{
		{"Within", 10, []string{"abc", "def"}, "abcdef", 0},
		{"Exact", 6, []string{"abcdef"}, "abcdef", 0},
		{"Cut", 6, []string{"abc", "defgh", "ij"}, "abc\n[… 4 bytes cut here: max_output_bytes is 6; redirect the output to a file and read parts of it …]\nhij", 4},
		{"CutInOneWrite", 4, []string{"0123456789"}, "01\n[… 6 bytes cut here: max_output_bytes is 4; redirect the output to a file and read parts of it …]\n89", 6},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := newBounded(tc.max)
			for _, w := range tc.writes {
				if n, err := b.Write([]byte(w)); n != len(w) || err != nil {
					t.Fatalf("Write = %d, %v", n, err)
				}
			}
			if got := b.String(); got != tc.want || b.cut != tc.cut {
				t.Fatalf("got %q (cut %d), want %q (cut %d)", got, b.cut, tc.want, tc.cut)
			}
		})
	}
}

// TestArgvOf: a command runs in sh -c, an argv as given, one of them.
func TestArgvOf(t *testing.T) {
	if a, err := argvOf("echo hi", nil); err != nil || strings.Join(a, "|") != "sh|-c|echo hi" {
		t.Fatalf("command: %v %v", a, err)
	}
	if a, err := argvOf("", []string{"ls", "-l"}); err != nil || strings.Join(a, "|") != "ls|-l" {
		t.Fatalf("argv: %v %v", a, err)
	}
	for _, bad := range [][2]any{{"", []string(nil)}, {"x", []string{"y"}}} {
		if _, err := argvOf(bad[0].(string), bad[1].([]string)); err == nil {
			t.Fatalf("argvOf(%v) did not fail", bad)
		}
	}
}

// TestSessionVersions: only protocol versions with sessions are spoken.
func TestSessionVersions(t *testing.T) {
	vs := sessionVersions()
	if len(vs) == 0 {
		t.Fatal("no protocol version left")
	}
	for _, v := range vs {
		if v >= "2026-07-28" {
			t.Fatalf("version %s is session-less", v)
		}
	}
}
