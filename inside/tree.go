package inside

import (
	"bufio"
	"encoding/json"
	"errors"
	"os"

	"golang.org/x/sys/unix"
	"openvibe.network/agentsandbox/sandbox/control"
)

// list sends the entries of a workspace directory as data frames of JSON
// lines, one control.FileInfo each, sorted by name. Symlinks are described,
// not followed.
func (s *initServer) list(req control.Request, _ *control.Reader, fw *control.Writer) control.Done {
	rel, err := control.WorkspaceRel(req.Path)
	if err != nil {
		return fileDone(req.Path, control.ErrPath)
	}
	fd, err := openDirAt(int(s.workspace.Fd()), rel)
	if err != nil {
		return fileDone(req.Path, err)
	}
	defer unix.Close(fd)
	names, err := readNames(fd)
	if err != nil {
		return fileDone(req.Path, err)
	}
	bw := bufio.NewWriterSize(control.KindWriter{W: fw, Kind: control.FrameData}, 64<<10)
	enc := json.NewEncoder(bw)
	for _, name := range names {
		st, err := lstatAt(fd, name)
		if errors.Is(err, unix.ENOENT) {
			continue // removed meanwhile
		}
		if err != nil {
			return fileDone(joinRel(rel, name), err)
		}
		if err := enc.Encode(fileInfo(name, &st)); err != nil {
			return control.Done{Code: control.CodeFailed, Error: "send list: " + err.Error()}
		}
	}
	if err := bw.Flush(); err != nil {
		return control.Done{Code: control.CodeFailed, Error: "send list: " + err.Error()}
	}
	return control.Done{}
}

// mkdir makes a workspace directory with its parents; one that exists is
// left as it is. req.Mode (default 0755) is the mode of the last directory
// when it is made. A file in its place is CodeExists.
func (s *initServer) mkdir(req control.Request, _ *control.Reader, _ *control.Writer) control.Done {
	ws := int(s.workspace.Fd())
	rel, err := control.WorkspaceRel(req.Path)
	if err != nil {
		return fileDone(req.Path, control.ErrPath)
	}
	if rel == "." {
		return control.Done{}
	}
	mode := os.FileMode(req.Mode).Perm()
	if mode == 0 {
		mode = 0o755
	}
	dir, base := splitRel(rel)
	parent, err := mkdirAll(ws, dir)
	if err != nil {
		return fileDone(req.Path, err)
	}
	defer unix.Close(parent)
	switch err := unix.Mkdirat(parent, base, 0o700); {
	case errors.Is(err, unix.EEXIST):
		fd, err := openAt(ws, rel, unix.O_PATH|unix.O_DIRECTORY, 0, resolveBeneath)
		if errors.Is(err, unix.ENOTDIR) {
			return fileDone(req.Path, unix.EEXIST)
		}
		if err != nil {
			return fileDone(req.Path, err)
		}
		unix.Close(fd)
		return control.Done{}
	case err != nil:
		return fileDone(req.Path, err)
	}
	if err := unix.Fchmodat(parent, base, uint32(mode), 0); err != nil {
		return fileDone(req.Path, err)
	}
	return control.Done{}
}

// remove removes a workspace file, symlink (never what it points to) or
// empty directory; with req.Recursive a directory with everything in it
// (see removeTree). The workspace itself cannot be removed.
func (s *initServer) remove(req control.Request, _ *control.Reader, _ *control.Writer) control.Done {
	rel, err := control.WorkspaceRel(req.Path)
	if err != nil || rel == "." {
		return fileDone(req.Path, control.ErrPath)
	}
	dir, base := splitRel(rel)
	parent, err := openAt(int(s.workspace.Fd()), dir, unix.O_PATH|unix.O_DIRECTORY, 0, resolveBeneath)
	if err != nil {
		return fileDone(req.Path, err)
	}
	defer unix.Close(parent)
	if err := removeAt(parent, base, req.Recursive); err != nil {
		return fileDone(req.Path, err)
	}
	return control.Done{}
}

// removeAt removes name in directory parent: a file, a symlink or an empty
// directory, or, when recursive, a directory tree. A non-empty directory
// without recursive is ENOTEMPTY.
func removeAt(parent int, name string, recursive bool) error {
	err := unix.Unlinkat(parent, name, 0)
	if !errors.Is(err, unix.EISDIR) {
		return err
	}
	err = unix.Unlinkat(parent, name, unix.AT_REMOVEDIR)
	if errors.Is(err, unix.EEXIST) {
		err = unix.ENOTEMPTY
	}
	if !errors.Is(err, unix.ENOTEMPTY) || !recursive {
		return err
	}
	return removeTree(parent, name)
}
