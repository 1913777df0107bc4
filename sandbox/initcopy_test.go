package sandbox

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"openvibe.network/agentsandbox/internal/testenv"
)

// TestInstallInit: an init binary that cannot simply be linked (not
// root-owned 0755, or on another file system) is copied once into the state
// dir and linked from there by every later runtime; a replaced binary gets a
// new copy and the old one goes, while the runtimes that linked it keep the
// bytes they started with; a half-written copy a dead runtime left is
// removed, a fresh one (another runtime's, being written) is not.
func TestInstallInit(t *testing.T) {
	state, host := t.TempDir(), t.TempDir()
	src := filepath.Join(host, "codes-sandbox-init")
	if err := os.WriteFile(src, []byte("build 1"), 0o700); err != nil { // 0700: never linked directly
		t.Fatal(err)
	}
	install := func(name string) string {
		t.Helper()
		dst := filepath.Join(state, name)
		if err := installInit(state, src, dst); err != nil {
			t.Fatal(err)
		}
		return dst
	}
	read := func(path string) string {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	copies := func() []string {
		t.Helper()
		paths, err := filepath.Glob(filepath.Join(state, initCopyPrefix+"*"))
		if err != nil {
			t.Fatal(err)
		}
		for i := range paths {
			paths[i] = filepath.Base(paths[i])
		}
		return paths
	}
	same := func(a, b string) bool {
		t.Helper()
		fa, err := os.Stat(a)
		if err != nil {
			t.Fatal(err)
		}
		fb, err := os.Stat(b)
		if err != nil {
			t.Fatal(err)
		}
		return os.SameFile(fa, fb)
	}

	first := install("rt-1")
	if fi, err := os.Stat(first); err != nil || fi.Mode().Perm() != 0o755 || read(first) != "build 1" {
		t.Fatalf("installed init: %v %v, want build 1 with mode 0755", fi, err)
	}
	shared := copies()
	if len(shared) != 1 || !same(first, filepath.Join(state, shared[0])) {
		t.Fatalf("shared copies %v, want one that the runtime's init links", shared)
	}
	if second := install("rt-2"); !same(first, second) {
		t.Fatal("the second runtime made a copy of its own instead of linking the shared one")
	}

	// A dead runtime's half-written copy, and one being written now.
	stale, fresh := filepath.Join(state, initCopyTmpPrefix+"dead"), filepath.Join(state, initCopyTmpPrefix+"busy")
	for _, p := range []string{stale, fresh} {
		if err := os.WriteFile(p, []byte("half"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-2 * initCopyTmpAge)
	if err := os.Chtimes(stale, old, old); err != nil {
		t.Fatal(err)
	}

	// An upgrade replaces the binary.
	next := filepath.Join(host, "next")
	if err := os.WriteFile(next, []byte("build 2"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(next, src); err != nil {
		t.Fatal(err)
	}
	third := install("rt-3")
	if read(third) != "build 2" || read(first) != "build 1" {
		t.Fatalf("after the upgrade: the new runtime's init %q (want build 2), the old one's %q (want build 1)", read(third), read(first))
	}
	now := copies()
	want := []string{filepath.Base(fresh)}
	for _, c := range now {
		if same(third, filepath.Join(state, c)) {
			want = append(want, c)
		}
	}
	slices.Sort(want)
	if !slices.Equal(now, want) || len(want) != 2 {
		t.Fatalf("copies after the upgrade: %v, want the new one and the one being written (%v)", now, want)
	}
}

// TestInstallInitLinksRootOwned: a root-owned 0755 binary on the state
// dir's file system is linked itself, with no copy.
func TestInstallInitLinksRootOwned(t *testing.T) {
	testenv.RequireRoot(t)
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "init"), filepath.Join(dir, "rt-1-init")
	if err := os.WriteFile(src, []byte("build"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := installInit(dir, src, dst); err != nil {
		t.Fatal(err)
	}
	a, _ := os.Stat(src)
	b, err := os.Stat(dst)
	if err != nil || !os.SameFile(a, b) {
		t.Fatalf("dst %v (%v) is not a link of src", b, err)
	}
	if paths, _ := filepath.Glob(filepath.Join(dir, initCopyPrefix+"*")); len(paths) != 0 {
		t.Fatalf("copies %v, want none", paths)
	}
}
