package inside

import (
	"archive/tar"
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"golang.org/x/sys/unix"
	"openvibe.network/agentsandbox/sandbox/control"
)

// tarGet sends a tar of a workspace directory's tree as data frames: its
// entries with names relative to it (directories end in "/"), in
// depth-first order by name; regular files, directories and symlinks (as
// links, never followed), a file's further hard links as links to its first
// name; other files (fifos, sockets, devices) are left out. Modes are the
// permission bits, times whole seconds.
func (s *initServer) tarGet(req control.Request, _ *control.Reader, fw *control.Writer) control.Done {
	rel, err := control.WorkspaceRel(req.Path)
	if err != nil {
		return fileDone(req.Path, control.ErrPath)
	}
	root, err := openDirAt(int(s.workspace.Fd()), rel)
	if err != nil {
		return fileDone(req.Path, err)
	}
	defer unix.Close(root)
	bw := bufio.NewWriterSize(control.KindWriter{W: fw, Kind: control.FrameData}, downloadFrame)
	a := &archiver{root: root, tw: tar.NewWriter(bw), links: map[[2]uint64]string{}}
	if err := a.tree(); err != nil {
		return tarDone(req.Path, err)
	}
	if err := a.tw.Close(); err != nil {
		return tarDone(req.Path, err)
	}
	if err := bw.Flush(); err != nil {
		return tarDone(req.Path, err)
	}
	return control.Done{}
}

// tarDone is the done frame of a tar-get that failed.
func tarDone(p string, err error) control.Done {
	var ee *entryError
	if errors.As(err, &ee) {
		d := fileDone(p+"/"+ee.name, ee.err)
		d.Error = "archive " + d.Error
		return d
	}
	return control.Done{Code: control.CodeFailed, Error: "archive " + p + ": " + err.Error()}
}

// entryError is the error of one entry of a tree.
type entryError struct {
	name string
	err  error
}

func (e *entryError) Error() string { return e.name + ": " + e.err.Error() }
func (e *entryError) Unwrap() error { return e.err }

// archiver writes the tree beneath root to tw with one descriptor at a
// time besides root: each entry is looked up by its path beneath root,
// following no symlink, so no descriptor is held per level.
type archiver struct {
	root  int
	tw    *tar.Writer
	links map[[2]uint64]string // device and inode of files with several links -> first name
}

// dirLevel is a directory being archived and the names in it still to go.
type dirLevel struct {
	rel   string
	names []string
}

// tree archives every entry beneath root, depth first.
func (a *archiver) tree() error {
	names, err := readNames(a.root)
	if err != nil {
		return err
	}
	stack := []dirLevel{{rel: ".", names: names}}
	for len(stack) > 0 {
		top := &stack[len(stack)-1]
		if len(top.names) == 0 {
			stack = stack[:len(stack)-1]
			continue
		}
		p := joinRel(top.rel, top.names[0])
		top.names = top.names[1:]
		sub, err := a.entry(p)
		if err != nil {
			return &entryError{name: p, err: err}
		}
		if sub != nil {
			stack = append(stack, dirLevel{rel: p, names: sub})
		}
	}
	return nil
}

// entry archives the entry at p and returns, for a directory, its names.
func (a *archiver) entry(p string) ([]string, error) {
	if len(p) > maxPathBytes {
		return nil, unix.ENAMETOOLONG
	}
	fd, err := openAt(a.root, p, unix.O_PATH|unix.O_NOFOLLOW, 0, resolveNoLinks)
	if errors.Is(err, unix.ENOENT) {
		return nil, nil // removed meanwhile
	}
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, err
	}
	hdr := &tar.Header{Name: p, Mode: int64(st.Mode & 0o7777), ModTime: time.Unix(st.Mtim.Sec, 0),
		Uid: int(st.Uid), Gid: int(st.Gid)}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		hdr.Typeflag, hdr.Name = tar.TypeDir, p+"/"
		names, err := readNames(fd)
		if err != nil {
			return nil, err
		}
		return names, a.tw.WriteHeader(hdr)
	case unix.S_IFLNK:
		target, err := readlinkFd(fd)
		if err != nil {
			return nil, err
		}
		hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, target
		return nil, a.tw.WriteHeader(hdr)
	case unix.S_IFREG:
		return nil, a.file(p, hdr, &st)
	}
	return nil, nil // fifos, sockets and devices are not archived
}

// file archives the regular file at p (or a link to its first name).
func (a *archiver) file(p string, hdr *tar.Header, st *unix.Stat_t) error {
	if st.Nlink > 1 {
		key := [2]uint64{st.Dev, st.Ino}
		if first, ok := a.links[key]; ok {
			hdr.Typeflag, hdr.Linkname = tar.TypeLink, first
			return a.tw.WriteHeader(hdr)
		}
		a.links[key] = p
	}
	fd, err := openAt(a.root, p, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY, 0, resolveNoLinks)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), p)
	defer f.Close()
	hdr.Typeflag, hdr.Size = tar.TypeReg, st.Size
	if err := a.tw.WriteHeader(hdr); err != nil {
		return err
	}
	n, err := io.Copy(a.tw, io.LimitReader(f, st.Size))
	if err == nil && n < st.Size {
		err = fmt.Errorf("it shrank from %d to %d bytes while it was archived", st.Size, n)
	}
	return err
}

// readlinkFd reads the target of the symlink an O_PATH descriptor names.
func readlinkFd(fd int) (string, error) {
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(fd, "", buf)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}
