package inside

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"

	"golang.org/x/sys/unix"
	"openvibe.network/agentsandbox/sandbox/control"
)

// tarPut unpacks the tar (or gzipped tar) of the client's data frames into
// a workspace directory (made with its parents when missing), all or
// nothing: the archive is unpacked into a temporary directory of the
// workspace, and only when every entry was taken and every symlink checked
// is the tree moved into place (see unpacker and unpacker.commit); a
// refused archive, a full workspace or an upload that ends early leaves
// nothing. Entries are confined like every path: absolute names and ".."
// are refused, as are symlinks that are absolute or lead out of the
// workspace, hard links to anything but a file earlier in the archive,
// device nodes, fifos and any entry written through a symlink. Files and
// directories take the archive's permission bits and times, never its
// owners.
func (s *initServer) tarPut(req control.Request, fr *control.Reader, _ *control.Writer) control.Done {
	ws := int(s.workspace.Fd())
	in := &frameReader{fr: fr}
	rel, err := control.WorkspaceRel(req.Path)
	if err == nil {
		err = checkDest(ws, rel)
	}
	if err != nil {
		in.finish()
		return fileDone(req.Path, err)
	}
	tmpName, tmp, err := makeTempDir(ws)
	if err != nil {
		in.finish()
		return fileDone(req.Path, err)
	}
	u := &unpacker{tmp: tmp, destRel: rel, files: map[string]bool{}, links: map[string]string{},
		kinds: map[string]bool{}, dirs: map[string]dirMeta{}, cached: -1}
	moved := false
	defer func() {
		u.close()
		if !moved {
			_ = removeTree(ws, tmpName)
		}
	}()
	err = u.unpack(in)
	if !in.finish() {
		return control.Done{Code: control.CodeFailed, Error: req.Path + ": the upload ended before its end; nothing was written"}
	}
	if err == nil {
		err = u.checkLinks()
	}
	if err == nil {
		moved, err = u.commit(ws, tmpName)
	}
	if err != nil {
		return archiveDone(req.Path, err)
	}
	return control.Done{}
}

// checkDest refuses a destination that is not a directory or leads out of
// the workspace; a missing one will be made.
func checkDest(ws int, rel string) error {
	fd, err := openAt(ws, rel, unix.O_PATH|unix.O_DIRECTORY, 0, resolveBeneath)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err == nil {
		unix.Close(fd)
	}
	return err
}

// makeTempDir makes a fresh directory in the workspace (the same mount as
// any destination, so its tree can be renamed into place) and opens it.
func makeTempDir(ws int) (string, int, error) {
	for try := 0; ; try++ {
		name := fmt.Sprintf(".tar-put-%016x", rand.Uint64())
		err := unix.Mkdirat(ws, name, 0o700)
		if errors.Is(err, unix.EEXIST) && try < 8 {
			continue
		}
		if err != nil {
			return "", -1, err
		}
		fd, err := openAt(ws, name, unix.O_RDONLY|unix.O_DIRECTORY, 0, resolveNoLinks)
		if err == nil {
			if err = unix.Fchmod(fd, 0o755); err != nil { // a new directory's mode, whatever the umask
				unix.Close(fd)
			}
		}
		if err != nil {
			_ = unix.Unlinkat(ws, name, unix.AT_REMOVEDIR)
			return "", -1, err
		}
		return name, fd, nil
	}
}

// refusal is why an archive was refused, said for the client, with its
// protocol code.
type refusal struct {
	code, msg string
}

func (r *refusal) Error() string { return r.msg }

// refuse is a refusal with code and a message.
func refuse(code, format string, args ...any) error {
	return &refusal{code: code, msg: fmt.Sprintf(format, args...)}
}

// archiveDone is the done frame of a tar-put that failed with err.
func archiveDone(p string, err error) control.Done {
	var r *refusal
	switch {
	case errors.As(err, &r):
		return control.Done{Code: r.code, Error: r.msg}
	case errors.Is(err, unix.ENOSPC), errors.Is(err, unix.EDQUOT):
		return control.Done{Code: control.CodeNoSpace, Error: p + ": the workspace is full; nothing was written"}
	}
	return fileDone(p, err)
}

// maxArchiveEntries bounds the entries of one archive: a gzipped archive
// of a few MiB can hold millions of headers naming the same few paths,
// which no inode cap stops.
const maxArchiveEntries = 1 << 20

// errClientGone is the error of a read after the client went away before
// its end frame.
var errClientGone = errors.New("the upload ended before its end")

// frameReader reads the client's data frames as one stream, which ends
// (io.EOF) at the end frame.
type frameReader struct {
	fr    *control.Reader
	buf   []byte
	err   error
	ended bool // the end frame arrived
}

func (r *frameReader) Read(p []byte) (int, error) {
	for len(r.buf) == 0 {
		if r.err != nil {
			return 0, r.err
		}
		kind, data, err := r.fr.Next()
		switch {
		case err != nil:
			r.err = errClientGone
		case kind == control.FrameEnd:
			r.ended, r.err = true, io.EOF
		case kind == control.FrameData:
			r.buf = data // read whole before the next frame
		}
	}
	n := copy(p, r.buf)
	r.buf = r.buf[n:]
	return n, nil
}

// finish reads what is left up to the end frame and reports whether it
// arrived.
func (r *frameReader) finish() bool {
	_, _ = io.Copy(io.Discard, r)
	return r.ended
}

// unpack takes every entry of the archive in r into the temporary
// directory.
func (u *unpacker) unpack(r io.Reader) error {
	br := bufio.NewReaderSize(r, 64<<10)
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return readError(err)
		}
		r = zr
	} else {
		r = br
	}
	tr := tar.NewReader(r)
	for n := 0; ; n++ {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return readError(err)
		}
		if n == maxArchiveEntries {
			return refuse(control.CodeBadArchive, "the archive has more than %d entries", maxArchiveEntries)
		}
		if err := u.entry(hdr, tr); err != nil {
			return err
		}
	}
}

// readError is the error of an archive that could not be read.
func readError(err error) error {
	if errors.Is(err, errClientGone) {
		return err
	}
	return refuse(control.CodeBadArchive, "the archive is not a valid tar or gzipped tar: %v", err)
}
