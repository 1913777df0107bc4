package cgroup

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"openvibe.network/agentsandbox/internal/testenv"
)

// testParent keeps these tests' groups apart from real sandboxes.
const testParent = "codes-sandbox-test-cgroup"

// generous bounds waits on a loaded machine; nothing is timed by it.
const generous = 60 * time.Second

func TestMain(m *testing.M) {
	code := m.Run()
	if h, err := DetectAt(Options{Parent: testParent}); err == nil && os.Geteuid() == 0 {
		for _, mount := range h.dirs {
			_ = syscall.Rmdir(filepath.Join(mount, testParent)) // shared by the tests; best effort
		}
	}
	os.Exit(code)
}

// realHierarchy detects the machine's cgroups, or skips (fails in CI).
func realHierarchy(tb testing.TB, opts Options) *Hierarchy {
	tb.Helper()
	testenv.RequireRoot(tb)
	testenv.RequireCgroups(tb)
	opts.Parent = testParent
	h, err := DetectAt(opts)
	if err != nil {
		tb.Fatal(err)
	}
	return h
}

// newGroup creates a uniquely named group and removes it after the test,
// checking that nothing of it is left.
func newGroup(tb testing.TB, h *Hierarchy, l Limits) *Group {
	tb.Helper()
	name := fmt.Sprintf("%d-%s", os.Getpid(), strings.NewReplacer("/", "-", " ", "_").Replace(tb.Name()))
	g, err := h.Create(name, l)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), generous)
		defer cancel()
		if err := g.Kill(ctx); err != nil {
			tb.Error(err)
		}
		if err := g.Remove(); err != nil {
			tb.Error(err)
		}
		if g.Exists() {
			tb.Errorf("group %s still exists after Remove", name)
		}
	})
	return g
}

// proc is a process started by startIn.
type proc struct {
	cmd  *exec.Cmd
	done chan error
	out  *bufio.Reader // its stdout
}

// wait returns how the process ended.
func (p *proc) wait(tb testing.TB) error {
	tb.Helper()
	select {
	case err := <-p.done:
		p.done <- err // later waits (and the cleanup) see it too
		return err
	case <-time.After(generous):
		tb.Fatalf("process %d did not end", p.cmd.Process.Pid)
		return nil
	}
}

// readLine returns the next line the process writes.
func (p *proc) readLine(tb testing.TB) string {
	tb.Helper()
	ch := make(chan string, 1)
	go func() {
		s, _ := p.out.ReadString('\n')
		ch <- s
	}()
	select {
	case s := <-ch:
		return strings.TrimSpace(s)
	case <-time.After(generous):
		tb.Fatalf("process %d wrote no line", p.cmd.Process.Pid)
		return ""
	}
}

// startIn starts sh -c script inside g: sh waits on stdin until it has been
// moved into the group, so even its first fork is inside. The process is
// killed and reaped after the test, before the group is removed.
func startIn(tb testing.TB, g *Group, script string) *proc {
	tb.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = r.Close() })
	cmd := exec.Command("/bin/sh", "-c", "read go; "+script)
	cmd.Stdout = w
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	err = cmd.Start()
	_ = w.Close()
	if err != nil {
		tb.Fatal(err)
	}
	p := &proc{cmd: cmd, done: make(chan error, 1), out: bufio.NewReader(r)}
	go func() { p.done <- cmd.Wait() }()
	tb.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = p.wait(tb)
	})
	if err := g.Enter(cmd.Process.Pid); err != nil {
		tb.Fatal(err)
	}
	if _, err := io.WriteString(stdin, "go\n"); err != nil {
		tb.Fatal(err)
	}
	_ = stdin.Close()
	return p
}

func TestCreateWritesLimits(t *testing.T) {
	h := realHierarchy(t, Options{})
	g := newGroup(t, h, Limits{MemoryBytes: 64 << 20, Pids: 16, CPUPercent: 50})
	want := map[string]string{"memory.max": "67108864", "pids.max": "16", "cpu.max": "50000 100000"}
	if h.Version() == 1 {
		want = map[string]string{"memory.limit_in_bytes": "67108864", "pids.max": "16",
			"cpu.cfs_period_us": "100000", "cpu.cfs_quota_us": "50000"}
	}
	for _, s := range settings(h.Version(), Limits{}) {
		if s.optional {
			if _, err := os.Stat(filepath.Join(g.ctl[s.ctl], s.file)); err == nil {
				want[s.file] = map[string]string{"memory.swap.max": "0", "memory.memsw.limit_in_bytes": "67108864",
					"memory.kmem.tcp.limit_in_bytes": "16777216"}[s.file]
			}
		}
	}
	for _, s := range settings(h.Version(), Limits{}) {
		w, ok := want[s.file]
		if !ok {
			continue
		}
		if got := readString(t, filepath.Join(g.ctl[s.ctl], s.file)); got != w {
			t.Errorf("%s/%s = %q, want %q", s.ctl, s.file, got, w)
		}
		delete(want, s.file)
	}
	if len(want) != 0 {
		t.Errorf("not checked: %v", want)
	}
	if _, err := h.Create(g.Name(), Limits{}); err == nil {
		t.Error("creating an existing group succeeded")
	}
}

// noFreezer is this machine's mountinfo without the freezer, to run Kill's
// plain signal loop for real.
func noFreezer(tb testing.TB) Options {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		tb.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(string(b), "\n") {
		if !strings.Contains(l, ",freezer") {
			lines = append(lines, l)
		}
	}
	return Options{MountInfo: strings.Join(lines, "\n")}
}

func TestEnterPidsKill(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts func(testing.TB) Options
	}{
		{"Detected", func(testing.TB) Options { return Options{} }},
		{"WithoutFreezer", noFreezer},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := realHierarchy(t, tc.opts(t))
			g := newGroup(t, h, Limits{Pids: 32})
			// sh forks two sleeps and says so; then all three are in the group.
			p := startIn(t, g, "sleep 300 & sleep 300 & echo started; wait")
			if line := p.readLine(t); line != "started" {
				t.Fatalf("sh wrote %q", line)
			}
			pids, err := g.Pids()
			if err != nil {
				t.Fatal(err)
			}
			if len(pids) != 3 || !slices.Contains(pids, p.cmd.Process.Pid) {
				t.Fatalf("pids %v, want sh %d and its two sleeps", pids, p.cmd.Process.Pid)
			}
			ctx, cancel := context.WithTimeout(context.Background(), generous)
			defer cancel()
			if err := g.Kill(ctx); err != nil {
				t.Fatal(err)
			}
			if pids, err := g.Pids(); err != nil || len(pids) != 0 {
				t.Fatalf("after Kill: pids %v, err %v", pids, err)
			}
			var ee *exec.ExitError
			if err := p.wait(t); !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Fatalf("sh ended with %v, want SIGKILL", err)
			}
		})
	}
}

func TestRemove(t *testing.T) {
	h := realHierarchy(t, Options{})
	g := newGroup(t, h, Limits{Pids: 4})
	if !g.Exists() {
		t.Fatal("Exists is false after Create")
	}
	if err := g.Remove(); err != nil {
		t.Fatal(err)
	}
	if g.Exists() {
		t.Fatal("Exists is true after Remove")
	}
	for _, d := range g.Paths() {
		if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s: %v, want not exist", d, err)
		}
	}
	if err := g.Remove(); err != nil {
		t.Fatalf("second Remove: %v", err)
	}
	if pids, err := g.Pids(); err != nil || len(pids) != 0 {
		t.Fatalf("Pids of a removed group: %v, %v; want none", pids, err)
	}
	if err := g.Enter(os.Getpid()); err == nil {
		t.Fatal("Enter into a removed group succeeded")
	}
}

func TestProcsFilesCoverEveryController(t *testing.T) {
	h := realHierarchy(t, Options{})
	g := newGroup(t, h, Limits{})
	files := g.ProcsFiles()
	for _, c := range required {
		if !slices.Contains(files, filepath.Join(g.ctl[c], "cgroup.procs")) {
			t.Errorf("no cgroup.procs of %s in %v", c, files)
		}
	}
	if len(files) != len(g.Paths()) {
		t.Errorf("%d procs files for %d dirs", len(files), len(g.Paths()))
	}
}

func TestOpenAndGroups(t *testing.T) {
	h := realHierarchy(t, Options{})
	g := newGroup(t, h, Limits{})
	names, err := h.Groups()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(names, g.Name()) {
		t.Fatalf("Groups %v lacks %s", names, g.Name())
	}
	o, err := h.Open(g.Name())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(o.Paths(), g.Paths()) {
		t.Fatalf("Open paths %v, Create paths %v", o.Paths(), g.Paths())
	}
	if err := o.Remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Open(g.Name()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Open of a removed group: %v, want not exist", err)
	}
	if _, err := h.Open("../x"); err == nil {
		t.Fatal("Open accepted ../x")
	}
}

func TestUsage(t *testing.T) {
	h := realHierarchy(t, Options{})
	g := newGroup(t, h, Limits{Pids: 16, MemoryBytes: 256 << 20})
	// sh burns CPU for a moment, then starts a sleep and waits.
	p := startIn(t, g, `i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done; sleep 300 & echo started; wait`)
	if line := p.readLine(t); line != "started" {
		t.Fatalf("sh wrote %q", line)
	}
	u, err := g.Usage()
	if err != nil {
		t.Fatal(err)
	}
	if u.Pids != 2 {
		t.Errorf("pids %d, want sh and its sleep", u.Pids)
	}
	if u.MemoryBytes <= 0 || u.PeakBytes < u.MemoryBytes {
		t.Errorf("memory %d peak %d, want 0 < memory <= peak", u.MemoryBytes, u.PeakBytes)
	}
	if u.CPUSeconds <= 0 {
		t.Errorf("cpu %v s after a busy loop, want > 0", u.CPUSeconds)
	}
}
