package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"openvibe.network/agentsandbox/internal/mountinfo"
)

// wipeTimeout bounds each step of a wipe that waits for the kernel.
const wipeTimeout = 10 * time.Second

// wipe ends b for why: it kills every process of its cgroup, waits for
// bubblewrap, detaches egress, unmounts and removes its host directory and
// removes its cgroup (removeAll), then verifies that no process of the slot
// uid, no mount, no cgroup and no file of the sandbox is left. The slot is
// freed only when that is verified; otherwise it stays out of use, the
// failure is logged at error level, and the janitor keeps retrying.
func (r *Runtime) wipe(b *sandboxState, why string) WipeReport {
	start := time.Now()
	b.setReason(why)
	if b.timer != nil {
		b.timer.Stop()
	}
	ctx, cancel := context.WithTimeout(context.Background(), wipeTimeout)
	defer cancel()
	problems := removeAll(ctx, b)
	b.opts.Image.release()
	rep := WipeReport{Leftovers: r.leftoversSettled(b)}
	rep.Verified = len(rep.Leftovers) == 0
	rep.Duration = time.Since(start)
	r.mu.Lock()
	if rep.Verified {
		b.slot.current = nil
	} else {
		b.slot.broken = strings.Join(rep.Leftovers, "; ")
	}
	r.mu.Unlock()
	close(b.wiped)
	if r.cfg.OnWipe != nil {
		r.cfg.OnWipe(why, rep)
	}
	if rep.Verified {
		r.wakePool() // a slot is free
	}
	if !rep.Verified {
		r.log.Error("sandbox wipe NOT verified; slot kept out of use", "sandbox", b.id, "slot", b.slot.index,
			"uid", b.slot.uid, "reason", why, "leftovers", rep.Leftovers, "problems", problems)
		r.wakeJanitor()
	} else {
		r.log.Info("sandbox wiped", "sandbox", b.id, "slot", b.slot.index, "reason", why,
			"lifetime_ms", time.Since(b.info.CreatedAt).Milliseconds(), "duration_ms", durationMS(rep.Duration))
	}
	return rep
}

// durationMS is d in milliseconds, with microsecond precision, for logs.
func durationMS(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// removeAll kills b's processes and removes every part of it the runtime
// made, returning what went wrong. Each step is safe to repeat. The host
// directory and the cgroup are removed at once: each mostly waits for the
// kernel (an unmount, a cgroup directory per hierarchy on v1).
func removeAll(ctx context.Context, b *sandboxState) []string {
	problems := killBox(ctx, b)
	if b.detach != nil {
		b.detach()
	}
	if b.control != nil {
		b.control.Close()
	}
	var dirErr, groupErr error
	var wg sync.WaitGroup
	if b.dirMade {
		wg.Go(func() { dirErr = removeBoxDir(b.dir) })
	}
	if b.group != nil {
		groupErr = b.group.Remove()
	}
	wg.Wait()
	for _, err := range []error{dirErr, groupErr} {
		if err != nil {
			problems = append(problems, err.Error())
		}
	}
	return problems
}

// killBox kills every process of b. The sandbox's own processes go first,
// so that the bubblewrap monitor (the runtime's child) reaps the sandbox's
// pid 1 and exits by itself, leaving no orphan for the host's init to reap;
// then the cgroup is killed whole, for anything left.
func killBox(ctx context.Context, b *sandboxState) []string {
	var problems []string
	if b.group == nil {
		return nil
	}
	monitor := 0
	if b.cmd != nil && b.cmd.Process != nil {
		monitor = b.cmd.Process.Pid
	}
	select {
	case <-b.exited:
		// Bubblewrap reaped the sandbox's pid 1, whose end killed and
		// waited for every other process of its pid namespace: nothing is
		// left to kill first (Kill still checks the whole cgroup).
		monitor = 0
	default:
	}
	if monitor != 0 {
		killOthers(b, monitor)
	}
	if err := b.group.Kill(ctx); err != nil {
		problems = append(problems, err.Error())
	}
	if monitor != 0 {
		select {
		case <-b.exited:
		case <-ctx.Done():
			problems = append(problems, "bubblewrap did not exit")
		}
	}
	return problems
}

// killOthers kills every process of b's cgroup but bubblewrap's monitor, and
// waits a little for the monitor to exit once the sandbox's pid 1 is gone.
func killOthers(b *sandboxState, monitor int) {
	pids, err := b.group.Pids()
	if err != nil {
		return // Kill reads the group again, and says what is wrong
	}
	others := 0
	for _, pid := range pids {
		if pid != monitor {
			others++
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	if others > 0 {
		select {
		case <-b.exited:
		case <-time.After(2 * time.Second):
		}
	}
}

// leftoversSettled returns b's leftovers, rechecking for a little while as long as
// something is left (the kernel may still be reaping killed processes).
func (r *Runtime) leftoversSettled(b *sandboxState) []string {
	deadline := time.Now().Add(2 * time.Second)
	for d := 100 * time.Microsecond; ; d = min(2*d, 50*time.Millisecond) {
		left := r.leftovers(b)
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(d)
	}
}

// leftovers lists what is left of b: processes of its uid or cgroup, its
// cgroup directories, mounts under its host directory, the directory. The
// scan of /proc, the longest check, runs beside the others; the mount table
// is read only when the directory is still there.
func (r *Runtime) leftovers(b *sandboxState) []string {
	var pids []int
	var pidsErr error
	var wg sync.WaitGroup
	wg.Go(func() { pids, pidsErr = uidProcesses(b.slot.uid) })
	var rest []string
	if b.group != nil && b.group.Exists() {
		rest = append(rest, "cgroup "+strings.Join(b.group.Paths(), ","))
	}
	// A mount can be left only under a directory that is: rmdir refuses
	// a mount point.
	if _, err := os.Lstat(b.dir); !errors.Is(err, fs.ErrNotExist) {
		mounts, err := mountsUnder(b.dir)
		if err != nil {
			rest = append(rest, "cannot read mounts: "+err.Error())
		}
		for _, m := range mounts {
			rest = append(rest, "mount "+m)
		}
		rest = append(rest, "directory "+b.dir)
	}
	wg.Wait()
	var out []string
	if pidsErr != nil {
		out = append(out, "cannot list processes: "+pidsErr.Error())
	}
	for _, pid := range pids {
		out = append(out, fmt.Sprintf("process %d of uid %d", pid, b.slot.uid))
	}
	return append(out, rest...)
}

// mountsWith returns the mount points in this process's mount table that
// have a path component named name.
func mountsWith(name string) ([]string, error) {
	mounts, err := mountinfo.Read("/proc", os.Getpid())
	if err != nil {
		return nil, err
	}
	var out []string
	for _, m := range mounts {
		if slices.Contains(strings.Split(m.Point, "/"), name) {
			out = append(out, m.Point)
		}
	}
	return out, nil
}

// mountsUnder returns the mount points in this process's mount table at or
// below dir.
func mountsUnder(dir string) ([]string, error) {
	mounts, err := mountinfo.Read("/proc", os.Getpid())
	if err != nil {
		return nil, err
	}
	var out []string
	for _, m := range mounts {
		if m.Point == dir || strings.HasPrefix(m.Point, dir+"/") {
			out = append(out, m.Point)
		}
	}
	return out, nil
}
