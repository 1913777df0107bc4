package unpack

import (
	"errors"
	"fmt"
	"strings"

	"golang.org/x/sys/unix"
)

// tree opens directories of one layer by paths relative to its root, never
// leaving it: every path is resolved beneath the root without following a
// symbolic link (openat2 with RESOLVE_BENEATH, RESOLVE_NO_SYMLINKS,
// RESOLVE_NO_MAGICLINKS and RESOLVE_NO_XDEV; where the kernel has no
// openat2, one component at a time with O_NOFOLLOW, which is the same rule
// for the clean, ".."-free paths the unpacker passes). It keeps the last
// directory it opened, since a layer's entries come directory by directory.
type tree struct {
	root int // the layer's root directory
	// noOpenat2 is set once the kernel answered ENOSYS.
	noOpenat2 bool
	lastRel   string
	lastFD    int // -1: none
}

func newTree(root int) *tree { return &tree{root: root, lastFD: -1} }

// close releases the kept directory (not the root, which is the caller's).
func (t *tree) close() {
	if t.lastFD >= 0 {
		unix.Close(t.lastFD)
		t.lastFD, t.lastRel = -1, ""
	}
}

// errNotDir is returned when a path passes through something that is not a
// directory of the layer (a symbolic link, a file, a whiteout).
var errNotDir = errors.New("passes through something that is not a directory (a symbolic link is never followed)")

// dir returns a descriptor of the directory rel ("." for the root), owned
// by t and valid until the next call; missing directories are made (0755,
// root's) when create is set.
func (t *tree) dir(rel string, create bool) (int, error) {
	if rel == "." {
		return t.root, nil
	}
	if t.lastFD >= 0 && t.lastRel == rel {
		return t.lastFD, nil
	}
	t.close()
	fd, err := t.open(rel)
	if errors.Is(err, unix.ENOENT) && create {
		fd, err = t.walk(rel, true)
	}
	if err != nil {
		return -1, err
	}
	t.lastFD, t.lastRel = fd, rel
	return fd, nil
}

const dirFlags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC

// open opens the existing directory rel beneath the root.
func (t *tree) open(rel string) (int, error) {
	if !t.noOpenat2 {
		fd, err := unix.Openat2(t.root, rel, &unix.OpenHow{
			Flags:   dirFlags,
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV,
		})
		switch {
		case err == nil:
			return fd, nil
		case errors.Is(err, unix.ENOSYS):
			t.noOpenat2 = true
		case errors.Is(err, unix.ELOOP), errors.Is(err, unix.ENOTDIR), errors.Is(err, unix.EXDEV):
			return -1, errNotDir
		default:
			return -1, err
		}
	}
	return t.walk(rel, false)
}

// walk opens rel one component at a time, never following a link, making
// missing directories when create is set.
func (t *tree) walk(rel string, create bool) (int, error) {
	fd, err := unix.Dup(t.root)
	if err != nil {
		return -1, err
	}
	for comp := range strings.SplitSeq(rel, "/") {
		next, err := unix.Openat(fd, comp, dirFlags, 0)
		if errors.Is(err, unix.ENOENT) && create {
			if err = unix.Mkdirat(fd, comp, 0o755); err == nil || errors.Is(err, unix.EEXIST) {
				next, err = unix.Openat(fd, comp, dirFlags, 0)
			}
		}
		unix.Close(fd)
		switch {
		case errors.Is(err, unix.ELOOP), errors.Is(err, unix.ENOTDIR):
			return -1, errNotDir
		case err != nil:
			return -1, err
		}
		fd = next
	}
	return fd, nil
}

// removeAt removes name in dir, and everything below it when it is a
// directory, never following a link; a missing name is fine.
func removeAt(dir int, name string, depth int) error {
	err := unix.Unlinkat(dir, name, 0)
	if err == nil || errors.Is(err, unix.ENOENT) {
		return nil
	}
	if !errors.Is(err, unix.EISDIR) && !errors.Is(err, unix.EPERM) {
		return err
	}
	if depth > maxDepth {
		return fmt.Errorf("deeper than %d directories", maxDepth)
	}
	fd, err := unix.Openat(dir, name, dirFlags, 0)
	if err != nil {
		return err
	}
	names, err := readNames(fd)
	if err == nil {
		for _, n := range names {
			if err = removeAt(fd, n, depth+1); err != nil {
				break
			}
		}
	}
	unix.Close(fd)
	if err != nil {
		return err
	}
	return unix.Unlinkat(dir, name, unix.AT_REMOVEDIR)
}

// maxDepth bounds how deep removeAt goes (a path of PATH_MAX bytes has at
// most half as many components).
const maxDepth = 4096

// readNames lists the entries of the open directory fd.
func readNames(fd int) ([]string, error) {
	var names []string
	buf := make([]byte, 32<<10)
	for {
		n, err := unix.Getdents(fd, buf)
		if err != nil {
			return nil, err
		}
		if n <= 0 {
			return names, nil
		}
		_, _, names = unix.ParseDirent(buf[:n], -1, names)
	}
}
