package unpack

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	"golang.org/x/sys/unix"
)

// prepare opens the parent directory (made when missing) and removes what
// is at base unless keepDir and it is a directory; it reports whether a
// directory was kept.
func (u *unpacker) prepare(parent, base string, keepDir bool) (int, bool, error) {
	fd, err := u.t.dir(parent, true)
	if err != nil {
		return -1, false, err
	}
	var st unix.Stat_t
	err = unix.Fstatat(fd, base, &st, unix.AT_SYMLINK_NOFOLLOW)
	if errors.Is(err, unix.ENOENT) {
		return fd, false, nil
	}
	if err != nil {
		return -1, false, err
	}
	isDir := st.Mode&unix.S_IFMT == unix.S_IFDIR
	if isDir && keepDir {
		return fd, true, nil
	}
	// The tree keeps only fd (the parent's): nothing it holds is removed.
	return fd, false, removeAt(fd, base, 0)
}

// mode is the permission bits an entry keeps: setuid and setgid cleared
// (and counted), the sticky bit kept for directories only.
func (u *unpacker) mode(hdr *tar.Header, dir bool) uint32 {
	m := uint32(hdr.Mode)
	if m&(unix.S_ISUID|unix.S_ISGID) != 0 {
		u.st.SetID++
	}
	if dir {
		return m & 0o1777
	}
	return m & 0o777
}

// owner checks an entry's ids.
func owner(hdr *tar.Header) (int, int, error) {
	if hdr.Uid < 0 || hdr.Gid < 0 || hdr.Uid > 1<<31 || hdr.Gid > 1<<31 {
		return 0, 0, fmt.Errorf("%w: owner %d:%d out of range", ErrUnsafe, hdr.Uid, hdr.Gid)
	}
	return hdr.Uid, hdr.Gid, nil
}

func (u *unpacker) mkdir(rel, parent, base string, hdr *tar.Header) error {
	uid, gid, err := owner(hdr)
	if err != nil {
		return err
	}
	fd, kept, err := u.prepare(parent, base, true)
	if err != nil {
		return err
	}
	if !kept {
		if err := unix.Mkdirat(fd, base, 0o700); err != nil {
			return err
		}
	}
	if err := unix.Fchownat(fd, base, uid, gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return err
	}
	if err := unix.Fchmodat(fd, base, u.mode(hdr, true), 0); err != nil {
		return err
	}
	u.dirs = append(u.dirs, dirTimes{rel: rel, mtime: hdr.ModTime})
	return nil
}

func (u *unpacker) file(parent, base string, hdr *tar.Header, r io.Reader) error {
	uid, gid, err := owner(hdr)
	if err != nil {
		return err
	}
	dir, _, err := u.prepare(parent, base, false)
	if err != nil {
		return err
	}
	fd, err := unix.Openat(dir, base, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	err = u.copy(fd, r, hdr.Size)
	if err == nil && (uid != 0 || gid != 0) {
		err = unix.Fchown(fd, uid, gid)
	}
	if err == nil {
		err = unix.Fchmod(fd, u.mode(hdr, false))
	}
	if cerr := unix.Close(fd); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return setTimes(dir, base, hdr.ModTime)
}

// copy writes exactly size bytes of r to fd.
func (u *unpacker) copy(fd int, r io.Reader, size int64) error {
	for size > 0 {
		n, err := r.Read(u.buf[:min(int64(len(u.buf)), size)])
		if n > 0 {
			if werr := writeAll(fd, u.buf[:n]); werr != nil {
				return werr
			}
			size -= int64(n)
			u.st.Bytes += int64(n)
		}
		if err == io.EOF && size > 0 {
			return io.ErrUnexpectedEOF
		}
		if err != nil && err != io.EOF {
			return err
		}
	}
	return nil
}

func writeAll(fd int, p []byte) error {
	for len(p) > 0 {
		n, err := unix.Write(fd, p)
		if err != nil {
			return err
		}
		p = p[n:]
	}
	return nil
}

func (u *unpacker) symlink(parent, base string, hdr *tar.Header) error {
	uid, gid, err := owner(hdr)
	if err != nil {
		return err
	}
	fd, _, err := u.prepare(parent, base, false)
	if err != nil {
		return err
	}
	if err := unix.Symlinkat(hdr.Linkname, fd, base); err != nil {
		return err
	}
	if uid != 0 || gid != 0 {
		if err := unix.Fchownat(fd, base, uid, gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return err
		}
	}
	return setTimes(fd, base, hdr.ModTime)
}

// link makes a hard link to a file or symbolic link this layer already has.
func (u *unpacker) link(parent, base string, hdr *tar.Header) error {
	target, err := cleanName(hdr.Linkname)
	if err != nil {
		return fmt.Errorf("link target: %w", err)
	}
	if target == "." {
		return fmt.Errorf("%w: a hard link to the layer's root", ErrUnsafe)
	}
	tparent, tbase := path.Split(target)
	tparent = path.Clean(tparent)
	// The target's directory is opened apart from the link's: the tree
	// keeps only one.
	var tfd int
	if tparent == "." {
		tfd, err = unix.Dup(u.t.root)
	} else {
		tfd, err = u.t.open(tparent)
	}
	if err != nil {
		return fmt.Errorf("%w: link target %q is not in this layer: %w", ErrUnsafe, clip(hdr.Linkname), err)
	}
	defer unix.Close(tfd)
	var st unix.Stat_t
	if err := unix.Fstatat(tfd, tbase, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("%w: link target %q is not in this layer: %w", ErrUnsafe, clip(hdr.Linkname), err)
	}
	if t := st.Mode & unix.S_IFMT; t != unix.S_IFREG && t != unix.S_IFLNK {
		return fmt.Errorf("%w: link target %q is not a file", ErrUnsafe, clip(hdr.Linkname))
	}
	fd, _, err := u.prepare(parent, base, false)
	if err != nil {
		return err
	}
	return unix.Linkat(tfd, tbase, fd, base, 0)
}

// whiteout hides name of the layers below: a whiteout device in its place.
func (u *unpacker) whiteout(parent, name string) error {
	if name == "" || name == "." || name == ".." || strings.Contains(name, "/") {
		return fmt.Errorf("%w: whiteout of %q", ErrUnsafe, name)
	}
	fd, _, err := u.prepare(parent, name, false)
	if err != nil {
		return err
	}
	return unix.Mknodat(fd, name, unix.S_IFCHR, 0)
}

// opaque hides everything the layers below have in dir.
func (u *unpacker) opaque(dir string) error {
	fd, err := u.t.dir(dir, true)
	if err != nil {
		return err
	}
	return unix.Fsetxattr(fd, opaqueXattr, []byte("y"), 0)
}
