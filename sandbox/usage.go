package sandbox

import (
	"fmt"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
	"openvibe.network/agentsandbox"
)

// Usage reads what sandbox id uses now: memory, CPU time and tasks from its
// cgroup, and the bytes its writable space holds. Errors: ErrNotFound; the
// cgroup or the file system could not be read.
func (r *Runtime) Usage(id string) (agentsandbox.Usage, error) {
	b, err := r.get(id)
	if err != nil {
		return agentsandbox.Usage{}, err
	}
	g, err := b.group.Usage()
	if err != nil {
		return agentsandbox.Usage{}, fmt.Errorf("usage: %w", err)
	}
	// The tmpfs's own counters: the directory is the mount's root, which
	// only root can replace.
	var st unix.Statfs_t
	if err := unix.Statfs(filepath.Join(b.dir, boxFS), &st); err != nil {
		return agentsandbox.Usage{}, fmt.Errorf("usage: workspace: %w", err)
	}
	ev, err := b.group.Events()
	if err != nil {
		return agentsandbox.Usage{}, fmt.Errorf("usage: %w", err)
	}
	return agentsandbox.Usage{
		MemoryBytes: g.MemoryBytes, MemoryPeakBytes: g.PeakBytes, CPUSeconds: g.CPUSeconds, Pids: g.Pids,
		OOMKills: ev.OOMKills, WorkspaceBytes: int64(st.Blocks-st.Bfree) * st.Bsize,
	}, nil
}

// Extend sets sandbox id's time box to total, counted from when it first
// accepted commands as every time box is, and returns its new Info. total
// may shorten the time box, but not to an end already past. Errors:
// ErrNotFound (the time box may just have ended); total outside
// MinTimeBox..agentsandbox.MaxTimeBox or already over (ErrInvalid).
func (r *Runtime) Extend(id string, total time.Duration) (Info, error) {
	if total < MinTimeBox || total > agentsandbox.MaxTimeBox {
		return Info{}, fmt.Errorf("extend: time box %v is not within %v..%v: %w", total, MinTimeBox, agentsandbox.MaxTimeBox, ErrInvalid)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	b, ok := r.boxes[id]
	if !ok || !r.sees(b) {
		return Info{}, ErrNotFound
	}
	end := b.readyAt.Add(total)
	left := end.Sub(r.cfg.Now())
	if left <= 0 {
		return Info{}, fmt.Errorf("extend: the sandbox has run %v, longer than a time box of %v: %w",
			r.cfg.Now().Sub(b.readyAt).Round(time.Second), total, ErrInvalid)
	}
	if !b.timer.Stop() {
		return Info{}, ErrNotFound // it fired: the sandbox is ending
	}
	b.timer.Reset(left)
	b.info.ExpiresAt = end
	r.log.Info("sandbox time box changed", "sandbox", id, "time_box_s", total.Seconds(), "left_s", left.Seconds())
	return b.info, nil
}
