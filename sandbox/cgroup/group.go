package cgroup

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Name is the group's name below the parent.
func (g *Group) Name() string { return g.name }

// Paths are the group's directories: one on v2, one per distinct v1
// hierarchy (memory, pids, cpu, freezer) on v1.
func (g *Group) Paths() []string { return slices.Clone(g.dirs) }

// ProcsFiles are the cgroup.procs files of every directory of the group.
// Writing "0" into each moves the writing process into the group, which is
// how a launcher enters it before it execs the sandbox.
func (g *Group) ProcsFiles() []string {
	out := make([]string, len(g.dirs))
	for i, d := range g.dirs {
		out[i] = filepath.Join(d, "cgroup.procs")
	}
	return out
}

// OpenDir opens the group's directory, for starting a process straight
// into the group (clone3 with CLONE_INTO_CGROUP: Go's
// SysProcAttr.UseCgroupFD), which costs no migration at all. Only a v2
// group has one directory; on v1 it returns ErrUnavailable (wrapped), and
// processes are moved with Enter.
func (g *Group) OpenDir() (*os.File, error) {
	if g.h.version != 2 {
		return nil, fmt.Errorf("open cgroup %s: a v1 group has a directory per hierarchy: %w", g.name, ErrUnavailable)
	}
	f, err := os.OpenFile(g.dirs[0], os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open cgroup %s: %w", g.name, err)
	}
	return f, nil
}

// Enter moves process pid (all its threads) into the group, in every
// hierarchy. The error names the file that refused it.
func (g *Group) Enter(pid int) error {
	for _, f := range g.ProcsFiles() {
		if err := writeFile(f, strconv.Itoa(pid)); err != nil {
			return fmt.Errorf("enter cgroup %s: pid %d: %w", g.name, pid, err)
		}
	}
	return nil
}

// Pids returns the processes in the group, the union over its hierarchies,
// sorted. A removed directory has none. It fails when a cgroup.procs file
// cannot be read or parsed.
func (g *Group) Pids() ([]int, error) {
	var out []int
	for _, f := range g.ProcsFiles() {
		pids, err := readPids(f)
		if err != nil {
			return nil, fmt.Errorf("list cgroup %s: %w", g.name, err)
		}
		for _, pid := range pids {
			if !slices.Contains(out, pid) {
				out = append(out, pid)
			}
		}
	}
	slices.Sort(out)
	return out, nil
}

// empty reports whether the group holds no task, from its pids
// controller's count: one read, where listing every directory's
// cgroup.procs costs a v1 wipe a quarter of a millisecond. The processes of
// a group descend from ones born in, or moved into, every directory of it,
// and only root moves a process out of one, so one hierarchy's count is the
// group's (and Remove's rmdir, which fails while a directory holds a task,
// checks every one). A count that cannot be read is not empty.
func (g *Group) empty() bool {
	n, err := readKey(filepath.Join(g.ctl[ctlPids], "pids.current"), "")
	return err == nil && n == 0
}

// Exists reports whether any directory of the group is still there.
func (g *Group) Exists() bool {
	for _, d := range g.dirs {
		if _, err := os.Stat(d); err == nil {
			return true
		}
	}
	return false
}

// Kill ends every process of the group and returns once the group is empty.
// On v2 with cgroup.kill it writes that file; otherwise it repeats: freeze
// (v1 freezer or v2 cgroup.freeze, when there), SIGKILL every pid, thaw,
// until no pid is left. A removed group is empty: Kill returns nil. It
// fails when ctx ends first (wrapping ctx.Err()), when the group cannot be
// read, or when the calling process itself is in
// the group (it refuses to kill itself).
func (g *Group) Kill(ctx context.Context) error {
	// An empty group stays empty: a process joins one only by forking from
	// a process in it, or by being moved in, which its runtime alone does.
	// (A sandbox whose command ended on its own is empty by now.)
	if g.empty() {
		return nil
	}
	if g.h.version == 2 {
		f := filepath.Join(g.dirs[0], "cgroup.kill")
		if _, err := os.Stat(f); err == nil {
			if err := writeFile(f, "1"); err != nil {
				return fmt.Errorf("kill cgroup %s: %w", g.name, err)
			}
			return g.waitEmpty(ctx)
		}
	}
	self := os.Getpid()
	for b := newBackoff(); ; {
		g.freeze(true)
		pids, err := g.Pids()
		if err != nil {
			g.freeze(false)
			return fmt.Errorf("kill cgroup %s: %w", g.name, err)
		}
		for _, pid := range pids {
			if pid == self {
				g.freeze(false)
				return fmt.Errorf("kill cgroup %s: the calling process %d is in the group", g.name, pid)
			}
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
				g.freeze(false)
				return fmt.Errorf("kill cgroup %s: pid %d: %w", g.name, pid, err)
			}
		}
		g.freeze(false)
		if len(pids) == 0 {
			return nil
		}
		if err := b.wait(ctx); err != nil {
			return fmt.Errorf("kill cgroup %s: %d processes left: %w", g.name, len(pids), err)
		}
	}
}

// freeze freezes or thaws the group when the hierarchy can; it is best
// effort, as Kill works without it.
func (g *Group) freeze(on bool) {
	if g.h.version == 2 {
		v := map[bool]string{true: "1", false: "0"}[on]
		_ = writeFile(filepath.Join(g.dirs[0], "cgroup.freeze"), v)
		return
	}
	if d, ok := g.ctl[ctlFreezer]; ok {
		v := map[bool]string{true: "FROZEN", false: "THAWED"}[on]
		_ = writeFile(filepath.Join(d, "freezer.state"), v)
	}
}

// waitEmpty polls until the group has no process or ctx ends.
func (g *Group) waitEmpty(ctx context.Context) error {
	for b := newBackoff(); ; {
		pids, err := g.Pids()
		if err != nil {
			return fmt.Errorf("kill cgroup %s: %w", g.name, err)
		}
		if len(pids) == 0 {
			return nil
		}
		if err := b.wait(ctx); err != nil {
			return fmt.Errorf("kill cgroup %s: %d processes left: %w", g.name, len(pids), err)
		}
	}
}

// Usage is what a group uses now.
type Usage struct {
	// MemoryBytes is its memory now (tmpfs pages included; on v1 TCP's
	// socket buffers too, which v1 counts apart), PeakBytes the most it
	// used (0 where the kernel does not keep it).
	MemoryBytes, PeakBytes int64
	// CPUSeconds is the CPU time its tasks used (0 on v1 without cpuacct).
	CPUSeconds float64
	// Pids is its number of tasks.
	Pids int
}

// Usage reads the group's counters. It fails when the memory or pids
// counter cannot be read.
func (g *Group) Usage() (Usage, error) {
	mem, peak := "memory.current", "memory.peak"
	if g.h.version == 1 {
		mem, peak = "memory.usage_in_bytes", "memory.max_usage_in_bytes"
	}
	memory, err := readKey(filepath.Join(g.ctl[ctlMemory], mem), "")
	if err != nil {
		return Usage{}, fmt.Errorf("cgroup usage %s: %w", g.name, err)
	}
	pids, err := readKey(filepath.Join(g.ctl[ctlPids], "pids.current"), "")
	if err != nil {
		return Usage{}, fmt.Errorf("cgroup usage %s: %w", g.name, err)
	}
	u := Usage{MemoryBytes: int64(memory), Pids: pids}
	if g.h.version == 1 {
		if tcp, err := readKey(filepath.Join(g.ctl[ctlMemory], "memory.kmem.tcp.usage_in_bytes"), ""); err == nil {
			u.MemoryBytes += int64(tcp)
		}
	}
	if n, err := readKey(filepath.Join(g.ctl[ctlMemory], peak), ""); err == nil {
		u.PeakBytes = int64(n)
	}
	if g.h.version == 2 {
		if usec, err := readKey(filepath.Join(g.ctl[ctlCPU], "cpu.stat"), "usage_usec"); err == nil {
			u.CPUSeconds = float64(usec) / 1e6
		}
	} else if d, ok := g.ctl[ctlCPUAcct]; ok {
		if ns, err := readKey(filepath.Join(d, "cpuacct.usage"), ""); err == nil {
			u.CPUSeconds = float64(ns) / 1e9
		}
	}
	return u, nil
}

// Events are counters of limits that were hit.
type Events struct {
	// OOMKills counts processes the kernel killed for the memory limit
	// (v2 memory.events oom_kill; v1 memory.oom_control oom_kill, or, on
	// kernels without it, memory.failcnt: times the limit was reached).
	OOMKills int
	// PidsMax counts forks refused by the pids limit (pids.events max).
	PidsMax int
}

// Events reads the group's counters. It fails when a counter file cannot be
// read or parsed.
func (g *Group) Events() (Events, error) {
	var ev Events
	var err error
	memFile, memKey := "memory.events", "oom_kill"
	if g.h.version == 1 {
		memFile = "memory.oom_control"
	}
	mem := filepath.Join(g.ctl[ctlMemory], memFile)
	ev.OOMKills, err = readKey(mem, memKey)
	if errors.Is(err, errNoKey) && g.h.version == 1 {
		ev.OOMKills, err = readKey(filepath.Join(g.ctl[ctlMemory], "memory.failcnt"), "")
	}
	if err != nil {
		return Events{}, fmt.Errorf("cgroup events %s: %w", g.name, err)
	}
	if ev.PidsMax, err = readKey(filepath.Join(g.ctl[ctlPids], "pids.events"), "max"); err != nil {
		return Events{}, fmt.Errorf("cgroup events %s: %w", g.name, err)
	}
	return ev, nil
}

var errNoKey = errors.New("key not found")

// readKey returns the number after key in a "key value" per line file, or,
// for an empty key, the file's only number.
func readKey(path, key string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		var v string
		switch {
		case key == "" && len(f) == 1:
			v = f[0]
		case key != "" && len(f) == 2 && f[0] == key:
			v = f[1]
		default:
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			return 0, fmt.Errorf("parse %s: %w", path, err)
		}
		return n, nil
	}
	return 0, fmt.Errorf("read %s %q: %w", path, key, errNoKey)
}

// removeTimeout bounds how long Remove retries a busy directory (the kernel
// may still be tearing down just-killed tasks).
const removeTimeout = 5 * time.Second

// Remove deletes every directory of the group; one already gone is fine.
// A directory that is busy (EBUSY: processes still in it) is retried
// briefly, then the error is returned. The parent is kept.
func (g *Group) Remove() error {
	ctx, cancel := context.WithTimeout(context.Background(), removeTimeout)
	defer cancel()
	var errs []error
	for _, d := range g.dirs {
		for b := newBackoff(); ; {
			err := syscall.Rmdir(d)
			if err == nil || errors.Is(err, fs.ErrNotExist) {
				break
			}
			if !errors.Is(err, syscall.EBUSY) || b.wait(ctx) != nil {
				errs = append(errs, fmt.Errorf("remove cgroup %s: %w", d, err))
				break
			}
		}
	}
	return errors.Join(errs...)
}

// backoff waits 50µs, growing by half up to 10ms, between polls.
type backoff struct{ d time.Duration }

func newBackoff() *backoff { return &backoff{d: 50 * time.Microsecond} }

// wait sleeps the next interval, or returns ctx.Err() when ctx ends first.
func (b *backoff) wait(ctx context.Context) error {
	t := time.NewTimer(b.d)
	defer t.Stop()
	if b.d < 10*time.Millisecond {
		b.d += b.d / 2
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// RemoveTree ends every process in the group name below the parent and in
// all the groups below it, then removes their directories, deepest first,
// in every hierarchy. A missing group is fine. A runtime keeps its groups in
// a directory of its own (see Sub), so RemoveTree with that directory's name
// removes everything a runtime that died left behind, and a closing runtime
// removes its own directory the same way. It fails when ctx ends first, when
// a directory cannot be read or removed, or when the calling process itself
// is in the tree.
func (h *Hierarchy) RemoveTree(ctx context.Context, name string) error {
	if err := checkName(name); err != nil {
		return fmt.Errorf("remove cgroup tree: %w", err)
	}
	var dirs []string
	for _, root := range h.ParentDirs() {
		found, err := treeDirs(filepath.Join(root, name))
		if err != nil {
			return fmt.Errorf("remove cgroup tree %s: %w", name, err)
		}
		dirs = append(dirs, found...)
	}
	if len(dirs) == 0 {
		return nil
	}
	if err := killDirs(ctx, dirs); err != nil {
		return fmt.Errorf("remove cgroup tree %s: %w", name, err)
	}
	// Deepest first: a cgroup with children cannot be removed.
	slices.SortStableFunc(dirs, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
	for _, d := range dirs {
		for b := newBackoff(); ; {
			err := syscall.Rmdir(d)
			if err == nil || errors.Is(err, fs.ErrNotExist) {
				break
			}
			if !errors.Is(err, syscall.EBUSY) || b.wait(ctx) != nil {
				return fmt.Errorf("remove cgroup tree %s: %s: %w", name, d, err)
			}
		}
	}
	return nil
}

// treeDirs returns root and every directory below it (each a cgroup);
// none when root does not exist.
func treeDirs(root string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if d.IsDir() {
			out = append(out, p)
		}
		return nil
	})
	return out, err
}

// killDirs sends SIGKILL to every process of the cgroup directories until
// none is left, or ctx ends.
func killDirs(ctx context.Context, dirs []string) error {
	self := os.Getpid()
	for b := newBackoff(); ; {
		var pids []int
		for _, d := range dirs {
			got, err := readPids(filepath.Join(d, "cgroup.procs"))
			if err != nil {
				return err
			}
			pids = append(pids, got...)
		}
		if len(pids) == 0 {
			return nil
		}
		for _, pid := range pids {
			if pid == self {
				return fmt.Errorf("the calling process %d is in the tree", pid)
			}
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		if err := b.wait(ctx); err != nil {
			return fmt.Errorf("%d processes left: %w", len(pids), err)
		}
	}
}

// readPids returns the pids of a cgroup.procs file; a missing file has none.
func readPids(file string) ([]int, error) {
	b, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []int
	for _, s := range strings.Fields(string(b)) {
		pid, err := strconv.Atoi(s)
		if err != nil {
			return nil, fmt.Errorf("bad pid %q in %s", s, file)
		}
		out = append(out, pid)
	}
	return out, nil
}
