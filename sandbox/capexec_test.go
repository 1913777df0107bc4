package sandbox

import (
	"os"
	"path/filepath"
	"testing"
)

// TestFindPrlimit: only a root-owned regular executable under /usr, in a
// directory no one else can write, is trusted to cap a sandbox's limits.
func TestFindPrlimit(t *testing.T) {
	dir := t.TempDir()
	own := filepath.Join(dir, "prlimit")
	if err := os.WriteFile(own, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	type row struct{ name, path, want string }
	rows := []row{
		{"OutsideUsr", own, ""},
		{"Missing", "/usr/bin/no-such-prlimit", ""},
		{"Directory", "/usr/bin", ""},
		{"NotClean", "/usr/bin/../bin/prlimit", ""},
	}
	if _, err := os.Stat(prlimitPath); err == nil || os.Getenv("CI") != "" {
		// util-linux's, on every host CI runs on
		rows = append(rows, row{"Host", prlimitPath, prlimitPath})
	}
	if fi, err := os.Lstat("/usr/bin/awk"); err == nil && fi.Mode()&os.ModeSymlink != 0 {
		rows = append(rows, row{"Symlink", "/usr/bin/awk", ""})
	}
	for _, tc := range rows {
		t.Run(tc.name, func(t *testing.T) {
			if got := findPrlimit(tc.path); got != tc.want {
				t.Fatalf("findPrlimit(%q) = %q, want %q", tc.path, got, tc.want)
			}
		})
	}
}
