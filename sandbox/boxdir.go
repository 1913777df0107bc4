package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
	"openvibe.network/agentsandbox/sandbox/hostcheck"
)

// A sandbox's host directory (Runtime.boxPath) holds only mount points and,
// for a moment while the sandbox starts, its sockets:
//
//	<runtime dir>/<id>/      root:<slot gid> 0710, so only root and the slot reach it
//	  fs/                    tmpfs, size- and inode-capped: the sandbox's writable space
//	    workspace/ tmp/ shm/ owned by the slot uid, bound at /workspace, /tmp, /dev/shm
//	    pts/                 the sandbox's own devpts instance, pty-capped, bound at /dev/pts
//	    boot_id              the sandbox's own random boot id, root-owned 0444, bound read-only
//	                         over /proc/sys/kernel/random/boot_id
//
// The sandbox sees none of it but the bound directories. Its pages are
// charged to the sandbox's cgroup (the writer pays), and the wipe detaches
// the tmpfs with the devpts on it in one unmount: whatever the sandbox made
// there (deep trees, millions of entries, names and modes meant to trip a
// removal) goes at once.
const (
	boxFS     = "fs"
	boxPts    = "fs/pts"
	boxBootID = "fs/boot_id"
)

// bytesPerInode sets a workspace's inode cap from its size: one inode per
// 4 KiB page, at least minInodes.
const (
	bytesPerInode = 4096
	minInodes     = 4096
)

// inodeCap is the number of inodes of a writable space of size bytes.
func inodeCap(size int64) int64 { return max(minInodes, size/bytesPerInode) }

// makeBoxDir makes dir and mounts its two file systems: a tmpfs of size
// bytes (inodeCap(size) inodes) with the sandbox's writable directories
// owned by uid and its boot id, and a devpts instance of at most ptys
// terminals. On error,
// whatever it made is removed again.
func makeBoxDir(dir string, uid int, size int64, ptys int) (err error) {
	if err := os.Mkdir(dir, 0o710); err != nil {
		return fmt.Errorf("sandbox dir: %w", err)
	}
	defer func() {
		if err != nil {
			_ = removeBoxDir(dir)
		}
	}()
	if err := os.Chown(dir, 0, uid); err != nil {
		return fmt.Errorf("sandbox dir: %w", err)
	}
	if err := os.Chmod(dir, 0o710); err != nil { // not reduced by the umask
		return fmt.Errorf("sandbox dir: %w", err)
	}
	fsDir, ptsDir := filepath.Join(dir, boxFS), filepath.Join(dir, boxPts)
	if err := os.Mkdir(fsDir, 0o700); err != nil {
		return fmt.Errorf("sandbox dir: %w", err)
	}
	opts := fmt.Sprintf("size=%d,nr_inodes=%d,mode=0711,uid=0,gid=0", size, inodeCap(size))
	if err := unix.Mount("tmpfs", fsDir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		if cause := (hostcheck.Host{Root: "/"}).Explain(err.Error()); cause != "" {
			return fmt.Errorf("sandbox dir: %s; mount tmpfs %s: %w", cause, opts, err)
		}
		return fmt.Errorf("sandbox dir: mount tmpfs %s: %w", opts, err)
	}
	if err := os.Mkdir(ptsDir, 0o700); err != nil {
		return fmt.Errorf("sandbox dir: %w", err)
	}
	for _, d := range writableDirs {
		p := filepath.Join(fsDir, d.name)
		mode := os.FileMode(0o700)
		if d.path != Workspace {
			mode = 0o700 | os.ModeSticky
		}
		if err := os.Mkdir(p, 0o700); err != nil {
			return fmt.Errorf("sandbox dir: %w", err)
		}
		if err := os.Chown(p, uid, uid); err != nil {
			return fmt.Errorf("sandbox dir: %w", err)
		}
		if err := os.Chmod(p, mode); err != nil {
			return fmt.Errorf("sandbox dir: %w", err)
		}
	}
	if err := writeBootID(filepath.Join(dir, boxBootID)); err != nil {
		return err
	}
	ptsOpts := "newinstance,ptmxmode=0666,mode=0620,max=" + strconv.Itoa(ptys)
	if err := unix.Mount("devpts", ptsDir, "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, ptsOpts); err != nil {
		return fmt.Errorf("sandbox dir: mount devpts %s: %w", ptsOpts, err)
	}
	return nil
}

// removeBoxDir unmounts the sandbox's file systems and removes dir, which
// then holds only empty mount points; a missing dir is fine. One lazy
// unmount of the tmpfs takes the devpts on it along (a mount still busy
// goes once its last user does), without reading the mount table; only
// when something else is mounted there does it unmount every mount the
// table lists at or below dir, deepest first. It never descends into a file
// system it did not make: if a mount cannot be undone, the error says so
// and the directory stays.
func removeBoxDir(dir string) error {
	err := unix.Unmount(filepath.Join(dir, boxFS), unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW)
	if err == nil || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) {
		if removeOwnTree(dir) == nil {
			return nil
		}
	}
	if err := unmountUnder(dir); err != nil {
		return err
	}
	return removeOwnTree(dir)
}

// unmountUnder detaches every mount at or below dir. A lazy unmount takes
// the mounts below the one it detaches with it, so only the topmost mounts
// are unmounted (each unmount waits for the kernel's RCU grace period).
func unmountUnder(dir string) error {
	mounts, err := mountsUnder(dir)
	if err != nil {
		return fmt.Errorf("unmount %s: %w", dir, err)
	}
	return unmountAll(mounts)
}

// unmountAll detaches the mounts at the points of mounts, parents first
// (what is below a detached one goes with it).
func unmountAll(mounts []string) error {
	slices.Sort(mounts)
	mounts = slices.Compact(mounts)
	var errs []error
	for i, m := range mounts {
		if i > 0 && slices.ContainsFunc(mounts[:i], func(p string) bool { return strings.HasPrefix(m, p+"/") }) {
			continue // below one detached already
		}
		if err := unix.Unmount(m, unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("unmount %s: %w", m, err))
		}
	}
	return errors.Join(errs...)
}

// maxOwnDepth bounds how deep removeOwnTree goes: the runtime's own trees
// are a few levels deep (runtime dir, sandbox dir, mount point).
const maxOwnDepth = 4

// removeOwnTree removes a directory tree the runtime made: it stays on
// dir's file system (a mount left in it is an error, never entered), goes
// at most maxOwnDepth levels deep, and removes symlinks rather than
// following them. A missing dir is fine.
func removeOwnTree(dir string) error {
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return fmt.Errorf("remove %s: %w", dir, err)
	}
	return removeOnDev(dir, st.Dev, 0)
}

func removeOnDev(p string, dev uint64, depth int) error {
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return fmt.Errorf("remove %s: %w", p, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove %s: %w", p, err)
		}
		return nil
	}
	switch {
	case st.Dev != dev:
		return fmt.Errorf("remove %s: a file system is still mounted there", p)
	case depth > maxOwnDepth:
		return fmt.Errorf("remove %s: deeper than the runtime's own directories", p)
	}
	names, err := readDirNames(p)
	if err != nil {
		return err
	}
	for _, n := range names {
		if err := removeOnDev(filepath.Join(p, n), dev, depth+1); err != nil {
			return err
		}
	}
	if err := unix.Rmdir(p); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("remove %s: %w", p, err)
	}
	return nil
}

func readDirNames(dir string) ([]string, error) {
	d, err := os.Open(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("remove %s: %w", dir, err)
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, fmt.Errorf("remove %s: %w", dir, err)
	}
	return names, nil
}

// resizeBoxDir gives the sandbox's tmpfs a new size (and the inode cap that
// goes with it), in place: the sandbox's binds see the change at once.
func resizeBoxDir(dir string, size int64) error {
	opts := fmt.Sprintf("size=%d,nr_inodes=%d", size, inodeCap(size))
	if err := unix.Mount("tmpfs", filepath.Join(dir, boxFS), "", unix.MS_REMOUNT|unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return fmt.Errorf("resize sandbox dir: remount %s: %w", opts, err)
	}
	return nil
}
