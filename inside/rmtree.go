package inside

import (
	"errors"
	"fmt"
	"strconv"

	"golang.org/x/sys/unix"
)

// removeTree removes the directory name of parent and everything in it
// with at most three descriptors, however deep the tree: it flattens the
// tree instead of descending it. Each pass over the top directory removes
// its files and empty directories at once and empties each other
// directory by one level — that directory's files are removed and its
// subdirectories moved up into the top directory under fresh names, to be
// taken on a later pass. Nothing is followed: every name is looked up in a
// descriptor of its directory, symlinks are removed as links. Directories
// the sandbox made unreadable or unwritable are opened up first (they are
// its own).
func removeTree(parent int, name string) error {
	for try := 0; ; try++ {
		top, err := openTreeDir(parent, name)
		if err != nil {
			return err
		}
		t := &treeRemover{top: top}
		err = t.empty()
		unix.Close(top)
		if err != nil {
			return err
		}
		err = unix.Unlinkat(parent, name, unix.AT_REMOVEDIR)
		if !isNotEmpty(err) || try == 8 { // something was added meanwhile: again
			return err
		}
	}
}

// treeRemover empties one directory (see removeTree).
type treeRemover struct {
	top int // the directory being emptied
	seq int // for the names of moved directories
}

// empty removes everything in the top directory, pass after pass, until a
// pass finds it empty.
func (t *treeRemover) empty() error {
	for {
		names, err := readNames(t.top)
		if err != nil {
			return err
		}
		if len(names) == 0 {
			return nil
		}
		for _, name := range names {
			if err := t.removeEntry(name); err != nil {
				return fmt.Errorf("remove %s: %w", name, err)
			}
		}
	}
}

// removeEntry removes an entry of the top directory, or, for a directory
// with entries, empties it by one level and then removes it (when it is
// still not empty, because something was added meanwhile, a later pass
// takes it again).
func (t *treeRemover) removeEntry(name string) error {
	err := unix.Unlinkat(t.top, name, 0)
	if !errors.Is(err, unix.EISDIR) {
		return ignoreGone(err)
	}
	if err := unix.Unlinkat(t.top, name, unix.AT_REMOVEDIR); !isNotEmpty(err) {
		return ignoreGone(err)
	}
	dir, err := openTreeDir(t.top, name)
	if err != nil {
		return ignoreGone(err)
	}
	defer unix.Close(dir)
	names, err := readNames(dir)
	if err != nil {
		return err
	}
	for _, e := range names {
		err := unix.Unlinkat(dir, e, 0)
		if errors.Is(err, unix.EISDIR) {
			if err = unix.Unlinkat(dir, e, unix.AT_REMOVEDIR); isNotEmpty(err) {
				err = t.moveUp(dir, e)
			}
		}
		if err := ignoreGone(err); err != nil {
			return err
		}
	}
	if err := unix.Unlinkat(t.top, name, unix.AT_REMOVEDIR); !isNotEmpty(err) {
		return ignoreGone(err)
	}
	return nil
}

// moveUp moves directory name of dir into the top directory under a fresh
// name.
func (t *treeRemover) moveUp(dir int, name string) error {
	var err error
	for try := 0; try < 16; try++ {
		t.seq++
		err = unix.Renameat2(dir, name, t.top, ".rm-"+strconv.Itoa(t.seq), unix.RENAME_NOREPLACE)
		switch {
		case errors.Is(err, unix.EEXIST):
			continue
		case errors.Is(err, unix.EACCES): // moving a directory writes its ".."
			if err := chmodNoFollow(dir, name, 0o700); err != nil {
				return err
			}
			continue
		}
		return err
	}
	return err
}

// openTreeDir opens directory name of parent for reading without following
// a symlink, and makes it readable, writable and searchable by its owner.
func openTreeDir(parent int, name string) (int, error) {
	fd, err := unix.Openat(parent, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.EACCES) {
		if err := chmodNoFollow(parent, name, 0o700); err != nil {
			return -1, err
		}
		fd, err = unix.Openat(parent, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	}
	if err != nil {
		return -1, err
	}
	if err := unix.Fchmod(fd, 0o700); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// chmodNoFollow sets the mode of directory name of parent, never of what a
// symlink in its place points to: through an O_PATH descriptor of the
// directory itself.
func chmodNoFollow(parent int, name string, mode uint32) error {
	fd, err := unix.Openat(parent, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return unix.Chmod("/proc/self/fd/"+strconv.Itoa(fd), mode)
}

// isNotEmpty reports whether err says a directory has entries.
func isNotEmpty(err error) bool {
	return errors.Is(err, unix.ENOTEMPTY) || errors.Is(err, unix.EEXIST)
}

// ignoreGone is err, or nil when err says the entry is gone already.
func ignoreGone(err error) error {
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	return err
}
