// Package cgroup creates, fills, kills and removes one cgroup per sandbox,
// with memory, pids and cpu limits, on cgroup v2 (unified) or v1 (one
// hierarchy per controller), whichever the machine has; Detect decides at
// start.
//
// On v2 a group is one directory under <root>/<parent>; on v1 it is one
// directory under <mount>/<parent> in each of the memory, pids, cpu and (when
// mounted) freezer hierarchies. Every method works on all of them.
package cgroup

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Defaults of Options.
const (
	DefaultRoot   = "/sys/fs/cgroup"
	DefaultParent = "codes-sandbox"
	// cpuPeriod is the CFS period in microseconds; the quota is a share of it.
	cpuPeriod = 100000
)

// Options select where groups are made. Zero fields take the defaults.
type Options struct {
	// Root is where the cgroup filesystems are mounted (default
	// /sys/fs/cgroup); only mounts at or under it are considered.
	Root string
	// Parent is the directory, below each hierarchy's mount, that holds the
	// groups; it may have several levels ("codes-sandbox/rt-1"). Every
	// level is created when missing. Empty: on v2, when this process runs
	// in a systemd service's cgroup, below that cgroup (see delegate.go);
	// else "codes-sandbox".
	Parent string
	// MountInfo is the text of /proc/self/mountinfo; empty reads the file.
	MountInfo string
	// SelfCgroup is the text of /proc/self/cgroup; empty reads the file.
	SelfCgroup string
	// CgroupNamespace reports whether this process is in a cgroup
	// namespace of its own (a container's); nil compares
	// /proc/self/ns/cgroup with the initial namespace.
	CgroupNamespace func() bool
}

// Hierarchy is the detected cgroup setup. It is safe for concurrent use.
type Hierarchy struct {
	version int
	parent  string
	// delegated is set when the parent is in a cgroup delegated to the
	// worker (v2, no explicit parent): a systemd service's, or the root of
	// the container's own cgroup namespace.
	delegated bool
	// base is that delegated cgroup, relative to the mount ("" for the
	// namespace's root): the hierarchy never writes above it.
	base string
	// missing are the required controllers base does not offer: their
	// limits are not written (see Problems).
	missing []string
	dirs    map[string]string // controller -> mount dir
	roots   map[string]string // v1: controller -> the cgroup shown at its mount dir (see layout)
	// mkdir makes a group directory; tests replace it to emulate the kernel
	// populating control files.
	mkdir func(path string, perm os.FileMode) error
}

// Limits of one group; a zero field means no limit.
type Limits struct {
	MemoryBytes int64 // memory, tmpfs pages included; swap is off where the kernel accounts it
	Pids        int   // number of tasks
	CPUPercent  int   // percent of one core (100 = one full core)
}

// Group is one sandbox's cgroup. Its methods are safe for concurrent use.
type Group struct {
	h    *Hierarchy
	name string
	ctl  map[string]string // controller -> group dir
	dirs []string          // distinct group dirs, memory first
}

// Detect is DetectAt with default Options.
func Detect() (*Hierarchy, error) { return DetectAt(Options{}) }

// DetectAt finds the cgroup hierarchy: v2 when a cgroup2 mount under
// opts.Root offers the memory, pids and cpu controllers, else v1 when each
// of them has a cgroup mount (the freezer is used when present). The error
// wraps ErrUnavailable and names the missing controller, or reports an
// unreadable mountinfo.
func DetectAt(opts Options) (*Hierarchy, error) {
	if opts.Root == "" {
		opts.Root = DefaultRoot
	}
	if opts.Parent != "" {
		if err := checkPath(opts.Parent); err != nil {
			return nil, fmt.Errorf("detect cgroups: parent: %w", err)
		}
	}
	if opts.MountInfo == "" {
		b, err := os.ReadFile("/proc/self/mountinfo")
		if err != nil {
			return nil, fmt.Errorf("detect cgroups: %w", err)
		}
		opts.MountInfo = string(b)
	}
	l, err := detect(opts.MountInfo, opts.Root, os.ReadFile)
	if err != nil {
		return nil, err
	}
	h := &Hierarchy{version: l.version, parent: cmp.Or(opts.Parent, DefaultParent), dirs: l.dirs, roots: l.roots, mkdir: os.Mkdir}
	if l.version != 2 || opts.Parent != "" {
		return h, nil
	}
	if opts.SelfCgroup == "" {
		b, err := os.ReadFile("/proc/self/cgroup")
		if err != nil {
			return nil, fmt.Errorf("detect cgroups: %w", err)
		}
		opts.SelfCgroup = string(b)
	}
	if opts.CgroupNamespace == nil {
		opts.CgroupNamespace = InNamespace
	}
	own, _ := ownCgroup(opts.SelfCgroup)
	base, ok := delegatedBase(own, opts.CgroupNamespace())
	if !ok {
		return h, nil
	}
	if h.missing, err = delegatedMissing(l.dirs[ctlMemory], base, os.ReadFile); err != nil {
		return nil, err
	}
	h.delegated, h.base, h.parent = true, base, path.Join(base, delegatedParent)
	return h, nil
}

// Version is 1 or 2.
func (h *Hierarchy) Version() int { return h.version }

// Sub returns the hierarchy whose parent is name below h's parent: the
// groups of one runtime live in their own directory, so that a runtime
// that ended without cleaning up can be found and removed whole (see
// RemoveTree). Nothing is created until the first Create. It fails for an
// invalid name.
func (h *Hierarchy) Sub(name string) (*Hierarchy, error) {
	if err := checkName(name); err != nil {
		return nil, fmt.Errorf("cgroup sub-hierarchy: %w", err)
	}
	sub := *h
	sub.parent = h.parent + "/" + name
	return &sub, nil
}

// ParentDirs are the parent's directories, one per distinct hierarchy.
func (h *Hierarchy) ParentDirs() []string {
	var out []string
	for _, c := range controllers {
		if mount, ok := h.dirs[c]; ok {
			if d := filepath.Join(mount, h.parent); !slices.Contains(out, d) {
				out = append(out, d)
			}
		}
	}
	return out
}

// checkPath refuses a parent that is not one or more plain path elements.
func checkPath(p string) error {
	for _, name := range strings.Split(p, "/") {
		if err := checkName(name); err != nil {
			return err
		}
	}
	return nil
}

// checkName refuses names that are not one plain path element.
func checkName(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00\n") {
		return fmt.Errorf("invalid cgroup name %q", name)
	}
	return nil
}

// Create makes the group name (which must not exist yet) below the parent
// and applies l. On v2 it first enables the controllers in the root's and
// the parent's cgroup.subtree_control. On any error nothing of the group is
// left. Errors name the controller and file ("create cgroup memory/x: ...").
func (h *Hierarchy) Create(name string, l Limits) (*Group, error) {
	if err := checkName(name); err != nil {
		return nil, fmt.Errorf("create cgroup: %w", err)
	}
	if l.MemoryBytes < 0 || l.Pids < 0 || l.CPUPercent < 0 {
		return nil, fmt.Errorf("create cgroup %s: negative limit %+v", name, l)
	}
	g := h.group(name)
	if err := h.ensureParents(); err != nil {
		return nil, fmt.Errorf("create cgroup %s: %w", name, err)
	}
	for i, dir := range g.dirs {
		if err := h.mkdir(dir, 0o755); err != nil {
			g.dirs = g.dirs[:i] // remove only what this call made
			_ = g.Remove()
			return nil, fmt.Errorf("create cgroup %s/%s: %w", g.ctlOf(dir), name, err)
		}
	}
	if err := g.apply(l); err != nil {
		_ = g.Remove()
		return nil, err
	}
	return g, nil
}

// group returns the Group value for name, without touching the filesystem.
func (h *Hierarchy) group(name string) *Group {
	g := &Group{h: h, name: name, ctl: map[string]string{}}
	for _, c := range controllers {
		if mount, ok := h.dirs[c]; ok {
			dir := filepath.Join(mount, h.parent, name)
			if !slices.Contains(g.dirs, dir) {
				g.dirs = append(g.dirs, dir)
			}
			g.ctl[c] = dir
		}
	}
	return g
}

// Open returns the existing group name, for example one left behind by a
// worker that crashed, so that it can be killed and removed. It fails for
// an invalid name, or with an error wrapping fs.ErrNotExist when no
// directory of the group exists.
func (h *Hierarchy) Open(name string) (*Group, error) {
	if err := checkName(name); err != nil {
		return nil, fmt.Errorf("open cgroup: %w", err)
	}
	g := h.group(name)
	if !g.Exists() {
		return nil, fmt.Errorf("open cgroup %s: %w", name, fs.ErrNotExist)
	}
	return g, nil
}

// Groups lists the names of the groups below the parent, in any hierarchy,
// sorted. A missing parent means none. It fails when a parent directory
// cannot be read.
func (h *Hierarchy) Groups() ([]string, error) {
	var names []string
	for _, mount := range h.dirs {
		entries, err := os.ReadDir(filepath.Join(mount, h.parent))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("list cgroups: %w", err)
		}
		for _, e := range entries {
			if e.IsDir() && !slices.Contains(names, e.Name()) {
				names = append(names, e.Name())
			}
		}
	}
	slices.Sort(names)
	return names, nil
}

// controllers are the ones a group uses, in the order of its dirs.
var controllers = []string{ctlMemory, ctlPids, ctlCPU, ctlFreezer, ctlCPUAcct}

// ctlOf names the controllers whose hierarchy holds dir ("cpu,freezer").
func (g *Group) ctlOf(dir string) string {
	var names []string
	for _, c := range controllers {
		if g.ctl[c] == dir {
			names = append(names, c)
		}
	}
	return strings.Join(names, ",")
}

// ensureParents makes every level of the parent directory in every
// hierarchy and, on v2, enables the controllers for the children of each
// level from the mount's root, or, with a delegated base, from the base
// (having moved this process into its leaf first).
func (h *Hierarchy) ensureParents() error {
	done := map[string]bool{}
	for _, c := range controllers {
		mount, ok := h.dirs[c]
		if !ok || done[mount] {
			continue
		}
		done[mount] = true
		dir, rest := mount, h.parent
		if h.delegated {
			if err := h.moveIntoLeaf(mount); err != nil {
				return err
			}
			dir, rest = filepath.Join(mount, h.base), strings.TrimPrefix(strings.TrimPrefix(h.parent, h.base), "/")
		}
		if h.version == 2 {
			if err := h.enableControllers(dir); err != nil {
				return err
			}
		}
		for _, level := range strings.Split(rest, "/") {
			dir = filepath.Join(dir, level)
			if err := h.mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
				return fmt.Errorf("make parent %s: %w", dir, writeHint(err))
			}
			if h.version == 2 {
				if err := h.enableControllers(dir); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// enableControllers writes "+memory +pids +cpu" (those of them not
// missing) to dir's subtree_control unless they are already enabled.
func (h *Hierarchy) enableControllers(dir string) error {
	f := filepath.Join(dir, "cgroup.subtree_control")
	b, err := os.ReadFile(f)
	if err != nil {
		return fmt.Errorf("enable controllers: %w", err)
	}
	have := strings.Fields(string(b))
	var add []string
	for _, c := range required {
		if !slices.Contains(have, c) && !slices.Contains(h.missing, c) {
			add = append(add, "+"+c)
		}
	}
	if len(add) == 0 {
		return nil
	}
	if err := writeFile(f, strings.Join(add, " ")); err != nil {
		return fmt.Errorf("enable controllers in %s: %w", dir, writeHint(err))
	}
	return nil
}

// setting is one control file to write; optional files are skipped when the
// kernel does not offer them (e.g. swap accounting is off).
type setting struct {
	ctl, file, value string
	optional         bool
}

// settings maps l to the control files of the given cgroup version.
func settings(version int, l Limits) []setting {
	mem, pids, quota := "max", "max", "max"
	if version == 1 {
		mem, quota = "-1", "-1"
	}
	if l.MemoryBytes > 0 {
		mem = strconv.FormatInt(l.MemoryBytes, 10)
	}
	if l.Pids > 0 {
		pids = strconv.Itoa(l.Pids)
	}
	if l.CPUPercent > 0 {
		quota = strconv.Itoa(l.CPUPercent * cpuPeriod / 100)
	}
	period := strconv.Itoa(cpuPeriod)
	if version == 2 {
		return []setting{
			{ctl: ctlMemory, file: "memory.max", value: mem},
			{ctl: ctlMemory, file: "memory.swap.max", value: "0", optional: true},
			{ctl: ctlPids, file: "pids.max", value: pids},
			{ctl: ctlCPU, file: "cpu.max", value: quota + " " + period},
		}
	}
	return []setting{
		{ctl: ctlMemory, file: "memory.limit_in_bytes", value: mem},
		{ctl: ctlMemory, file: "memory.memsw.limit_in_bytes", value: mem, optional: true},
		{ctl: ctlMemory, file: "memory.kmem.tcp.limit_in_bytes", value: tcpLimitV1(l.MemoryBytes), optional: true},
		{ctl: ctlPids, file: "pids.max", value: pids},
		{ctl: ctlCPU, file: "cpu.cfs_period_us", value: period},
		{ctl: ctlCPU, file: "cpu.cfs_quota_us", value: quota},
	}
}

// tcpLimitV1 is the v1 memory.kmem.tcp.limit_in_bytes for a memory limit:
// a quarter of it ("-1", none, without one). v1 charges TCP's socket
// buffers to a counter of their own, beside memory.limit_in_bytes rather
// than within it, and only once this limit is set; without it a sandbox's
// unread loopback connections hold host memory no limit sees. A quarter
// keeps the sandbox's whole charge within 1.25 times its memory limit and
// is still megabytes of buffers per connection a sandbox really reads
// (its network is loopback and the egress bridge); at the limit the kernel
// makes senders wait and prunes receive queues, it kills nothing.
func tcpLimitV1(memoryBytes int64) string {
	if memoryBytes <= 0 {
		return "-1"
	}
	return strconv.FormatInt(memoryBytes/4, 10)
}

// Update writes new limits to an existing group (a zero field: no limit).
// Errors name the control file that refused.
func (g *Group) Update(l Limits) error {
	if l.MemoryBytes < 0 || l.Pids < 0 || l.CPUPercent < 0 {
		return fmt.Errorf("update cgroup %s: negative limit %+v", g.name, l)
	}
	return g.apply(l)
}

// apply writes the limits.
func (g *Group) apply(l Limits) error {
	for _, s := range settings(g.h.version, l) {
		if slices.Contains(g.h.missing, s.ctl) {
			continue // not delegated: see Problems
		}
		p := filepath.Join(g.ctl[s.ctl], s.file)
		if s.optional {
			if _, err := os.Stat(p); errors.Is(err, fs.ErrNotExist) {
				continue
			}
		}
		if err := writeFile(p, s.value); err != nil {
			return fmt.Errorf("create cgroup %s/%s: %w", s.ctl, g.name, err)
		}
	}
	return nil
}

// writeFile writes value to an existing control file.
func writeFile(path, value string) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, werr := f.WriteString(value)
	cerr := f.Close()
	if werr != nil {
		return fmt.Errorf("write %s: %w", path, werr)
	}
	return cerr
}
