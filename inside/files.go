package inside

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
	"openvibe.network/agentsandbox/sandbox/control"
)

// put writes the client's data frames to a file in the workspace. The
// content goes into an unnamed file of the workspace (O_TMPFILE), which is
// linked into place, parents created and whatever file was there replaced
// at once, only when the end frame arrived and every byte was written: a
// failed, cancelled or oversized upload leaves nothing, not even the parent
// directories it would have made. A symlink at the path that stays in the
// workspace is written through (its target is replaced).
func (s *initServer) put(req control.Request, fr *control.Reader) control.Done {
	ws := int(s.workspace.Fd())
	rel, err := control.WorkspaceRel(req.Path)
	if err != nil || rel == "." {
		_ = drain(fr, nil)
		return fileDone(req.Path, control.ErrPath)
	}
	mode := os.FileMode(req.Mode).Perm()
	if mode == 0 {
		mode = 0o644
	}
	if err := checkPutTarget(ws, rel); err != nil {
		_ = drain(fr, nil)
		return fileDone(req.Path, err)
	}
	fd, err := openAt(ws, ".", unix.O_TMPFILE|unix.O_WRONLY, 0o600, resolveBeneath)
	if err != nil {
		_ = drain(fr, nil)
		return fileDone(req.Path, err)
	}
	tmp := os.NewFile(uintptr(fd), "upload")
	defer tmp.Close() // an unnamed file that was not linked goes with it
	w := &stickyWriter{w: tmp}
	if err := drain(fr, w); err != nil {
		return control.Done{Code: control.CodeFailed, Error: req.Path + ": the upload ended before its end; nothing was written"}
	}
	if w.err != nil {
		return fileDone(req.Path, w.err)
	}
	if err := tmp.Chmod(mode); err != nil { // exactly mode, whatever the umask
		return fileDone(req.Path, err)
	}
	if err := linkInto(ws, rel, tmp); err != nil {
		return fileDone(req.Path, err)
	}
	return control.Done{}
}

// checkPutTarget refuses, before any content is read, a put at a directory,
// under a file, or through a symlink that leaves the workspace.
func checkPutTarget(ws int, rel string) error {
	fd, err := openAt(ws, rel, unix.O_PATH, 0, resolveBeneath)
	if errors.Is(err, unix.ENOENT) {
		return nil // the file, and perhaps parents, will be made
	}
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		return unix.EISDIR
	}
	return nil
}

// linkInto links the unnamed file f at rel (see put): under a temporary
// name in the target's directory, then renamed over the target.
func linkInto(ws int, rel string, f *os.File) error {
	parent, base, err := putPlace(ws, rel)
	if err != nil {
		return err
	}
	defer unix.Close(parent)
	proc := "/proc/self/fd/" + strconv.Itoa(int(f.Fd()))
	var tmpName string
	for try := 0; ; try++ {
		tmpName = fmt.Sprintf(".upload-%016x", rand.Uint64())
		err = unix.Linkat(unix.AT_FDCWD, proc, parent, tmpName, unix.AT_SYMLINK_FOLLOW)
		if !errors.Is(err, unix.EEXIST) || try == 8 {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("link upload: %w", err)
	}
	if err := unix.Renameat(parent, tmpName, parent, base); err != nil {
		_ = unix.Unlinkat(parent, tmpName, 0)
		return err
	}
	return nil
}

// putPlace makes the parents of rel and returns a descriptor of the
// directory the file goes into and its name there: rel's, or, when rel is a
// symlink that stays in the workspace, its target's.
func putPlace(ws int, rel string) (parent int, base string, err error) {
	dir, base := splitRel(rel)
	if parent, err = mkdirAll(ws, dir); err != nil {
		return -1, "", err
	}
	st, err := lstatAt(parent, base)
	if err != nil || st.Mode&unix.S_IFMT != unix.S_IFLNK {
		return parent, base, nil
	}
	fd, err := openAt(ws, rel, unix.O_PATH, 0, resolveBeneath)
	if errors.Is(err, unix.ENOENT) {
		return parent, base, nil // a dangling link is replaced
	}
	unix.Close(parent)
	if err != nil {
		return -1, "", err
	}
	defer unix.Close(fd)
	real, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
	if err != nil {
		return -1, "", err
	}
	if rel, err = control.WorkspaceRel(real); err != nil || rel == "." {
		return -1, "", control.ErrPath
	}
	dir, base = splitRel(rel)
	if parent, err = openAt(ws, dir, unix.O_PATH|unix.O_DIRECTORY, 0, resolveBeneath); err != nil {
		return -1, "", err
	}
	return parent, base, nil
}

// mkdirAll makes the directory rel of the workspace with its parents (each
// looked up beneath the workspace, so a symlinked parent cannot lead out)
// and returns an O_PATH descriptor of it.
func mkdirAll(ws int, rel string) (int, error) {
	if rel != "." {
		parts := strings.Split(rel, "/")
		for i := range parts {
			if err := mkdirBeneath(ws, strings.Join(parts[:i], "/"), parts[i]); err != nil {
				return -1, err
			}
		}
	}
	return openAt(ws, rel, unix.O_PATH|unix.O_DIRECTORY, 0, resolveBeneath)
}

// mkdirBeneath creates directory name in the workspace directory parent
// (opened beneath the workspace, so a symlinked parent cannot lead out).
func mkdirBeneath(ws int, parent, name string) error {
	if parent == "" {
		parent = "."
	}
	fd, err := openAt(ws, parent, unix.O_PATH|unix.O_DIRECTORY, 0, resolveBeneath)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := unix.Mkdirat(fd, name, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
		return err
	}
	return nil
}

// stickyWriter keeps the first write error and discards everything after
// it, so the client's remaining frames are still read.
type stickyWriter struct {
	w   io.Writer
	err error
}

func (s *stickyWriter) Write(p []byte) (int, error) {
	if s.err == nil {
		_, s.err = s.w.Write(p)
	}
	return len(p), nil
}

// downloadFrame is the size of a download's data frames: large frames
// halve the cost per byte over the control socket.
const downloadFrame = 256 << 10

// get sends a workspace file to the client as data frames.
func (s *initServer) get(req control.Request, fw *control.Writer) control.Done {
	f, done := s.openRegular(req.Path)
	if f == nil {
		return done
	}
	defer f.Close()
	bw := bufio.NewWriterSize(control.KindWriter{W: fw, Kind: control.FrameData}, downloadFrame)
	if _, err := io.Copy(bw, f); err != nil {
		return control.Done{Code: control.CodeFailed, Error: "read " + req.Path + ": " + err.Error()}
	}
	if err := bw.Flush(); err != nil {
		return control.Done{Code: control.CodeFailed, Error: "send " + req.Path + ": " + err.Error()}
	}
	return control.Done{}
}

// openRegular opens the regular file at p (relative to the workspace,
// beneath it) to read; nil and the done frame of the error when it cannot.
func (s *initServer) openRegular(p string) (*os.File, control.Done) {
	rel, err := control.WorkspaceRel(p)
	if err != nil {
		return nil, fileDone(p, control.ErrPath)
	}
	fd, err := openAt(int(s.workspace.Fd()), rel, unix.O_RDONLY|unix.O_NOCTTY|unix.O_NONBLOCK, 0, resolveBeneath)
	if err != nil {
		return nil, fileDone(p, err)
	}
	f := os.NewFile(uintptr(fd), rel)
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fileDone(p, err)
	}
	switch {
	case fi.IsDir():
		f.Close()
		return nil, fileDone(p, unix.EISDIR)
	case !fi.Mode().IsRegular():
		f.Close()
		return nil, control.Done{Code: control.CodeInvalid, Error: p + " is not a regular file"}
	}
	return f, control.Done{}
}

// fileDone maps a file error to the protocol's codes.
func fileDone(p string, err error) control.Done {
	switch {
	case errors.Is(err, control.ErrPath), errors.Is(err, unix.EXDEV), errors.Is(err, unix.ELOOP):
		return control.Done{Code: control.CodePath, Error: p + ": path leaves the workspace"}
	case errors.Is(err, unix.ENOENT):
		return control.Done{Code: control.CodeNotExist, Error: p + ": no such file"}
	case errors.Is(err, unix.ENOSPC), errors.Is(err, unix.EDQUOT):
		return control.Done{Code: control.CodeNoSpace, Error: p + ": the workspace is full"}
	case errors.Is(err, unix.EISDIR):
		return control.Done{Code: control.CodeIsDir, Error: p + " is a directory"}
	case errors.Is(err, unix.ENOTDIR):
		return control.Done{Code: control.CodeNotDir, Error: p + ": a part of the path is not a directory"}
	case errors.Is(err, unix.EEXIST):
		return control.Done{Code: control.CodeExists, Error: p + " exists"}
	case errors.Is(err, unix.ENOTEMPTY):
		return control.Done{Code: control.CodeNotEmpty, Error: p + " is a directory that is not empty"}
	case errors.Is(err, unix.ENAMETOOLONG):
		return control.Done{Code: control.CodeTooLarge, Error: p + ": the path is too long"}
	}
	return control.Done{Code: control.CodeFailed, Error: p + ": " + err.Error()}
}
