package testenv

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// OnlyDeps fails tb for each package outside the standard library that the
// package in the current directory links and allowed does not list (an
// entry ending in "/" allows every package below it); why ends each
// failure, saying where the package belongs instead. It guards programs
// that must stay small.
func OnlyDeps(tb testing.TB, allowed []string, why string) {
	tb.Helper()
	goBin := RequireBinary(tb, "go", "install Go (make deps)")
	out, err := exec.Command(goBin, "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").Output()
	if err != nil {
		tb.Fatalf("go list: %v", err)
	}
	for _, d := range strings.Fields(string(out)) {
		if !slices.ContainsFunc(allowed, func(a string) bool { return d == a || strings.HasSuffix(a, "/") && strings.HasPrefix(d, a) }) {
			tb.Errorf("links %s, %s", d, why)
		}
	}
}
