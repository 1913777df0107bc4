package sandbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// janitorInterval is how often the janitor retries what is left to clean up.
const janitorInterval = 2 * time.Second

// randomID returns 20 hex digits.
func randomID() string {
	var raw [10]byte
	_, _ = rand.Read(raw[:])
	return hex.EncodeToString(raw[:])
}

// runJanitor retries, until the runtime closes, whatever could not be
// cleaned up at once: the leftovers of dead runtimes, and the sandboxes of
// slots whose wipe could not be verified (a slot goes back in use once
// nothing of its sandbox is left). It sleeps while there is nothing to do.
func (r *Runtime) runJanitor() {
	defer close(r.janitorDone)
	for {
		pending := r.hasPending()
		var tick <-chan time.Time
		if pending {
			t := time.NewTimer(janitorInterval)
			tick = t.C
			defer t.Stop()
		}
		select {
		case _, ok := <-r.janitor:
			if !ok {
				return
			}
		case <-tick:
		}
		r.removeStale()
		r.retryBroken()
	}
}

// wakeJanitor tells the janitor there is work.
func (r *Runtime) wakeJanitor() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	select {
	case r.janitor <- struct{}{}:
	default:
	}
}

// hasPending reports whether a dead runtime's leftovers or a broken slot
// wait for the janitor.
func (r *Runtime) hasPending() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.stale) > 0 {
		return true
	}
	for _, s := range r.slots {
		if s.broken != "" {
			return true
		}
	}
	return false
}

// removeStale removes what runtimes that ended without Close left behind (a
// crashed or killed worker: its sandboxes died with it, by the parent-death
// signal, but their mounts, cgroups and directories stay). A runtime is
// dead when its lock under runtimeLockDir is free, however recently it
// died. For each dead one it detaches every mount under its directory,
// kills whatever is still in its cgroups and removes them, then removes its
// directory and lock. What cannot be removed yet is retried by the janitor.
func (r *Runtime) removeStale() {
	names := map[string]bool{}
	dirs, _ := filepath.Glob(filepath.Join(r.cfg.StateDir, "rt-*"))
	for _, d := range dirs {
		names[filepath.Base(d)] = true
	}
	groups, err := r.base.Groups()
	if err != nil {
		r.log.Warn("cannot list cgroups to remove stale ones", "err", err)
	}
	for _, g := range groups {
		if strings.HasPrefix(g, "rt-") {
			names[g] = true
		}
	}
	locks, _ := filepath.Glob(filepath.Join(runtimeLockDir, "rt-*.lock"))
	for _, l := range locks {
		names[strings.TrimSuffix(filepath.Base(l), ".lock")] = true
	}
	var left []string
	for name := range names {
		if name == r.name {
			continue
		}
		switch outcome, err := r.removeRuntime(name); {
		case err != nil:
			r.log.Warn("cannot yet remove what a runtime that ended without closing left; retrying", "runtime", name, "err", err)
			left = append(left, name)
		case outcome == runtimeRemoved:
			r.log.Warn("removed what a runtime that ended without closing left", "runtime", name)
		}
	}
	r.mu.Lock()
	r.stale = left
	r.mu.Unlock()
}

// staleOutcome is what removeRuntime did with another runtime.
type staleOutcome int

const (
	// runtimeAlive: its lock is held, so it was left alone.
	runtimeAlive staleOutcome = iota
	// runtimeRemoved: it was dead, and nothing of it is left.
	runtimeRemoved
	// runtimeLeft: it is dead, and something of it could not be removed
	// yet (the error says what).
	runtimeLeft
)

// removeRuntime removes the leftovers of runtime name when it is dead (its
// lock is free): its mounts, wherever they are (every mount with a path
// component of its name, so a runtime with another StateDir is found too),
// its cgroups, its directory (where its lock records it: see recordDir;
// else in this runtime's StateDir) and its lock. A live runtime is left
// alone.
func (r *Runtime) removeRuntime(name string) (staleOutcome, error) {
	lockPath := filepath.Join(runtimeLockDir, name+".lock")
	lock, err := lockFile(lockPath)
	if err != nil {
		return runtimeLeft, fmt.Errorf("lock %s: %w", lockPath, err)
	}
	if lock == nil {
		return runtimeAlive, nil
	}
	defer lock.Close()
	dir := recordedDir(lock, name, r.cfg.StateDir)
	if old, err := lockFile(filepath.Join(dir, "lock")); err == nil && old == nil {
		return runtimeAlive, nil // a runtime of an earlier version, whose lock is in its directory
	} else if old != nil {
		old.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), wipeTimeout)
	defer cancel()
	var errs []error
	if err := unmountNamed(name, dir); err != nil {
		errs = append(errs, err)
	}
	if err := r.base.RemoveTree(ctx, name); err != nil {
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		if err := removeOwnTree(dir); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return runtimeLeft, errors.Join(errs...)
	}
	if err := os.Remove(lockPath); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return runtimeLeft, err
	}
	return runtimeRemoved, nil
}

// recordDir writes a runtime's directory (absolute) into its lock file, for
// a runtime that finds it dead to know where it was, whatever its own
// StateDir.
func recordDir(lock *os.File, dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("record the runtime's directory: %w", err)
	}
	if err := lock.Truncate(0); err != nil {
		return fmt.Errorf("record the runtime's directory: %w", err)
	}
	if _, err := lock.WriteAt([]byte(abs+"\n"), 0); err != nil {
		return fmt.Errorf("record the runtime's directory: %w", err)
	}
	return nil
}

// recordedDir is the directory the lock of runtime name records (see
// recordDir): a clean absolute path whose last component is name. A lock
// without one (a runtime of an earlier build) gives the directory of that
// name in stateDir.
func recordedDir(lock *os.File, name, stateDir string) string {
	buf := make([]byte, 4096)
	n, _ := lock.ReadAt(buf, 0)
	dir := strings.TrimSuffix(string(buf[:n]), "\n")
	if filepath.IsAbs(dir) && filepath.Clean(dir) == dir && filepath.Base(dir) == name {
		return dir
	}
	return filepath.Join(stateDir, name)
}

// unmountNamed detaches every mount at or below dir and every mount whose
// path has a component named name (a runtime's rt-… name, random enough to
// be its own): those of a runtime whatever its state directory.
func unmountNamed(name, dir string) error {
	mounts, err := mountsUnder(dir)
	if err != nil {
		return fmt.Errorf("unmount %s: %w", dir, err)
	}
	named, err := mountsWith(name)
	if err != nil {
		return fmt.Errorf("unmount %s: %w", name, err)
	}
	return unmountAll(append(mounts, named...))
}

// retryBroken tries again to wipe the sandbox of every slot kept out of use,
// and puts a slot back in use once nothing of its sandbox is left.
func (r *Runtime) retryBroken() {
	r.mu.Lock()
	var broken []*sandboxState
	for _, s := range r.slots {
		if s.broken != "" && s.current != nil {
			broken = append(broken, s.current)
		}
	}
	r.mu.Unlock()
	for _, b := range broken {
		ctx, cancel := context.WithTimeout(context.Background(), wipeTimeout)
		_ = removeAll(ctx, b)
		cancel()
		left := r.leftovers(b)
		r.mu.Lock()
		if len(left) == 0 {
			b.slot.current, b.slot.broken = nil, ""
		} else {
			b.slot.broken = strings.Join(left, "; ")
		}
		r.mu.Unlock()
		if len(left) == 0 {
			r.log.Info("slot back in use: nothing of its sandbox is left", "sandbox", b.id, "slot", b.slot.index, "uid", b.slot.uid)
			r.wakePool()
		}
	}
}
