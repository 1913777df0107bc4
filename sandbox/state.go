package sandbox

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// prepareDir makes the runtime's own directory under StateDir: the init
// binary (so the unprivileged sandbox uid can read it, wherever the original
// lives) and the generated /etc files.
func (r *Runtime) prepareDir() error {
	if err := ensureTraversable(r.cfg.StateDir); err != nil {
		return err
	}
	r.removeStale()
	r.removeStaleGroups()
	dir, err := os.MkdirTemp(r.cfg.StateDir, "rt-")
	if err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	r.dir = dir
	if err := os.Chmod(dir, 0o755); err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	r.dirLock, err = lockFile(filepath.Join(dir, "lock"))
	switch {
	case err != nil:
		return fmt.Errorf("state dir: lock: %w", err)
	case r.dirLock == nil:
		return fmt.Errorf("state dir: lock: %s is held by another process", dir)
	}
	r.init = filepath.Join(dir, "init")
	if err := copyBinary(r.cfg.InitBinary, r.init); err != nil {
		return err
	}
	if r.etcDir, err = buildEtc(r.cfg.StateDir, "/etc"); err != nil {
		return err
	}
	r.links = usrLinks("/")
	return nil
}

// hostname is the sandbox's host name.
const hostname = "sandbox"

// ensureTraversable creates dir (root-owned, 0755) when missing and checks
// that it and every parent is root-owned and traversable by others, so the
// sandbox uid can reach its files and no other user can swap them.
func ensureTraversable(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	for p := abs; ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("state dir: %w", err)
		}
		st, _ := fi.Sys().(*syscall.Stat_t)
		switch {
		case st == nil || st.Uid != 0:
			return fmt.Errorf("state dir: %s is not owned by root", p)
		case fi.Mode().Perm()&0o001 == 0:
			return fmt.Errorf("state dir: %s is not traversable by the sandbox uids (mode %v); use a directory like %s", p, fi.Mode().Perm(), DefaultStateDir)
		case p != abs && fi.Mode().Perm()&0o022 != 0 && fi.Mode()&os.ModeSticky == 0:
			return fmt.Errorf("state dir: %s is writable by others", p)
		}
		if p == "/" {
			return nil
		}
	}
}

// copyBinary puts a root-owned 0755 copy of src at dst: a hard link when
// src already is root-owned and 0755 on the same filesystem, else a copy.
func copyBinary(src, dst string) error {
	if fi, err := os.Stat(src); err == nil {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid == 0 && fi.Mode().Perm() == 0o755 {
			if os.Link(src, dst) == nil {
				return nil
			}
		}
	}
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("copy init binary: %w", err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		return fmt.Errorf("copy init binary: %w", err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("copy init binary: %w", err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("copy init binary: %w", err)
	}
	return nil
}

// usrLinks returns the top-level symlinks of a merged-/usr root (bin ->
// usr/bin and the like).
func usrLinks(root string) map[string]string {
	out := map[string]string{}
	for _, name := range []string{"bin", "sbin", "lib", "lib32", "lib64", "libx32"} {
		t, err := os.Readlink(filepath.Join(root, name))
		if err == nil && (strings.HasPrefix(t, "usr/") || strings.HasPrefix(t, "/usr/")) {
			out[name] = t
		}
	}
	return out
}

// uidLockDir holds the uid reservations of every runtime on the host,
// whatever its StateDir.
const uidLockDir = DefaultStateDir + "/uids"

// reserveSlots finds one free host uid per slot: a uid whose lock file under
// uidLockDir this process can lock and that owns no process.
func (r *Runtime) reserveSlots() error {
	lockDir := uidLockDir
	if err := os.MkdirAll(lockDir, 0o700); err != nil {
		return fmt.Errorf("reserve uids: %w", err)
	}
	uid := r.cfg.UIDBase
	for i := range r.cfg.Capacity {
		for ; ; uid++ {
			if uid >= r.cfg.UIDBase+uidRange {
				return fmt.Errorf("reserve uids: no free uid in %d..%d", r.cfg.UIDBase, r.cfg.UIDBase+uidRange-1)
			}
			f, err := lockUID(lockDir, uid)
			if err != nil {
				return err
			}
			if f == nil {
				continue
			}
			if pids, _ := uidProcesses(uid); len(pids) > 0 {
				f.Close()
				continue
			}
			r.slots = append(r.slots, &slot{index: i, uid: uid, lock: f})
			uid++
			break
		}
	}
	return nil
}

// lockUID locks the uid's lock file; nil without error when another runtime
// holds it.
func lockUID(dir string, uid int) (*os.File, error) {
	f, err := lockFile(filepath.Join(dir, strconv.Itoa(uid)+".lock"))
	if err != nil {
		return nil, fmt.Errorf("reserve uids: lock uid %d: %w", uid, err)
	}
	return f, nil
}

// lockFile opens (creating) and exclusively locks path; nil without error
// when another process holds the lock. The lock lasts until the file is
// closed or the process ends.
func lockFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, nil
		}
		return nil, err
	}
	return f, nil
}

// staleAge is how old a runtime directory must be before another runtime
// may judge it stale.
const staleAge = time.Minute

// removeStale removes the directories of runtimes that ended without Close
// (a crashed worker: its sandboxes died with it, by the parent-death
// signal). A live runtime holds the lock in its directory.
func (r *Runtime) removeStale() {
	dirs, _ := filepath.Glob(filepath.Join(r.cfg.StateDir, "rt-*"))
	for _, d := range dirs {
		fi, err := os.Stat(d)
		if err != nil || time.Since(fi.ModTime()) < staleAge {
			continue
		}
		f, err := lockFile(filepath.Join(d, "lock"))
		if err != nil || f == nil {
			continue
		}
		err = os.RemoveAll(d)
		f.Close()
		if err != nil {
			r.log.Warn("cannot remove the directory of a runtime that ended without closing", "dir", d, "err", err)
			continue
		}
		r.log.Warn("removed the directory of a runtime that ended without closing", "dir", d)
	}
}

// removeStaleGroups removes the cgroups that sandboxes of a crashed worker
// left behind (their processes died by the parent-death signal, their
// directories stay): groups older than staleAge with no process in them. A
// live sandbox always has its init in its group, and a group still being set
// up is younger than staleAge, so neither is touched.
func (r *Runtime) removeStaleGroups() {
	names, err := r.cg.Groups()
	if err != nil {
		r.log.Warn("cannot list cgroups to remove stale ones", "err", err)
		return
	}
	for _, name := range names {
		g, err := r.cg.Open(name)
		if err != nil || !olderThan(g.Paths(), staleAge) {
			continue
		}
		if pids, err := g.Pids(); err != nil || len(pids) > 0 {
			continue
		}
		if err := g.Remove(); err != nil {
			r.log.Warn("cannot remove the cgroup of a sandbox that ended without a wipe", "cgroup", name, "err", err)
			continue
		}
		r.log.Warn("removed the cgroup of a sandbox that ended without a wipe", "cgroup", name)
	}
}

// olderThan reports whether every existing path was last modified more than
// age ago (and at least one exists).
func olderThan(paths []string, age time.Duration) bool {
	found := false
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			continue
		}
		if time.Since(fi.ModTime()) < age {
			return false
		}
		found = true
	}
	return found
}

func (r *Runtime) releaseSlots() {
	for _, s := range r.slots {
		if s.lock != nil {
			s.lock.Close()
		}
	}
}

// uidProcesses returns the pids of processes owned by uid (the owner of
// /proc/PID is the process's effective uid).
func uidProcesses(uid int) ([]int, error) {
	d, err := os.Open("/proc")
	if err != nil {
		return nil, err
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	var out []int
	for _, n := range names {
		pid, err := strconv.Atoi(n)
		if err != nil {
			continue
		}
		var st syscall.Stat_t
		if syscall.Stat("/proc/"+n, &st) == nil && int(st.Uid) == uid {
			out = append(out, pid)
		}
	}
	return out, nil
}
