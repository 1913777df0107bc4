package worker

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
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
	for _, d := range dirs {
		readInto(got, "memory", filepath.Join(d, "memory.max"))
		readInto(got, "memory", filepath.Join(d, "memory.limit_in_bytes"))
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
	var problems []string
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

// inCgroups reports whether pid's /proc/PID/cgroup places it in every one of
// dirs (each dir ends with the process's path in that hierarchy).
func inCgroups(procRoot string, pid int, dirs []string) bool {
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
	for _, d := range dirs {
		found := false
		for _, p := range paths {
			if strings.HasSuffix(d, p) {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
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
	var outside []string
	for _, pid := range pids {
		if !inCgroups(procRoot, pid, view.Cgroups) && alive(procRoot, pid) {
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
func checkMounts(procRoot string, pids []int) []string {
	if len(pids) == 0 {
		return []string{"no process of the sandbox could be looked at from the host, so its mounts were not checked"}
	}
	var problems []string
	seen := map[string]bool{}
	for _, pid := range pids {
		mounts, err := mountinfo.Read(procRoot, pid)
		if err != nil {
			continue // it ended meanwhile
		}
		for _, m := range mountinfo.Visible(mounts) {
			why := writableProblem(m)
			if why != "" && !seen[m.Point] {
				seen[m.Point] = true
				problems = append(problems, fmt.Sprintf("the sandbox can write to %s (%s): %s", m.Point, m.FSType, why))
			}
		}
	}
	return problems
}

// writableProblem says what is wrong with a mount a sandbox sees, or "".
func writableProblem(m mountinfo.Mount) string {
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
	case m.FSType == "devtmpfs" && strings.HasPrefix(m.Point, "/dev/") && strings.Count(m.Point, "/") == 2:
		// One of bubblewrap's device nodes (/dev/null, /dev/tty…).
	default:
		return "a writable mount that is not the sandbox's own capped tmpfs"
	}
	return ""
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
