package cgroup

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"openvibe.network/agentsandbox/internal/mountinfo"
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
	ctlCPUAcct = "cpuacct"
)

// required are the controllers every sandbox group needs; the v1 freezer is
// optional (Kill works without it, only less atomically), and so is the v1
// cpuacct (without it Usage has no CPU time).
var required = []string{ctlMemory, ctlPids, ctlCPU}

// layout is what detection decided: the version and, per controller, the
// directory its hierarchy is mounted at (v2: the same directory for all).
type layout struct {
	version int
	dirs    map[string]string
	// roots are, on v1, the cgroup each hierarchy's mount shows at its
	// mount point ("/" unless in a cgroup namespace or a bind mount).
	roots map[string]string
}

// cgroupMounts returns the cgroup and cgroup2 mounts of a mountinfo text,
// in order.
func cgroupMounts(text string) []mountinfo.Mount {
	var out []mountinfo.Mount
	for _, m := range mountinfo.Parse(text) {
		if m.FSType == "cgroup" || m.FSType == "cgroup2" {
			out = append(out, m)
		}
	}
	return out
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
func detect(table, root string, read func(path string) ([]byte, error)) (layout, error) {
	root = filepath.Clean(root)
	mounts := cgroupMounts(table)
	var v2missing string
	for _, preferRoot := range []bool{true, false} {
		for _, m := range mounts {
			if m.FSType != "cgroup2" || !under(m.Point, root) || (m.Point == root) != preferRoot {
				continue
			}
			b, err := read(filepath.Join(m.Point, "cgroup.controllers"))
			if err != nil {
				continue
			}
			have := strings.Fields(string(b))
			missing := firstMissing(have)
			if missing == "" {
				dirs := map[string]string{}
				for _, c := range required {
					dirs[c] = m.Point
				}
				return layout{version: 2, dirs: dirs}, nil
			}
			if m.Point == root {
				v2missing = missing
			}
		}
	}
	dirs, roots := map[string]string{}, map[string]string{}
	for _, m := range mounts {
		if m.FSType != "cgroup" || !under(m.Point, root) {
			continue
		}
		for _, c := range append(slices.Clone(required), ctlFreezer, ctlCPUAcct) {
			if _, done := dirs[c]; !done && slices.Contains(m.SuperOptions, c) {
				dirs[c], roots[c] = m.Point, m.Root
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
	return layout{version: 1, dirs: dirs, roots: roots}, nil
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
