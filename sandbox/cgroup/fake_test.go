package cgroup

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// v2Files are the control files the fake kernel puts in a new v2 group.
var v2Files = []string{"cgroup.procs", "cgroup.subtree_control", "cgroup.kill", "cgroup.freeze",
	"memory.max", "memory.swap.max", "memory.events", "pids.max", "pids.events", "cpu.max"}

// fakeV2 returns a v2 Hierarchy over a plain directory: mkdir also creates
// the control files, as the kernel would.
func fakeV2(tb testing.TB) (*Hierarchy, string) {
	tb.Helper()
	root := tb.TempDir()
	for f, s := range map[string]string{"cgroup.controllers": "cpuset cpu io memory pids\n", "cgroup.subtree_control": ""} {
		if err := os.WriteFile(filepath.Join(root, f), []byte(s), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	h, err := DetectAt(Options{Root: root, MountInfo: "26 22 0:23 / " + root + " rw - cgroup2 cgroup2 rw\n"})
	if err != nil {
		tb.Fatal(err)
	}
	h.mkdir = func(p string, perm os.FileMode) error {
		if err := os.Mkdir(p, perm); err != nil {
			return err
		}
		for _, f := range v2Files {
			if err := os.WriteFile(filepath.Join(p, f), nil, 0o644); err != nil {
				return err
			}
		}
		return nil
	}
	return h, root
}

func readString(tb testing.TB, p string) string {
	tb.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		tb.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func TestFakeV2Create(t *testing.T) {
	h, root := fakeV2(t)
	if h.Version() != 2 {
		t.Fatalf("version %d, want 2", h.Version())
	}
	g, err := h.Create("box1", Limits{MemoryBytes: 32 << 20, Pids: 8, CPUPercent: 50})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, DefaultParent, "box1")
	if !slices.Equal(g.Paths(), []string{dir}) {
		t.Fatalf("paths %v, want [%s]", g.Paths(), dir)
	}
	if !slices.Equal(g.ProcsFiles(), []string{filepath.Join(dir, "cgroup.procs")}) {
		t.Fatalf("procs files %v", g.ProcsFiles())
	}
	for f, want := range map[string]string{
		filepath.Join(root, "cgroup.subtree_control"):                "+memory +pids +cpu",
		filepath.Join(root, DefaultParent, "cgroup.subtree_control"): "+memory +pids +cpu",
		filepath.Join(dir, "memory.max"):                             "33554432",
		filepath.Join(dir, "memory.swap.max"):                        "0",
		filepath.Join(dir, "pids.max"):                               "8",
		filepath.Join(dir, "cpu.max"):                                "50000 100000",
	} {
		if got := readString(t, f); got != want {
			t.Errorf("%s = %q, want %q", f, got, want)
		}
	}
	if !g.Exists() {
		t.Fatal("Exists is false after Create")
	}
}

func TestFakeV2CreateErrors(t *testing.T) {
	h, root := fakeV2(t)
	if _, err := h.Create("dup", Limits{}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, group, want string }{
		{"ErrExists", "dup", "create cgroup memory,pids,cpu/dup"},
		{"ErrSlash", "a/b", "invalid cgroup name"},
		{"ErrDotDot", "..", "invalid cgroup name"},
		{"ErrEmpty", "", "invalid cgroup name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := h.Create(tc.group, Limits{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
	t.Run("ErrNegative", func(t *testing.T) {
		if _, err := h.Create("neg", Limits{Pids: -1}); err == nil {
			t.Fatal("negative limit accepted")
		}
		if _, err := os.Stat(filepath.Join(root, DefaultParent, "neg")); !os.IsNotExist(err) {
			t.Fatalf("group dir left behind: %v", err)
		}
	})
}

func TestFakeV2EventsAndKill(t *testing.T) {
	h, _ := fakeV2(t)
	g, err := h.Create("box", Limits{})
	if err != nil {
		t.Fatal(err)
	}
	dir := g.Paths()[0]
	files := map[string]string{
		"memory.events": "low 0\nhigh 0\nmax 7\noom 2\noom_kill 1\noom_group_kill 0\n",
		"pids.events":   "max 5\n",
	}
	for f, s := range files {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ev, err := g.Events()
	if err != nil {
		t.Fatal(err)
	}
	if ev != (Events{OOMKills: 1, PidsMax: 5}) {
		t.Fatalf("events %+v, want {1 5}", ev)
	}
	if err := g.Kill(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := readString(t, filepath.Join(dir, "cgroup.kill")); got != "1" {
		t.Fatalf("cgroup.kill = %q, want 1", got)
	}
}

func TestFakeEventsErrors(t *testing.T) {
	h, _ := fakeV2(t)
	g, err := h.Create("box", Limits{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, events string }{
		{"ErrNoKey", "max 1\n"},
		{"ErrNotANumber", "oom_kill x\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.WriteFile(filepath.Join(g.Paths()[0], "memory.events"), []byte(tc.events), 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := g.Events(); err == nil {
				t.Fatal("no error")
			}
		})
	}
}

func TestFakeV2Usage(t *testing.T) {
	h, _ := fakeV2(t)
	g, err := h.Create("box", Limits{})
	if err != nil {
		t.Fatal(err)
	}
	dir := g.Paths()[0]
	for f, s := range map[string]string{
		"memory.current": "4096\n", "memory.peak": "8192\n", "pids.current": "3\n",
		"cpu.stat": "usage_usec 1500000\nuser_usec 1000000\nsystem_usec 500000\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	u, err := g.Usage()
	if err != nil {
		t.Fatal(err)
	}
	if want := (Usage{MemoryBytes: 4096, PeakBytes: 8192, CPUSeconds: 1.5, Pids: 3}); u != want {
		t.Fatalf("usage %+v, want %+v", u, want)
	}
	if err := os.Remove(filepath.Join(dir, "pids.current")); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Usage(); err == nil || !strings.Contains(err.Error(), "pids.current") {
		t.Fatalf("usage without pids.current: %v, want an error naming it", err)
	}
}
