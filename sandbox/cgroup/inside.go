package cgroup

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"openvibe.network/agentsandbox/internal/osthread"
)

// StartInside runs start on an OS thread of its own that is in the group,
// in every hierarchy, for as long as start runs, so that a process start
// creates (exec.Cmd.Start forks from the calling thread) is born in the
// group, and so is everything it starts: nothing is migrated. It is for v1,
// where clone3's CLONE_INTO_CGROUP does not exist (on v2, use OpenDir).
//
// Moving a whole process on v1 (writing its pid into cgroup.procs) takes
// the kernel's process-wide migration lock, whose RCU grace period costs
// 5 to 15 ms a hierarchy on a quiet machine; a thread that moves itself
// ("0" into a tasks file) takes no such lock and costs tens of
// microseconds. The thread moves back where it was before start returns and
// goes back to the program's threads; if it cannot, it is parked for good
// (see osthread.Run), so that it never runs anything else from inside the
// group; the error says so, and the caller stops what start started (the
// group then cannot be removed while the parked thread is in it: its wipe
// says so, and a Kill refuses to signal the calling process).
//
// Errors: ErrUnavailable (wrapped), and start has not run, on v2 or when
// the thread's own cgroups cannot be found in the mounted hierarchies (the
// caller then starts the process itself and moves it in with Enter); the
// group's tasks file that refused the thread (start has not run); start's
// own error; the failure to move back.
func (g *Group) StartInside(start func() error) error {
	if g.h.version != 1 {
		return fmt.Errorf("start inside cgroup %s: only on v1: %w", g.name, ErrUnavailable)
	}
	return osthread.Run(func() (clean bool, err error) {
		back, err := g.threadHome()
		if err != nil {
			return true, err
		}
		if err := moveThread(g.dirs); err != nil {
			return moveThread(back) == nil, fmt.Errorf("start inside cgroup %s: %w", g.name, err)
		}
		serr := start()
		if err := moveThread(back); err != nil {
			return false, fmt.Errorf("start inside cgroup %s: the starting thread cannot leave it: %w", g.name, err)
		}
		return true, serr
	})
}

// moveThread moves the calling thread into each cgroup directory of dirs,
// in order. The error names the file that refused it.
func moveThread(dirs []string) error {
	for _, d := range dirs {
		f := filepath.Join(d, "tasks")
		if err := writeFile(f, "0"); err != nil {
			return fmt.Errorf("move thread into %s: %w", d, err)
		}
	}
	return nil
}

// threadHome returns, for each of g's directories, the directory of the
// cgroup the calling thread is in, in the same hierarchy. It fails with
// ErrUnavailable (wrapped) when a hierarchy's entry of
// /proc/thread-self/cgroup is missing or lies outside that hierarchy's
// mount.
func (g *Group) threadHome() ([]string, error) {
	b, err := os.ReadFile("/proc/thread-self/cgroup")
	if err != nil {
		return nil, fmt.Errorf("start inside cgroup %s: %w: %w", g.name, err, ErrUnavailable)
	}
	home, err := homeDirs(string(b), g)
	if err != nil {
		return nil, fmt.Errorf("start inside cgroup %s: %w: %w", g.name, err, ErrUnavailable)
	}
	return home, nil
}

// homeDirs maps the text of a /proc/PID/cgroup file ("ID:CONTROLLERS:PATH"
// lines) to the directory of its cgroup in each of g's hierarchies, in the
// order of g's directories. It is a pure function of its inputs.
func homeDirs(text string, g *Group) ([]string, error) {
	paths := map[string]string{} // controller -> path
	for _, line := range strings.Split(text, "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			paths[c] = parts[2]
		}
	}
	var out []string
	for _, dir := range g.dirs {
		c := g.firstCtl(dir)
		p, ok := paths[c]
		if !ok {
			return nil, fmt.Errorf("no %s entry in the thread's cgroups", c)
		}
		root := g.h.roots[c]
		rel, ok := strings.CutPrefix(p, strings.TrimSuffix(root, "/"))
		if !ok || (rel != "" && !strings.HasPrefix(rel, "/")) {
			return nil, fmt.Errorf("the thread's %s cgroup %s is outside the mount of %s (%s)", c, p, g.h.dirs[c], root)
		}
		out = append(out, filepath.Join(g.h.dirs[c], rel))
	}
	return out, nil
}

// firstCtl returns the first controller whose group directory is dir.
func (g *Group) firstCtl(dir string) string {
	i := slices.IndexFunc(controllers, func(c string) bool { return g.ctl[c] == dir })
	if i < 0 {
		return ""
	}
	return controllers[i]
}
