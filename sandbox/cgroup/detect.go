package cgroup

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// ErrUnavailable is wrapped by Detect and DetectAt when no usable cgroup
// hierarchy (v2 with, or v1 mounts of, the required controllers) is found.
var ErrUnavailable = errors.New("no usable cgroup hierarchy")

// Controller names.
const (
	ctlMemory  = "memory"
	ctlPids    = "pids"
	ctlCPU     = "cpu"
	ctlFreezer = "freezer"
)

// required are the controllers every sandbox group needs; the v1 freezer is
// optional (Kill works without it, only less atomically).
var required = []string{ctlMemory, ctlPids, ctlCPU}

// mountPoint is one cgroup filesystem mount from /proc/self/mountinfo.
type mountPoint struct {
	dir    string
	fstype string   // "cgroup" or "cgroup2"
	opts   []string // super options ("rw", "memory", "cpu", ...)
}

// layout is what detection decided: the version and, per controller, the
// directory its hierarchy is mounted at (v2: the same directory for all).
type layout struct {
	version int
	dirs    map[string]string
}

// parseMountInfo returns the cgroup and cgroup2 mounts of a
// /proc/self/mountinfo text, in order.
func parseMountInfo(text string) []mountPoint {
	var out []mountPoint
	for _, line := range strings.Split(text, "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		if !ok {
			continue
		}
		f := strings.Fields(pre)
		g := strings.Fields(post)
		if len(f) < 5 || len(g) < 3 || (g[0] != "cgroup" && g[0] != "cgroup2") {
			continue
		}
		out = append(out, mountPoint{dir: unescape(f[4]), fstype: g[0], opts: strings.Split(g[2], ",")})
	}
	return out
}

// unescape decodes the octal escapes (\040 for a space) of a mountinfo path.
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// under reports whether dir is root or inside it.
func under(dir, root string) bool {
	return dir == root || strings.HasPrefix(dir, strings.TrimSuffix(root, "/")+"/")
}

// detect decides the hierarchy from a mountinfo text, the root the mounts
// must be under, and read, which returns a file's content (used for the
// cgroup.controllers file of a v2 mount). A cgroup2 mount that offers every
// required controller wins (the one at root first); otherwise every required
// controller must have a v1 mount. It is a pure function of its inputs.
func detect(mountinfo, root string, read func(path string) ([]byte, error)) (layout, error) {
	root = filepath.Clean(root)
	mounts := parseMountInfo(mountinfo)
	var v2missing string
	for _, preferRoot := range []bool{true, false} {
		for _, m := range mounts {
			if m.fstype != "cgroup2" || !under(m.dir, root) || (m.dir == root) != preferRoot {
				continue
			}
			b, err := read(filepath.Join(m.dir, "cgroup.controllers"))
			if err != nil {
				continue
			}
			have := strings.Fields(string(b))
			missing := firstMissing(have)
			if missing == "" {
				dirs := map[string]string{}
				for _, c := range required {
					dirs[c] = m.dir
				}
				return layout{version: 2, dirs: dirs}, nil
			}
			if m.dir == root {
				v2missing = missing
			}
		}
	}
	dirs := map[string]string{}
	for _, m := range mounts {
		if m.fstype != "cgroup" || !under(m.dir, root) {
			continue
		}
		for _, c := range append(slices.Clone(required), ctlFreezer) {
			if _, done := dirs[c]; !done && slices.Contains(m.opts, c) {
				dirs[c] = m.dir
			}
		}
	}
	if len(dirs) == 0 {
		if v2missing != "" {
			return layout{}, fmt.Errorf("detect cgroups: v2 controller %q is not available at %s: %w", v2missing, root, ErrUnavailable)
		}
		return layout{}, fmt.Errorf("detect cgroups: no cgroup filesystem is mounted under %s: %w", root, ErrUnavailable)
	}
	for _, c := range required {
		if _, ok := dirs[c]; !ok {
			return layout{}, fmt.Errorf("detect cgroups: v1 controller %q is not mounted under %s: %w", c, root, ErrUnavailable)
		}
	}
	return layout{version: 1, dirs: dirs}, nil
}

// firstMissing returns the first required controller not in have, or "".
func firstMissing(have []string) string {
	for _, c := range required {
		if !slices.Contains(have, c) {
			return c
		}
	}
	return ""
}
