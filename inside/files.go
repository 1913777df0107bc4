package inside

import (
	"errors"
	"io"
	"os"
	"strings"

	"golang.org/x/sys/unix"
	"openvibe.network/agentsandbox/sandbox/control"
)

// resolveBeneath confines a lookup to the workspace: no "..", absolute path
// or symlink may leave it, and no /proc magic link is followed.
const resolveBeneath = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS

// put writes the client's data frames to a file in the workspace, creating
// its parent directories.
func (s *initServer) put(req control.Request, fr *control.Reader) control.Done {
	f, done := s.openForPut(req.Path, os.FileMode(req.Mode).Perm())
	if f == nil {
		_ = drain(fr, nil)
		return done
	}
	defer f.Close()
	w := &stickyWriter{w: f}
	if err := drain(fr, w); err != nil || w.err != nil {
		return fileDone(req.Path, errors.Join(w.err, err))
	}
	if err := f.Close(); err != nil {
		return fileDone(req.Path, err)
	}
	return control.Done{}
}

func (s *initServer) openForPut(p string, mode os.FileMode) (*os.File, control.Done) {
	rel, err := control.WorkspaceRel(p)
	if err != nil || rel == "." {
		return nil, fileDone(p, control.ErrPath)
	}
	if mode == 0 {
		mode = 0o644
	}
	parts := strings.Split(rel, "/")
	for i := range parts[:len(parts)-1] {
		if err := s.mkdirBeneath(strings.Join(parts[:i], "/"), parts[i]); err != nil {
			return nil, fileDone(p, err)
		}
	}
	fd, err := unix.Openat2(int(s.workspace.Fd()), rel, &unix.OpenHow{
		Flags:   unix.O_WRONLY | unix.O_CREAT | unix.O_TRUNC | unix.O_CLOEXEC,
		Mode:    uint64(mode),
		Resolve: resolveBeneath,
	})
	if err != nil {
		return nil, fileDone(p, err)
	}
	f := os.NewFile(uintptr(fd), rel)
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return nil, fileDone(p, err)
	}
	return f, control.Done{}
}

// mkdirBeneath creates directory name in the workspace directory parent
// (opened beneath the workspace, so a symlinked parent cannot lead out).
func (s *initServer) mkdirBeneath(parent, name string) error {
	if parent == "" {
		parent = "."
	}
	fd, err := unix.Openat2(int(s.workspace.Fd()), parent, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: resolveBeneath,
	})
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

// get sends a workspace file to the client as data frames.
func (s *initServer) get(req control.Request, fw *control.Writer) control.Done {
	rel, err := control.WorkspaceRel(req.Path)
	if err != nil {
		return fileDone(req.Path, control.ErrPath)
	}
	fd, err := unix.Openat2(int(s.workspace.Fd()), rel, &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_CLOEXEC | unix.O_NOCTTY | unix.O_NONBLOCK,
		Resolve: resolveBeneath,
	})
	if err != nil {
		return fileDone(req.Path, err)
	}
	f := os.NewFile(uintptr(fd), rel)
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fileDone(req.Path, err)
	}
	switch {
	case fi.IsDir():
		return fileDone(req.Path, unix.EISDIR)
	case !fi.Mode().IsRegular():
		return control.Done{Code: control.CodeInvalid, Error: req.Path + " is not a regular file"}
	}
	if _, err := io.Copy(control.KindWriter{W: fw, Kind: control.FrameData}, f); err != nil {
		return control.Done{Code: control.CodeFailed, Error: "read " + req.Path + ": " + err.Error()}
	}
	return control.Done{}
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
		return control.Done{Code: control.CodeNotDir, Error: p + ": a parent is not a directory"}
	}
	return control.Done{Code: control.CodeFailed, Error: p + ": " + err.Error()}
}
