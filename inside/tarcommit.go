package inside

import (
	"errors"
	"maps"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
	"openvibe.network/agentsandbox/sandbox/control"
)

// maxLinkHops bounds the symlinks followed to check one (the kernel's
// limit); a chain longer than that is refused.
const maxLinkHops = 40

// checkLinks refuses the archive when one of its symlinks leads out of the
// workspace from where it will be.
func (u *unpacker) checkLinks() error {
	for _, p := range slices.Sorted(maps.Keys(u.links)) {
		if linkLeaves(u.links, p) {
			name := strings.TrimPrefix(p, u.destRel+"/")
			return refuse(control.CodeBadArchive, "entry %q is a symlink to %q, which leads out of the workspace", name, u.links[p])
		}
	}
	return nil
}

// linkLeaves reports whether the symlink at p (relative to the workspace)
// leads out of the workspace when resolved as the kernel would, following
// the other symlinks of links (by path relative to the workspace) on the
// way, so that no chain of links that each stay inside leads out together.
// Paths outside links are taken as directories: what the workspace holds
// there already is the sandbox's own and may change at any time.
func linkLeaves(links map[string]string, p string) bool {
	hops := 0
	var walk func(dir []string, target string) ([]string, bool)
	walk = func(dir []string, target string) ([]string, bool) {
		if strings.HasPrefix(target, "/") {
			return nil, true
		}
		cur := slices.Clone(dir)
		for _, c := range strings.Split(target, "/") {
			switch c {
			case "", ".":
				continue
			case "..":
				if len(cur) == 0 {
					return nil, true
				}
				cur = cur[:len(cur)-1]
				continue
			}
			cur = append(cur, c)
			if t, ok := links[strings.Join(cur, "/")]; ok {
				if hops++; hops > maxLinkHops {
					return nil, true
				}
				var out bool
				if cur, out = walk(cur[:len(cur)-1], t); out {
					return nil, true
				}
			}
		}
		return cur, false
	}
	dir, _ := splitRel(p)
	var start []string
	if dir != "." {
		start = strings.Split(dir, "/")
	}
	_, out := walk(start, links[p])
	return out
}

// commit moves the unpacked tree (temporary directory tmpName of the
// workspace) into place: renamed as a whole when the destination does not
// exist, else merged into it (see merge). It reports whether the temporary
// directory itself moved. Then the directory entries get their modes and
// times.
func (u *unpacker) commit(ws int, tmpName string) (moved bool, err error) {
	if u.destRel != "." {
		dir, base := splitRel(u.destRel)
		parent, err := mkdirAll(ws, dir)
		if err != nil {
			return false, err
		}
		err = unix.Renameat2(ws, tmpName, parent, base, unix.RENAME_NOREPLACE)
		unix.Close(parent)
		if err == nil {
			moved = true
		} else if !errors.Is(err, unix.EEXIST) {
			return false, err
		}
	}
	dst, err := openAt(ws, u.destRel, unix.O_PATH|unix.O_DIRECTORY, 0, resolveBeneath)
	if err != nil {
		return moved, err
	}
	defer unix.Close(dst)
	if !moved {
		if err := u.merge(ws, tmpName, dst); err != nil {
			return false, err
		}
	}
	return moved, u.applyDirs(dst)
}

// merge moves the tree of temporary directory tmpName into the existing
// directory dst: an entry the destination lacks is moved there (a
// directory with everything in it), a file, symlink or link replaces the
// destination's non-directory of that name, and a directory on both sides
// is merged. Before anything moves, every entry is checked against the
// destination: a directory of the archive where the destination has
// something else (or the other way round), or an entry below a
// destination's file or symlink, refuses the whole archive (CodeExists).
func (u *unpacker) merge(ws int, tmpName string, dst int) error {
	for _, p := range slices.Sorted(maps.Keys(u.kinds)) {
		if err := conflict(dst, p, u.kinds[p]); err != nil {
			return err
		}
	}
	src, err := openAt(ws, tmpName, unix.O_PATH|unix.O_DIRECTORY, 0, resolveNoLinks)
	if err != nil {
		return err
	}
	defer unix.Close(src)
	return mergeDir(src, dst, ".")
}

// conflict refuses entry p of the archive (a directory when isDir) when
// the destination dst has something else in its place.
func conflict(dst int, p string, isDir bool) error {
	fd, err := openAt(dst, p, unix.O_PATH|unix.O_NOFOLLOW, 0, resolveNoLinks)
	switch {
	case errors.Is(err, unix.ENOENT):
		return nil
	case errors.Is(err, unix.ENOTDIR), errors.Is(err, unix.ELOOP):
		return refuse(control.CodeExists, "entry %q is below a file or symlink of the destination; remove it or unpack elsewhere", p)
	case err != nil:
		return err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if there := st.Mode&unix.S_IFMT == unix.S_IFDIR; there != isDir {
		return refuse(control.CodeExists, "entry %q is a %s but the destination has a %s there; remove it or unpack elsewhere",
			p, kindName(isDir), fileType(st.Mode))
	}
	return nil
}

// kindName names an entry's kind for a message.
func kindName(isDir bool) string {
	if isDir {
		return "directory"
	}
	return "file or link"
}

// mergeDir merges directory rel of src into rel of dst (see merge), two
// descriptors at a time: a level's entries are read, moved or noted, and
// its descriptors closed before the directories on both sides are merged.
func mergeDir(src, dst int, rel string) error {
	sub, err := mergeLevel(src, dst, rel)
	if err != nil {
		return err
	}
	for _, name := range sub {
		if err := mergeDir(src, dst, joinRel(rel, name)); err != nil {
			return err
		}
	}
	return nil
}

// mergeLevel moves the entries of directory rel of src into rel of dst and
// returns the names of the directories both have.
func mergeLevel(src, dst int, rel string) ([]string, error) {
	from, err := openAt(src, rel, unix.O_PATH|unix.O_DIRECTORY, 0, resolveNoLinks)
	if err != nil {
		return nil, err
	}
	defer unix.Close(from)
	to, err := openAt(dst, rel, unix.O_PATH|unix.O_DIRECTORY, 0, resolveNoLinks)
	if err != nil {
		return nil, err
	}
	defer unix.Close(to)
	names, err := readNames(from)
	if err != nil {
		return nil, err
	}
	var sub []string
	for _, name := range names {
		there, err := lstatAt(to, name)
		if errors.Is(err, unix.ENOENT) {
			if err := unix.Renameat2(from, name, to, name, unix.RENAME_NOREPLACE); err != nil {
				return nil, err
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		here, err := lstatAt(from, name)
		if err != nil {
			return nil, err
		}
		switch isDir := here.Mode&unix.S_IFMT == unix.S_IFDIR; {
		case isDir != (there.Mode&unix.S_IFMT == unix.S_IFDIR):
			return nil, refuse(control.CodeExists, "entry %q changed type in the destination while the archive was unpacked", joinRel(rel, name))
		case isDir:
			sub = append(sub, name)
		default:
			if err := unix.Renameat(from, name, to, name); err != nil {
				return nil, err
			}
		}
	}
	return sub, nil
}

// applyDirs gives the directory entries their modes and times, deepest
// first (so that a directory closed to its owner does not block the ones
// below it).
func (u *unpacker) applyDirs(dst int) error {
	names := slices.SortedFunc(maps.Keys(u.dirs), func(a, b string) int {
		return strings.Count(b, "/") - strings.Count(a, "/")
	})
	for _, name := range names {
		m := u.dirs[name]
		fd, err := openAt(dst, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0, resolveNoLinks)
		if err != nil {
			return err
		}
		proc := "/proc/self/fd/" + strconv.Itoa(fd)
		ts := unix.NsecToTimespec(m.mtime.UnixNano())
		err = unix.UtimesNano(proc, []unix.Timespec{ts, ts})
		if err == nil {
			err = unix.Chmod(proc, m.mode)
		}
		unix.Close(fd)
		if err != nil {
			return err
		}
	}
	return nil
}
