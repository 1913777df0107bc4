package testenv

import (
	"testing"
)

// fakeTB records whether Missing skipped or failed.
type fakeTB struct {
	testing.TB
	skipped, failed bool
}

func (f *fakeTB) Helper()               {}
func (f *fakeTB) Skipf(string, ...any)  { f.skipped = true }
func (f *fakeTB) Fatalf(string, ...any) { f.failed = true }

func TestMissing(t *testing.T) {
	for _, tc := range []struct {
		name       string
		ci         string
		wantSkip   bool
		wantFailed bool
	}{
		{name: "ByHandSkips", ci: "", wantSkip: true},
		{name: "InCIFails", ci: "true", wantFailed: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("CI", tc.ci)
			f := &fakeTB{}
			Missing(f, "a reason")
			if f.skipped != tc.wantSkip || f.failed != tc.wantFailed {
				t.Fatalf("skipped=%v failed=%v, want %v %v", f.skipped, f.failed, tc.wantSkip, tc.wantFailed)
			}
		})
	}
}
