package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// prepareDir removes what dead runtimes left, then makes this runtime's own
// directory under StateDir (with the init binary, so the unprivileged
// sandbox uid can read it wherever the original lives) and the generated
// /etc files, takes the runtime's lock, and removes the /etc copies that no
// runtime uses any more.
func (r *Runtime) prepareDir() error {
	if err := ensureTraversable(r.cfg.StateDir); err != nil {
		return err
	}
	if err := makeLockDir(runtimeLockDir); err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	r.removeStale()
	r.name = "rt-" + randomID()
	lock, err := lockFile(filepath.Join(runtimeLockDir, r.name+".lock"))
	switch {
	case err != nil:
		return fmt.Errorf("state dir: lock: %w", err)
	case lock == nil:
		return fmt.Errorf("state dir: lock: runtime %s is held by another process", r.name)
	}
	r.dirLock = lock
	r.dir = filepath.Join(r.cfg.StateDir, r.name)
	if err := recordDir(lock, r.dir); err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	if err := os.Mkdir(r.dir, 0o755); err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	if err := os.Chmod(r.dir, 0o755); err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	if r.cg, err = r.base.Sub(r.name); err != nil {
		return err
	}
	if err := os.Mkdir(filepath.Join(r.dir, viewInitDir), 0o755); err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	r.init = filepath.Join(r.dir, viewInitDir, "init")
	if err := installInit(r.cfg.StateDir, r.cfg.InitBinary, r.init); err != nil {
		return err
	}
	r.initStatic = isStatic(r.init)
	r.etcBinds = etcBinds("/etc")
	if r.etcDir, r.etcLock, err = buildEtc(r.cfg.StateDir, "/etc", r.etcBinds); err != nil {
		return err
	}
	if err := os.Symlink(r.etcDir, filepath.Join(r.dir, etcLink)); err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	if err := removeUnusedEtc(r.cfg.StateDir, r.name, r.etcDir); err != nil {
		r.log.Warn("cannot remove the /etc copies no runtime uses; the next runtime tries again", "err", err)
	}
	r.initBind, r.etcBind, err = mountViews(r.dir, filepath.Dir(r.init), r.etcDir)
	if err != nil {
		// A host that refuses overlays (a container without the right to
		// mount them) still runs sandboxes; their mount table names the
		// state dir and the runtime.
		r.log.Warn("sandboxes' /proc/self/mountinfo shows the state dir: "+
			"they bind the init binary and /etc from it, not through read-only overlays", "err", err.Error())
		r.initBind, r.etcBind = r.init, r.etcDir
	}
	r.procMask = hostProcMask("/proc")
	r.links = usrLinks("/")
	r.view = commandView{root: "/", links: r.links, etcBinds: r.etcBinds}
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

// Host-wide directories of every runtime, whatever its StateDir: the uid
// reservations, and one lock file per live runtime (a runtime whose lock
// is free is dead, and whatever it left may go).
const (
	uidLockDir     = DefaultStateDir + "/uids"
	runtimeLockDir = DefaultStateDir + "/runtimes"
)

// makeLockDir makes dir (0700) under DefaultStateDir, making
// DefaultStateDir itself 0755 first when it is missing: a runtime with
// another StateDir must not leave the default one untraversable by the
// sandbox uids (MkdirAll would give it the lock directory's 0700).
func makeLockDir(dir string) error {
	if err := os.MkdirAll(DefaultStateDir, 0o755); err != nil {
		return err
	}
	return os.MkdirAll(dir, 0o700)
}

// reserveSlots finds one free host uid per slot, and one for the
// self-test's slot when the config keeps one: a uid whose lock file under
// uidLockDir this process can lock and that owns no process (busy: one scan
// of /proc, processOwners, serves every slot).
func (r *Runtime) reserveSlots(busy map[int]bool) error {
	lockDir := uidLockDir
	if err := makeLockDir(lockDir); err != nil {
		return fmt.Errorf("reserve uids: %w", err)
	}
	n := r.cfg.Capacity
	if r.cfg.SelfTestSlot {
		n++
	}
	uid := r.cfg.UIDBase
	for i := range n {
		for ; ; uid++ {
			if uid >= r.cfg.UIDBase+uidRange {
				return fmt.Errorf("reserve uids: no free uid in %d..%d", r.cfg.UIDBase, r.cfg.UIDBase+uidRange-1)
			}
			if busy[uid] {
				continue
			}
			f, err := lockUID(lockDir, uid)
			if err != nil {
				return err
			}
			if f == nil {
				continue
			}
			r.slots = append(r.slots, &slot{index: i, uid: uid, lock: f, selfTest: i == r.cfg.Capacity})
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
	var out []int
	err := eachProcess(func(pid, owner int) {
		if owner == uid {
			out = append(out, pid)
		}
	})
	return out, err
}

// processOwners returns the set of uids that own a process.
func processOwners() (map[int]bool, error) {
	out := map[int]bool{}
	if err := eachProcess(func(_, owner int) { out[owner] = true }); err != nil {
		return nil, fmt.Errorf("reserve uids: list processes: %w", err)
	}
	return out, nil
}

// ownersScan is processOwners' answer.
type ownersScan struct {
	busy map[int]bool
	err  error
}

// eachProcess calls fn with every process's pid and owner uid.
func eachProcess(fn func(pid, uid int)) error {
	d, err := os.Open("/proc")
	if err != nil {
		return err
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return err
	}
	for _, n := range names {
		pid, err := strconv.Atoi(n)
		if err != nil {
			continue
		}
		var st syscall.Stat_t
		if syscall.Stat("/proc/"+n, &st) == nil {
			fn(pid, int(st.Uid))
		}
	}
	return nil
}
