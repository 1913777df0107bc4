package live

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestRefusedReasons(t *testing.T) {
	long := strings.Repeat("é", 600)
	for _, tc := range []struct {
		name   string
		report any
		want   []string
	}{
		{"None", map[string]any{}, []string{}},
		{"NotAnObject", []any{"x"}, []string{}},
		{"NotAnArray", map[string]any{"reasons": "the probe failed"}, []string{}},
		{"OK", map[string]any{"reasons": []any{"the probe sandbox has no egress proxy", "read bubblewrap info: EOF"}},
			[]string{"the probe sandbox has no egress proxy", "read bubblewrap info: EOF"}},
		{"SkipsNonStrings", map[string]any{"reasons": []any{1.0, nil, "x", map[string]any{}}}, []string{"x"}},
		{"Cleans", map[string]any{"reasons": []any{"  line\none\ttab\u2028\x00  ", "   ", "token ovs_abcDEF123-_ leaked, ovsess_x too"}},
			[]string{"line one tab", "token [redacted] leaked, [redacted] too"}},
		{"Clips", map[string]any{"reasons": []any{long}}, []string{strings.Repeat("é", 499) + "…"}},
		{"AtMostTen", map[string]any{"reasons": []any{"1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11"}},
			[]string{"1", "2", "3", "4", "5", "6", "7", "8", "9", "10"}},
		{"InvalidUTF8", map[string]any{"reasons": []any{"a\xffb"}}, []string{"a\uFFFDb"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := RefusedReasons(tc.report); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("RefusedReasons = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestRedactSecrets(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"nothing here", "nothing here"},
		{"Bearer ovp_AbC-_9", "Bearer [redacted]"},
		{"ovd_x ovl_y ovs_z ovsess_w", "[redacted] [redacted] [redacted] [redacted]"},
		{"x_ovs_y, over_", "x_[redacted], over_"},
	} {
		if got := RedactSecrets(tc.in); got != tc.want {
			t.Errorf("RedactSecrets(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestNeedsTouch(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 10, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		last *time.Time
		want bool
	}{
		{"Never", nil, true},
		{"Recent", ptrTime(now.Add(-59 * time.Second)), false},
		{"AMinuteAgo", ptrTime(now.Add(-time.Minute)), true},
	} {
		if got := (Credential{LastUsedAt: tc.last}).NeedsTouch(now); got != tc.want {
			t.Errorf("%s: NeedsTouch = %v, want %v", tc.name, got, tc.want)
		}
	}
}
