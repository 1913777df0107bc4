package buildinfo

import (
	"runtime"
	"runtime/debug"
	"testing"
)

func TestFromBuild(t *testing.T) {
	vcs := []debug.BuildSetting{
		{Key: "-compiler", Value: "gc"},
		{Key: "vcs.revision", Value: "0123456789abcdef0123"},
		{Key: "vcs.time", Value: "2026-11-30T10:00:00Z"},
		{Key: "vcs.modified", Value: "true"},
	}
	for _, tc := range []struct {
		name   string
		linked string
		bi     *debug.BuildInfo
		ok     bool
		want   Info
		line   string
	}{
		{"Linked", "1.4.0", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}, Settings: vcs}, true,
			Info{Version: "1.4.0", Revision: "0123456789abcdef0123", Time: "2026-11-30T10:00:00Z", Modified: true, GoVersion: "go1.26.8"},
			"1.4.0 (revision 0123456789ab, modified; go1.26.8)"},
		{"ModuleVersion", "", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.3.1"}}, true,
			Info{Version: "v0.3.1", GoVersion: "go1.26.8"},
			"v0.3.1 (no revision; go1.26.8)"},
		{"Devel", "", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc"}, {Key: "vcs.modified", Value: "false"}}}, true,
			Info{Version: "(devel)", Revision: "abc", GoVersion: "go1.26.8"},
			"(devel) (revision abc; go1.26.8)"},
		{"NoBuildInfo", "", nil, false, Info{Version: "unknown", GoVersion: runtime.Version()}, "unknown (no revision; " + runtime.Version() + ")"},
		{"NoBuildInfoLinked", "2.0", nil, false, Info{Version: "2.0", GoVersion: runtime.Version()}, "2.0 (no revision; " + runtime.Version() + ")"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := fromBuild(tc.linked, tc.bi, tc.ok)
			if got != tc.want {
				t.Fatalf("fromBuild = %+v, want %+v", got, tc.want)
			}
			if s := got.String(); s != tc.line {
				t.Fatalf("String = %q, want %q", s, tc.line)
			}
		})
	}
}

// TestRead checks the running test binary's own information.
func TestRead(t *testing.T) {
	got := Read()
	if got.Version == "" || got.GoVersion != runtime.Version() {
		t.Fatalf("Read = %+v, want a version and Go %s", got, runtime.Version())
	}
}
