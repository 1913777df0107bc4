package cgroup

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
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
	// An empty group (its pids controller counts no task) is left alone;
	// one with a process is killed through cgroup.kill (the fake kernel
	// empties it once that is written).
	kill, procs, count := filepath.Join(dir, "cgroup.kill"), filepath.Join(dir, "cgroup.procs"), filepath.Join(dir, "pids.current")
	if err := os.WriteFile(count, []byte("0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := g.Kill(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := readString(t, kill); got != "" {
		t.Fatalf("an empty group's cgroup.kill = %q, want it untouched", got)
	}
	if err := os.WriteFile(procs, []byte("4242\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(count, []byte("1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	go func() {
		for b, _ := os.ReadFile(kill); ctx.Err() == nil && strings.TrimSpace(string(b)) != "1"; b, _ = os.ReadFile(kill) {
			time.Sleep(time.Millisecond)
		}
		_ = os.WriteFile(procs, nil, 0o644)
	}()
	if err := g.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	if got := readString(t, kill); got != "1" {
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

// TestFakeV2Delegated: in a systemd service's delegated cgroup the worker
// moves into its leaf, enables what is delegated for its children, makes
// the sandboxes' groups beneath the service's (never writing above it), and
// says which controller is missing and how to fix it.
func TestFakeV2Delegated(t *testing.T) {
	for _, tc := range []struct {
		name, self, controllers string
		wantMissing             []string
	}{
		{name: "Delegated", self: "0::/system.slice/codes-sandbox.service\n", controllers: "cpuset cpu io memory pids\n"},
		{name: "AlreadyInLeaf", self: "0::/system.slice/codes-sandbox.service/" + WorkerLeaf + "\n", controllers: "cpu memory pids\n"},
		{name: "CPUNotDelegated", self: "0::/system.slice/codes-sandbox.service\n", controllers: "memory pids\n", wantMissing: []string{"cpu"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h0, root := fakeV2(t)
			svc := filepath.Join(root, "system.slice", "codes-sandbox.service")
			if err := os.MkdirAll(svc, 0o755); err != nil {
				t.Fatal(err)
			}
			for f, s := range map[string]string{"cgroup.controllers": tc.controllers, "cgroup.subtree_control": "", "cgroup.procs": "4242\n"} {
				if err := os.WriteFile(filepath.Join(svc, f), []byte(s), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			rootControl := readString(t, filepath.Join(root, "cgroup.subtree_control"))
			h, err := DetectAt(Options{Root: root, MountInfo: "26 22 0:23 / " + root + " rw - cgroup2 cgroup2 rw\n", SelfCgroup: tc.self})
			if err != nil {
				t.Fatal(err)
			}
			h.mkdir = h0.mkdir
			if diff := cmp.Diff(tc.wantMissing, h.missing); diff != "" {
				t.Fatalf("missing (-want +got):\n%s", diff)
			}
			g, err := h.Create("box", Limits{MemoryBytes: 1 << 20, Pids: 8, CPUPercent: 50})
			if err != nil {
				t.Fatal(err)
			}
			enabled := "+memory +pids +cpu"
			if tc.wantMissing != nil {
				enabled = "+memory +pids"
			}
			for _, c := range []struct{ file, want string }{
				{filepath.Join(svc, WorkerLeaf, "cgroup.procs"), "4242"},
				{filepath.Join(svc, "cgroup.subtree_control"), enabled},
				{filepath.Join(svc, delegatedParent, "cgroup.subtree_control"), enabled},
				{filepath.Join(svc, delegatedParent, "box", "memory.max"), "1048576"},
				{filepath.Join(svc, delegatedParent, "box", "pids.max"), "8"},
				{filepath.Join(root, "cgroup.subtree_control"), rootControl}, // never written above the service
			} {
				if got := readString(t, c.file); got != c.want {
					t.Errorf("%s = %q, want %q", c.file, got, c.want)
				}
			}
			if got, want := g.Paths(), []string{filepath.Join(svc, delegatedParent, "box")}; !slices.Equal(got, want) {
				t.Errorf("group paths %v, want %v", got, want)
			}
			cpu := readString(t, filepath.Join(svc, delegatedParent, "box", "cpu.max"))
			problems := h.Problems()
			if tc.wantMissing == nil {
				if cpu != "50000 100000" || problems != nil {
					t.Errorf("cpu.max %q, problems %q; want the quota and none", cpu, problems)
				}
				return
			}
			if cpu != "" || len(problems) != 1 || !strings.Contains(problems[0], "controllers cpu are not delegated to the worker's cgroup /system.slice/codes-sandbox.service") ||
				!strings.Contains(problems[0], "Delegate=yes") {
				t.Errorf("cpu.max %q (want untouched), problems %q", cpu, problems)
			}
		})
	}
}

// TestFakeV2NotAService: outside a service's cgroup (a login session, the
// root) the groups go to the default parent at the root, as on v1.
func TestFakeV2NotAService(t *testing.T) {
	_, root := fakeV2(t)
	for _, self := range []string{"0::/\n", "0::/user.slice/user-0.slice/session-3.scope\n", "12:pids:/\n"} {
		h, err := DetectAt(Options{Root: root, MountInfo: "26 22 0:23 / " + root + " rw - cgroup2 cgroup2 rw\n", SelfCgroup: self,
			CgroupNamespace: func() bool { return false }})
		if err != nil {
			t.Fatal(err)
		}
		if h.base != "" || h.parent != DefaultParent {
			t.Errorf("own cgroup %q: base %q parent %q, want none and %q", self, h.base, h.parent, DefaultParent)
		}
	}
}

// TestFakeV2Namespaced: in a container with a cgroup namespace of its own
// the namespace's root is delegated like a service's cgroup: the worker
// moves into its leaf there and makes the sandboxes' groups beneath it
// (outside one, "/" is the host's root: TestFakeV2NotAService).
func TestFakeV2Namespaced(t *testing.T) {
	for _, tc := range []struct {
		name, self, controllers string
		namespaced              bool
	}{
		{name: "Root", self: "0::/\n", controllers: "cpuset cpu io memory pids\n", namespaced: true},
		{name: "AlreadyInLeaf", self: "0::/" + WorkerLeaf + "\n", controllers: "cpu memory pids\n", namespaced: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h0, root := fakeV2(t)
			for f, s := range map[string]string{"cgroup.controllers": tc.controllers, "cgroup.procs": "1\n4242\n"} {
				if err := os.WriteFile(filepath.Join(root, f), []byte(s), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			h, err := DetectAt(Options{Root: root, MountInfo: "26 22 0:23 / " + root + " rw - cgroup2 cgroup2 rw\n", SelfCgroup: tc.self,
				CgroupNamespace: func() bool { return tc.namespaced }})
			if err != nil {
				t.Fatal(err)
			}
			h.mkdir = h0.mkdir
			if _, err := h.Create("box", Limits{MemoryBytes: 1 << 20, Pids: 8, CPUPercent: 50}); err != nil {
				t.Fatal(err)
			}
			enabled := "+memory +pids +cpu"
			for _, c := range []struct{ file, want string }{
				{filepath.Join(root, WorkerLeaf, "cgroup.procs"), "4242"}, // the fake records the last write
				{filepath.Join(root, "cgroup.subtree_control"), enabled},
				{filepath.Join(root, delegatedParent, "cgroup.subtree_control"), enabled},
				{filepath.Join(root, delegatedParent, "box", "memory.max"), "1048576"},
			} {
				if got := readString(t, c.file); got != c.want {
					t.Errorf("%s = %q, want %q", c.file, got, c.want)
				}
			}
			if p := h.Problems(); p != nil {
				t.Errorf("problems %q, want none", p)
			}
		})
	}
}
