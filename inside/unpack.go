package inside

import (
	"archive/tar"
	"errors"
	"io"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	"openvibe.network/agentsandbox/sandbox/control"
)

// unpacker takes the entries of one archive into a temporary directory.
// Every entry is made by its own name in a descriptor of its parent, which
// is reached from the temporary directory one name at a time without
// following a symlink, so nothing is written outside it, whatever the
// archive holds or the sandbox does meanwhile. It holds at most three
// descriptors: the temporary directory, the last parent used (entries come
// in tree order, so most share it) and, for a hard link, its source's.
type unpacker struct {
	tmp     int    // the temporary directory
	destRel string // where the tree goes, relative to the workspace
	// files are the regular files unpacked (the sources hard links may
	// name); links the symlinks, by path relative to the workspace, with
	// their targets; kinds every entry's path, true for a directory.
	files map[string]bool
	links map[string]string
	kinds map[string]bool
	// dirs are the directory entries' modes and times, set once the tree
	// is in place.
	dirs map[string]dirMeta
	// cached is a descriptor of directory cachedRel of the temporary
	// directory (-1: none).
	cached    int
	cachedRel string
}

// dirMeta is a directory entry's mode and time.
type dirMeta struct {
	mode  uint32
	mtime time.Time
}

// close releases the unpacker's descriptors.
func (u *unpacker) close() {
	if u.cached >= 0 {
		unix.Close(u.cached)
		u.cached = -1
	}
	unix.Close(u.tmp)
}

// entry takes one entry of the archive.
func (u *unpacker) entry(hdr *tar.Header, r io.Reader) error {
	name, err := entryName(hdr.Name)
	if err != nil {
		return err
	}
	if name == "" { // the directory itself
		if hdr.Typeflag == tar.TypeDir {
			return nil
		}
		return refuse(control.CodeBadArchive, "entry %q names the directory itself but is not a directory", hdr.Name)
	}
	if len(u.destRel)+1+len(name) > maxPathBytes {
		return refuse(control.CodeBadArchive, "entry %.64q…: its path is longer than %d bytes", name, maxPathBytes)
	}
	switch hdr.Typeflag {
	case tar.TypeDir:
		return u.dir(name, hdr)
	case tar.TypeReg:
		return u.file(name, hdr, r)
	case tar.TypeSymlink:
		return u.symlink(name, hdr)
	case tar.TypeLink:
		return u.hardLink(name, hdr.Linkname)
	case tar.TypeXGlobalHeader:
		return nil
	case tar.TypeChar, tar.TypeBlock, tar.TypeFifo:
		return refuse(control.CodeBadArchive, "entry %q is a device node or fifo; only files, directories and links are unpacked", name)
	}
	return refuse(control.CodeBadArchive, "entry %q has tar type %q; only files, directories and links are unpacked", name, string(hdr.Typeflag))
}

// entryName checks an entry's name and cleans it ("./a//b/" is "a/b"; ""
// is the directory itself): absolute names and ".." are refused.
func entryName(n string) (string, error) {
	if strings.HasPrefix(n, "/") {
		return "", refuse(control.CodeBadArchive, "entry %q has an absolute name; the archive's names must be relative", n)
	}
	var parts []string
	for _, p := range strings.Split(n, "/") {
		switch p {
		case "", ".":
			continue
		case "..":
			return "", refuse(control.CodeBadArchive, "entry %q contains `..`; the archive's names must stay in its directory", n)
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, "/"), nil
}

// dir makes a directory entry.
func (u *unpacker) dir(name string, hdr *tar.Header) error {
	if _, err := u.dirFd(name); err != nil {
		return err
	}
	u.dirs[name] = dirMeta{mode: uint32(hdr.Mode) & 0o777, mtime: hdr.ModTime}
	return nil
}

// file makes a regular file entry with the content r holds.
func (u *unpacker) file(name string, hdr *tar.Header, r io.Reader) error {
	parent, base, err := u.place(name)
	if err != nil {
		return err
	}
	fd, err := unix.Openat(parent, base, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	n, err := io.Copy(f, r)
	switch {
	case errors.Is(err, unix.ENOSPC), errors.Is(err, unix.EDQUOT), errors.Is(err, errClientGone):
		return err
	case err != nil:
		return readError(err)
	case n != hdr.Size:
		return refuse(control.CodeBadArchive, "entry %q ends before its %d bytes", name, hdr.Size)
	}
	if err := f.Chmod(os.FileMode(hdr.Mode).Perm()); err != nil {
		return err
	}
	if err := setTimes(parent, base, hdr.ModTime); err != nil {
		return err
	}
	u.files[name], u.kinds[name] = true, false
	return nil
}

// symlink makes a symlink entry; its target is checked once the whole
// archive is in (see checkLinks), absolute ones at once.
func (u *unpacker) symlink(name string, hdr *tar.Header) error {
	target := hdr.Linkname
	switch {
	case target == "":
		return refuse(control.CodeBadArchive, "entry %q is a symlink without a target", name)
	case strings.HasPrefix(target, "/"):
		return refuse(control.CodeBadArchive, "entry %q is a symlink to the absolute path %q; links must stay in the workspace", name, target)
	}
	parent, base, err := u.place(name)
	if err != nil {
		return err
	}
	if err := unix.Symlinkat(target, parent, base); err != nil {
		return err
	}
	if err := setTimes(parent, base, hdr.ModTime); err != nil {
		return err
	}
	delete(u.files, name)
	u.links[joinRel(u.destRel, name)], u.kinds[name] = target, false
	return nil
}

// hardLink makes a hard link entry to a file earlier in the archive.
func (u *unpacker) hardLink(name, linkname string) error {
	src, err := entryName(linkname)
	if err != nil || !u.files[src] {
		return refuse(control.CodeBadArchive, "entry %q is a hard link to %q, which is not a file earlier in the archive", name, linkname)
	}
	srcDir, srcBase := splitRel(src)
	from, err := openAt(u.tmp, srcDir, unix.O_PATH|unix.O_DIRECTORY, 0, resolveNoLinks)
	if err != nil {
		return err
	}
	defer unix.Close(from)
	parent, base, err := u.place(name)
	if err != nil {
		return err
	}
	if err := unix.Linkat(from, srcBase, parent, base, 0); err != nil {
		return err
	}
	u.files[name], u.kinds[name] = true, false
	return nil
}

// place makes the parents of a non-directory entry and clears its name (a
// later entry replaces an earlier one, as tar does; a directory is not
// replaced). It returns the parent's descriptor (cached: not to be closed)
// and the entry's name in it.
func (u *unpacker) place(name string) (int, string, error) {
	dir, base := splitRel(name)
	parent, err := u.dirFd(dir)
	if err != nil {
		return -1, "", err
	}
	switch err := unix.Unlinkat(parent, base, 0); {
	case errors.Is(err, unix.EISDIR):
		return -1, "", refuse(control.CodeBadArchive, "entry %q is not a directory, but a directory of that name is earlier in the archive", name)
	case err != nil && !errors.Is(err, unix.ENOENT):
		return -1, "", err
	}
	return parent, base, nil
}

// dirFd makes directory rel of the temporary directory with its parents and
// returns a descriptor of it (cached: not to be closed), starting from the
// cached one when rel is in it.
func (u *unpacker) dirFd(rel string) (int, error) {
	if rel == "." {
		return u.tmp, nil
	}
	if u.cached >= 0 && rel == u.cachedRel {
		return u.cached, nil
	}
	start, from, rest := u.tmp, ".", rel
	if after, ok := strings.CutPrefix(rel, u.cachedRel+"/"); ok && u.cached >= 0 {
		start, from, rest = u.cached, u.cachedRel, after
	}
	cur, err := unix.Dup(start)
	if err != nil {
		return -1, err
	}
	at := from
	for _, c := range strings.Split(rest, "/") {
		at = joinRel(at, c)
		if err := unix.Mkdirat(cur, c, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
			unix.Close(cur)
			return -1, err
		}
		next, err := unix.Openat(cur, c, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(cur)
		if errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) {
			return -1, refuse(control.CodeBadArchive, "entry %q needs %q to be a directory, but the archive made it a file or symlink", rel, at)
		}
		if err != nil {
			return -1, err
		}
		cur = next
		if _, ok := u.kinds[at]; !ok {
			u.kinds[at] = true
		}
	}
	if u.cached >= 0 {
		unix.Close(u.cached)
	}
	u.cached, u.cachedRel = cur, rel
	return cur, nil
}

// setTimes sets the access and modification times of name in parent, a
// symlink's own.
func setTimes(parent int, name string, t time.Time) error {
	ts := unix.NsecToTimespec(t.UnixNano())
	return unix.UtimesNanoAt(parent, name, []unix.Timespec{ts, ts}, unix.AT_SYMLINK_NOFOLLOW)
}
