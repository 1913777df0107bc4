package inside

import (
	"errors"
	"testing"
)

func TestLinkLeaves(t *testing.T) {
	for _, tc := range []struct {
		name  string
		links map[string]string // path relative to the workspace -> target
		check string
		want  bool
	}{
		{"Inside", map[string]string{"d/l": "f"}, "d/l", false},
		{"UpStaysIn", map[string]string{"d/e/l": "../../f"}, "d/e/l", false},
		{"UpToWorkspace", map[string]string{"d/l": ".."}, "d/l", false},
		{"UpOut", map[string]string{"d/l": "../.."}, "d/l", true},
		{"Absolute", map[string]string{"l": "/etc"}, "l", true},
		{"DotsOnly", map[string]string{"l": "./././"}, "l", false},
		{"OutAndBack", map[string]string{"d/l": "../../workspace/d"}, "d/l", true},
		{"Chain", map[string]string{"d/up": "..", "up2": "d/up/../.."}, "up2", true},
		{"ChainStaysIn", map[string]string{"d/up": "..", "d/e/x": "../up/d"}, "d/e/x", false},
		{"ThroughLinkToDeepDir", map[string]string{"deep": "a/b/c", "l": "deep/../../.."}, "l", false},
		{"ThroughLinkOut", map[string]string{"deep": "a/b/c", "l": "deep/../../../.."}, "l", true},
		{"Loop", map[string]string{"a": "b", "b": "a", "l": "a/x"}, "l", true},
		{"SelfLoop", map[string]string{"a": "a"}, "a", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := linkLeaves(tc.links, tc.check); got != tc.want {
				t.Fatalf("linkLeaves(%v, %q) = %v, want %v", tc.links, tc.check, got, tc.want)
			}
		})
	}
}

func TestEntryName(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		refused  bool
	}{
		{in: "a/b", want: "a/b"},
		{in: "./a//b/", want: "a/b"},
		{in: "./", want: ""},
		{in: ".", want: ""},
		{in: "a/./b", want: "a/b"},
		{in: "..", refused: true},
		{in: "a/../b", refused: true},
		{in: "../a", refused: true},
		{in: "/etc/passwd", refused: true},
		{in: "a/..", refused: true},
		{in: "..a/b..", want: "..a/b.."},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := entryName(tc.in)
			var r *refusal
			if tc.refused != errors.As(err, &r) || got != tc.want {
				t.Fatalf("entryName(%q) = %q, %v; want %q, refused %v", tc.in, got, err, tc.want, tc.refused)
			}
		})
	}
}
