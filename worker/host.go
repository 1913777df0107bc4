package worker

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"openvibe.network/agentsandbox"
	"openvibe.network/agentsandbox/internal/mountinfo"
	"openvibe.network/agentsandbox/sandbox"
)

// checkCgroups reads the limit files of the sandbox's cgroup directories
// (v2: memory.max, pids.max, cpu.max; v1: memory.limit_in_bytes, pids.max,
// cpu.cfs_quota_us/cpu.cfs_period_us) and returns a problem for each limit
// that is missing or differs from want.
func checkCgroups(dirs []string, want agentsandbox.Limits) []string {
	if len(dirs) == 0 {
		return []string{"the runtime names no cgroup for the sandbox"}
	}
	got := map[string]int64{}
	var problems []string
	for _, d := range dirs {
		readInto(got, "memory", filepath.Join(d, "memory.max"))
		readInto(got, "memory", filepath.Join(d, "memory.limit_in_bytes"))
		problems = append(problems, checkTCPLimitV1(d, int64(want.MemoryMB)<<20)...)
		readInto(got, "pids", filepath.Join(d, "pids.max"))
		if b, err := os.ReadFile(filepath.Join(d, "cpu.max")); err == nil {
			if q, p, ok := strings.Cut(strings.TrimSpace(string(b)), " "); ok {
				setCPU(got, q, p)
			}
		}
		if q, err := os.ReadFile(filepath.Join(d, "cpu.cfs_quota_us")); err == nil {
			if p, err := os.ReadFile(filepath.Join(d, "cpu.cfs_period_us")); err == nil {
				setCPU(got, strings.TrimSpace(string(q)), strings.TrimSpace(string(p)))
			}
		}
	}
	wants := []struct {
		key, what string
		want      int64
	}{
		{"memory", "memory limit (bytes)", int64(want.MemoryMB) << 20},
		{"pids", "pids limit", int64(want.Pids)},
		{"cpu", "cpu limit (percent of a core)", int64(want.CPUPercent)},
	}
	for _, w := range wants {
		v, ok := got[w.key]
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("the sandbox's cgroup has no %s", w.what))
		case v != w.want:
			problems = append(problems, fmt.Sprintf("the sandbox's cgroup %s is %d, configured %d", w.what, v, w.want))
		}
	}
	return problems
}

func readInto(got map[string]int64, key, path string) {
	b, err := os.ReadFile(path)
	if err != nil {
		return
	}
	if n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil {
		got[key] = n
	}
}

func setCPU(got map[string]int64, quota, period string) {
	q, err1 := strconv.ParseInt(quota, 10, 64)
	p, err2 := strconv.ParseInt(period, 10, 64)
	if err1 == nil && err2 == nil && p > 0 && q > 0 {
		got["cpu"] = q * 100 / p
	}
}

// processesOf returns the pids of every host process running as uid.
func processesOf(procRoot string, uid int) ([]int, error) {
	ents, err := os.ReadDir(procRoot)
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if u, ok := uidOf(procRoot, pid); ok && u == uid {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// uidOf returns the real uid of pid, false when the process is gone.
func uidOf(procRoot string, pid int) (int, bool) {
	b, err := os.ReadFile(filepath.Join(procRoot, strconv.Itoa(pid), "status"))
	if err != nil {
		return 0, false
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, "Uid:"); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				u, err := strconv.Atoi(f[0])
				return u, err == nil
			}
		}
	}
	return 0, false
}

// checkTCPLimitV1 returns the problem with a cgroup v1 memory directory
// d's bound on TCP's socket buffers (v1 counts them apart from the memory
// limit, and only once memory.kmem.tcp.limit_in_bytes is set): it must be
// a quarter of the memory limit. Other directories have none.
func checkTCPLimitV1(d string, memory int64) []string {
	if _, err := os.Stat(filepath.Join(d, "memory.limit_in_bytes")); err != nil {
		return nil // not a v1 memory directory
	}
	got := map[string]int64{}
	readInto(got, "tcp", filepath.Join(d, "memory.kmem.tcp.limit_in_bytes"))
	v, ok := got["tcp"]
	switch {
	case !ok:
		return []string{"the sandbox's cgroup (v1) has no memory.kmem.tcp.limit_in_bytes: its TCP buffers are memory no limit bounds; use cgroup v2"}
	case v != memory/4:
		return []string{fmt.Sprintf("the sandbox's cgroup TCP buffer limit (memory.kmem.tcp.limit_in_bytes) is %d, want %d", v, memory/4)}
	}
	return nil
}

// inCgroups reports whether pid's /proc/PID/cgroup places it in every one of
// dirs: the process's path in that hierarchy is the end of the directory,
// or the path want gives for it (see cgroupPaths; "" when unknown).
func inCgroups(procRoot string, pid int, dirs, want []string) bool {
	b, err := os.ReadFile(filepath.Join(procRoot, strconv.Itoa(pid), "cgroup"))
	if err != nil {
		return false
	}
	var paths []string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if f := strings.SplitN(l, ":", 3); len(f) == 3 && len(f[2]) > 1 {
			paths = append(paths, f[2])
		}
	}
	for i, d := range dirs {
		if !slices.ContainsFunc(paths, func(p string) bool { return strings.HasSuffix(d, p) || p == want[i] }) {
			return false
		}
	}
	return true
}

// cgroupPaths returns, for each cgroup directory, the path a process in it
// shows in /proc/PID/cgroup when the directory's mount is a bind of a
// subtree (its root field is not "/": a container's own cgroup, as
// podman's on cgroup v1 without a cgroup namespace): that root joined with
// the directory below the mount; "" for a directory on no such mount.
func cgroupPaths(procRoot string, dirs []string) []string {
	out := make([]string, len(dirs))
	b, err := os.ReadFile(filepath.Join(procRoot, "self", "mountinfo"))
	if err != nil {
		return out
	}
	mounts := mountinfo.Parse(string(b))
	for i, d := range dirs {
		var best *mountinfo.Mount
		for j, m := range mounts {
			if (m.FSType == "cgroup" || m.FSType == "cgroup2") && (d == m.Point || strings.HasPrefix(d, m.Point+"/")) &&
				(best == nil || len(m.Point) > len(best.Point)) {
				best = &mounts[j]
			}
		}
		if best != nil && best.Root != "/" {
			out[i] = path.Join(best.Root, strings.TrimPrefix(d, best.Point))
		}
	}
	return out
}

// alive reports whether pid is still a running process: not gone, and not
// a zombie (a dead process waiting to be reaped has left its cgroup), so a
// process that ended between the listing and the look at its cgroup (a
// probe's children killed at its timeout) is not taken for one outside.
func alive(procRoot string, pid int) bool {
	b, err := os.ReadFile(filepath.Join(procRoot, strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	// The state follows the command, which is in parentheses and may hold any.
	i := strings.LastIndexByte(string(b), ')')
	return i >= 0 && i+2 < len(b) && b[i+2] != 'Z' && b[i+2] != 'X'
}

// checkMembers finds, independently of the runtime, every host process of
// the sandbox's uid and returns them, with a problem unless there is at
// least one and each is inside the sandbox's cgroups (so its limits bound
// them all).
func checkMembers(procRoot string, view HostView) ([]int, []string) {
	pids, err := processesOf(procRoot, view.UID)
	if err != nil {
		return nil, []string{err.Error()}
	}
	if len(pids) == 0 {
		return nil, []string{fmt.Sprintf("no process of the sandbox (host uid %d) was found while it ran", view.UID)}
	}
	want := cgroupPaths(procRoot, view.Cgroups)
	var outside []string
	for _, pid := range pids {
		if !inCgroups(procRoot, pid, view.Cgroups, want) && alive(procRoot, pid) {
			outside = append(outside, strconv.Itoa(pid))
		}
	}
	if len(outside) > 0 {
		return pids, []string{fmt.Sprintf("processes of the sandbox outside its cgroup: %s", strings.Join(outside, ", "))}
	}
	return pids, nil
}

// checkWipe returns a problem for each sign that the wipe left something:
// the runtime's own report, then (independently) one of the sandbox's
// processes (pids, seen before the wipe) still running as its uid, a
// directory or cgroup left.
func checkWipe(rep sandbox.WipeReport, err error, view HostView, viewErr error, pids []int, procRoot string) []string {
	var problems []string
	switch {
	case err != nil:
		problems = append(problems, fmt.Sprintf("the wipe failed: %v", err))
	case !rep.Verified:
		problems = append(problems, fmt.Sprintf("the runtime did not verify the wipe (left: %s)", strings.Join(rep.Leftovers, ", ")))
	}
	if viewErr != nil {
		return append(problems, fmt.Sprintf("cannot look at the sandbox from the host: %v", viewErr))
	}
	for _, pid := range pids {
		if u, ok := uidOf(procRoot, pid); ok && u == view.UID {
			problems = append(problems, fmt.Sprintf("process %d of the sandbox (host uid %d) is still running", pid, view.UID))
		}
	}
	for _, d := range append(append([]string{}, view.Dirs...), view.Cgroups...) {
		if _, err := os.Stat(d); !errors.Is(err, fs.ErrNotExist) {
			problems = append(problems, fmt.Sprintf("%s is still there after the wipe", d))
		}
	}
	if len(view.Dirs) == 0 || len(view.Cgroups) == 0 {
		problems = append(problems, "the runtime names no directory or cgroup of the sandbox to look for")
	}
	return problems
}

// sandboxProcesses returns the pids that live inside the sandbox: those
// whose mount namespace is not this process's (bubblewrap's monitor, also
// in the sandbox's cgroup, stays in the host's namespaces).
func sandboxProcesses(procRoot string, pids []int) []int {
	self, err := os.Readlink(filepath.Join(procRoot, "self", "ns", "mnt"))
	if err != nil {
		return nil
	}
	var out []int
	for _, pid := range pids {
		ns, err := os.Readlink(filepath.Join(procRoot, strconv.Itoa(pid), "ns", "mnt"))
		if err == nil && ns != self && !slices.Contains(out, pid) {
			out = append(out, pid)
		}
	}
	return out
}

// checkMounts reads, from the host, the mount table every sandbox process
// sees, and returns a problem for each mount it may write that is not one
// of the sandbox's own capped file systems: a tmpfs with a size and an
// inode cap, a devpts with a pty cap, its /proc, or a bubblewrap device
// node. It is a problem too when no process could be looked at.
func checkMounts(procRoot string, pids []int, dirs []string) []string {
	if len(pids) == 0 {
		return []string{"no process of the sandbox could be looked at from the host, so its mounts were not checked"}
	}
	var problems []string
	seen := map[string]bool{}
	own := ownOverlays(procRoot, dirs)
	for _, pid := range pids {
		mounts, err := mountinfo.Read(procRoot, pid)
		if err != nil {
			continue // it ended meanwhile
		}
		for _, m := range mountinfo.Visible(mounts) {
			why := writableProblem(m, own)
			if why != "" && deviceNode(procRoot, pid, m) {
				why = ""
			}
			if why != "" && !seen[m.Point] {
				seen[m.Point] = true
				problems = append(problems, fmt.Sprintf("the sandbox can write to %s (%s): %s", m.Point, m.FSType, why))
			}
		}
	}
	return problems
}

// ownOverlays returns the devices of the overlays mounted in this
// process's mount table at or below one of dirs, the sandbox's host
// directories: an image sandbox's root, whose upper layer the runtime puts
// on the sandbox's capped tmpfs (its options name its layers by
// /proc/self/fd paths, so the sandbox's mount table shows no host path).
func ownOverlays(procRoot string, dirs []string) map[string]bool {
	mounts, err := mountinfo.Read(procRoot, os.Getpid())
	if err != nil {
		return nil
	}
	own := map[string]bool{}
	for _, m := range mounts {
		for _, d := range dirs {
			if m.FSType == "overlay" && strings.HasPrefix(m.Point, d+"/") {
				own[m.Dev] = true
			}
		}
	}
	return own
}

// writableProblem says what is wrong with a mount a sandbox sees, or "";
// own are the devices of the overlays in the sandbox's host directories
// (ownOverlays): an image's root is one of them.
func writableProblem(m mountinfo.Mount, own map[string]bool) string {
	switch {
	case m.ReadOnly():
		return ""
	case m.FSType == "tmpfs":
		if !m.Has("size") || !m.Has("nr_inodes") {
			return "a tmpfs without a size and an inode cap"
		}
	case m.FSType == "devpts":
		if !m.Has("max") {
			return "a devpts without a pty cap"
		}
	case m.FSType == "proc" && m.Point == "/proc":
	case m.FSType == "overlay" && m.Point == "/":
		if !own[m.Dev] {
			return "an overlay that is not the one in the sandbox's own directory"
		}
	case m.FSType == "devtmpfs" && strings.HasPrefix(m.Point, "/dev/") && strings.Count(m.Point, "/") == 2:
		// One of bubblewrap's device nodes (/dev/null, /dev/tty…).
	default:
		return "a writable mount that is not the sandbox's own capped tmpfs"
	}
	return ""
}

// deviceNode reports whether m is one of bubblewrap's device nodes
// (/dev/null, /dev/tty…) bound from a container's /dev, which is a tmpfs:
// the mount is the node alone, and writes to a character device never fill
// the tmpfs it sits on. It looks at the node through pid's root.
func deviceNode(procRoot string, pid int, m mountinfo.Mount) bool {
	if m.FSType != "tmpfs" || !strings.HasPrefix(m.Point, "/dev/") || strings.Count(m.Point, "/") != 2 || m.Root != "/"+path.Base(m.Point) {
		return false
	}
	st, err := os.Stat(filepath.Join(procRoot, strconv.Itoa(pid), "root", m.Point))
	return err == nil && st.Mode()&fs.ModeCharDevice != 0
}

// checkFileLimits reads, from the host, the descriptor limit of every
// sandbox process and returns a problem for each whose soft or hard limit
// is not max.
func checkFileLimits(procRoot string, pids []int, max int) []string {
	var problems []string
	want := strconv.Itoa(max)
	read := 0
	for _, pid := range pids {
		b, err := os.ReadFile(filepath.Join(procRoot, strconv.Itoa(pid), "limits"))
		if err != nil {
			continue
		}
		read++
		for _, l := range strings.Split(string(b), "\n") {
			if rest, ok := strings.CutPrefix(l, "Max open files"); ok {
				if f := strings.Fields(rest); len(f) < 2 || f[0] != want || f[1] != want {
					problems = append(problems, fmt.Sprintf("sandbox process %d may open %s files (hard %s), not %d", pid, at(f, 0), at(f, 1), max))
				}
			}
		}
	}
	if read == 0 {
		problems = append(problems, "the descriptor limit of no sandbox process could be read from the host")
	}
	return problems
}

// at returns f[i], or "?".
func at(f []string, i int) string {
	if i < len(f) {
		return f[i]
	}
	return "?"
}
