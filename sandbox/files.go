package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"

	"openvibe.network/agentsandbox/sandbox/control"
)

// More errors of the file operations (see also ErrPath, ErrNoSpace,
// ErrIsDir and ErrNotDir).
var (
	// ErrExists is returned when something is in the way: a file where a
	// directory is to be made, or an archive's entry that clashes with the
	// destination.
	ErrExists = errors.New("sandbox: the path exists")
	// ErrNotEmpty is returned for a directory with entries removed without
	// recursive.
	ErrNotEmpty = errors.New("sandbox: the directory is not empty")
	// ErrTooLarge is returned for a path or listing past the init's bounds,
	// and for a command whose argv and env do not fit in a request.
	ErrTooLarge = errors.New("sandbox: too large")
	// ErrNotRegular is returned by GetFile for a fifo, socket or device.
	ErrNotRegular = errors.New("sandbox: not a regular file")
	// ErrInvalidArchive is wrapped by the ArchiveError of an archive that
	// PutArchive refused.
	ErrInvalidArchive = errors.New("sandbox: archive refused")
)

// ArchiveError is why PutArchive refused an archive: which entry and why,
// said for the person who sent it (Reason). It wraps ErrInvalidArchive, or
// ErrExists when an entry clashes with what the destination holds.
type ArchiveError struct {
	Reason string
	Err    error
}

// Error implements error.
func (e *ArchiveError) Error() string { return "archive refused: " + e.Reason }

// Unwrap returns the sentinel.
func (e *ArchiveError) Unwrap() error { return e.Err }

// FileInfo describes an entry of a workspace directory (see ListDir).
type FileInfo = control.FileInfo

// maxListing bounds the JSON of one directory listing the runtime holds.
const maxListing = 64 << 20

// PutFile writes r to path (relative to /workspace; parents are created)
// in sandbox id with mode (0: 0644). The content goes into an unnamed file
// that takes the path, replacing what was there, only once all of r was
// written: when r fails, ctx ends or the workspace fills up, nothing is
// left. Errors: ErrNotFound; ErrPath when path leaves the workspace by
// "..", an absolute path or a symlink; ErrNoSpace past the disk or inode
// cap; ErrIsDir; ErrNotDir; r's error, wrapped; ctx ended.
func (r *Runtime) PutFile(ctx context.Context, id, path string, src io.Reader, mode fs.FileMode) error {
	rel, err := control.WorkspaceRel(path)
	if err != nil || rel == "." {
		return fmt.Errorf("put %s: %w", path, ErrPath)
	}
	if err := r.putViaFD(ctx, id, control.Request{Op: control.OpPutFD, Path: rel, Mode: uint32(mode.Perm())}, src); err != nil {
		return fmt.Errorf("put %s: %w", path, err)
	}
	return nil
}

// GetFile copies the file at path (relative to /workspace) in sandbox id to
// w. Errors: ErrNotFound; ErrPath as for PutFile; fs.ErrNotExist; ErrIsDir;
// ErrNotRegular; ctx ended.
func (r *Runtime) GetFile(ctx context.Context, id, path string, w io.Writer) error {
	rel, err := control.WorkspaceRel(path)
	if err != nil {
		return fmt.Errorf("get %s: %w", path, ErrPath)
	}
	done, err := r.getViaFD(ctx, id, control.Request{Op: control.OpGetFD, Path: rel}, w)
	if done.Code == control.CodeInvalid {
		err = ErrNotRegular
	}
	if err != nil {
		return fmt.Errorf("get %s: %w", path, err)
	}
	return nil
}

// ListDir returns the entries of directory dir (relative to /workspace;
// "" or "." for it) in sandbox id, sorted by name; symlinks are described,
// not followed. Errors: ErrNotFound; ErrPath; fs.ErrNotExist; ErrNotDir;
// ErrTooLarge for a directory too large to list; ctx ended.
func (r *Runtime) ListDir(ctx context.Context, id, dir string) ([]FileInfo, error) {
	rel, err := dirRel(dir)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", dir, err)
	}
	var buf bytes.Buffer
	if _, err := r.fileOp(ctx, id, control.Request{Op: control.OpList, Path: rel}, nil, &cappedWriter{w: &buf, n: maxListing}); err != nil {
		if errors.Is(err, errTooMuch) {
			err = ErrTooLarge
		}
		return nil, fmt.Errorf("list %s: %w", dir, err)
	}
	out := []FileInfo{}
	dec := json.NewDecoder(&buf)
	for dec.More() {
		var fi FileInfo
		if err := dec.Decode(&fi); err != nil {
			return nil, fmt.Errorf("list %s: read the init's answer: %w", dir, err)
		}
		out = append(out, fi)
	}
	return out, nil
}

// Remove removes path (relative to /workspace) in sandbox id: a file, a
// symlink (never what it points to) or an empty directory; with recursive,
// a directory and everything in it, however deep. Errors: ErrNotFound;
// ErrPath (the workspace itself too); fs.ErrNotExist; ErrNotEmpty; ctx
// ended.
func (r *Runtime) Remove(ctx context.Context, id, path string, recursive bool) error {
	rel, err := control.WorkspaceRel(path)
	if err != nil || rel == "." {
		return fmt.Errorf("remove %s: %w", path, ErrPath)
	}
	if _, err := r.fileOp(ctx, id, control.Request{Op: control.OpRemove, Path: rel, Recursive: recursive}, nil, nil); err != nil {
		return fmt.Errorf("remove %s: %w", path, err)
	}
	return nil
}

// Mkdir makes directory dir (relative to /workspace) in sandbox id with its
// parents, the last with mode (0: 0755); a directory that exists is left
// as it is. Errors: ErrNotFound; ErrPath; ErrExists when a file is in its
// place; ErrNotDir when a parent is a file; ErrNoSpace; ctx ended.
func (r *Runtime) Mkdir(ctx context.Context, id, dir string, mode fs.FileMode) error {
	rel, err := dirRel(dir)
	if err != nil {
		return fmt.Errorf("mkdir %s: %w", dir, err)
	}
	if _, err := r.fileOp(ctx, id, control.Request{Op: control.OpMkdir, Path: rel, Mode: uint32(mode.Perm())}, nil, nil); err != nil {
		return fmt.Errorf("mkdir %s: %w", dir, err)
	}
	return nil
}

// GetArchive writes a tar of the tree of directory dir (relative to
// /workspace; "" for all of it) in sandbox id to w: names relative to dir,
// regular files, directories, symlinks as links and further hard links as
// links; fifos, sockets and devices are left out. When it fails after
// writing, what w got is not a whole archive. Errors: ErrNotFound; ErrPath;
// fs.ErrNotExist; ErrNotDir; a tree deeper than paths may be (ErrTooLarge);
// ctx ended.
func (r *Runtime) GetArchive(ctx context.Context, id, dir string, w io.Writer) error {
	rel, err := dirRel(dir)
	if err != nil {
		return fmt.Errorf("archive %s: %w", dir, err)
	}
	if _, err := r.fileOp(ctx, id, control.Request{Op: control.OpTarGet, Path: rel}, nil, w); err != nil {
		return fmt.Errorf("archive %s: %w", dir, err)
	}
	return nil
}

// PutArchive unpacks the tar (or gzipped tar) src into directory dir
// (relative to /workspace, made when missing) of sandbox id, all or
// nothing: the init unpacks it into a temporary directory of the workspace
// and moves the tree into place only when the whole archive was valid,
// merging it into a directory that exists (files replace files,
// directories merge). Absolute names, "..", absolute symlinks, symlinks
// that lead out of the workspace, hard links to anything but a file
// earlier in the archive, device nodes and fifos are refused with an
// *ArchiveError, and then nothing is written. Errors: ErrNotFound; ErrPath;
// ErrNotDir when dir is a file; *ArchiveError (wrapping ErrInvalidArchive
// or ErrExists); ErrNoSpace past the workspace's caps; src's error,
// wrapped; ctx ended.
func (r *Runtime) PutArchive(ctx context.Context, id, dir string, src io.Reader) error {
	rel, err := dirRel(dir)
	if err != nil {
		return fmt.Errorf("unpack into %s: %w", dir, err)
	}
	done, err := r.fileOp(ctx, id, control.Request{Op: control.OpTarPut, Path: rel}, src, nil)
	switch done.Code {
	case control.CodeBadArchive:
		err = &ArchiveError{Reason: done.Error, Err: ErrInvalidArchive}
	case control.CodeExists:
		err = &ArchiveError{Reason: done.Error, Err: ErrExists}
	}
	if err != nil {
		return fmt.Errorf("unpack into %s: %w", dir, err)
	}
	return nil
}

// dirRel is the workspace-relative path of a directory ("" is the
// workspace). Errors: ErrPath.
func dirRel(dir string) (string, error) {
	if dir == "" {
		return ".", nil
	}
	rel, err := control.WorkspaceRel(dir)
	if err != nil {
		return "", ErrPath
	}
	return rel, nil
}

// fileOp runs one file operation on sandbox id's init: req, then (for put
// and tar-put) src as data frames, then the init's data frames to dst until
// its done frame. When src fails, the init is told so by the end of the
// connection's write side before any end frame, and discards what it got.
func (r *Runtime) fileOp(ctx context.Context, id string, req control.Request, src io.Reader, dst io.Writer) (control.Done, error) {
	b, err := r.get(id)
	if err != nil {
		return control.Done{}, err
	}
	c, fw, end, err := r.request(ctx, b, req)
	if err != nil {
		return control.Done{}, err
	}
	defer end()
	if src == nil {
		src = bytes.NewReader(nil)
	}
	in := &sourceReader{r: src}
	var sendErr error
	if req.Op == control.OpPut || req.Op == control.OpTarPut {
		if sendErr = sendFrames(fw, in); sendErr != nil {
			closeWrite(c)
		}
	}
	done, err := readReply(c, map[byte]io.Writer{control.FrameData: dst})
	switch {
	case in.err != nil:
		return done, fmt.Errorf("read upload: %w", in.err)
	case ctx.Err() != nil && (err != nil || sendErr != nil):
		return done, ctx.Err()
	case err != nil:
		return done, errors.Join(sendErr, err)
	case sendErr != nil:
		return done, sendErr
	}
	return done, codeError(done)
}

// uploadFrame is the size of an upload's data frames: large frames halve
// the cost per byte over the control socket (a 100 MiB put on the 2-core
// development machine: 32 KiB frames 270 MiB/s, 256 KiB 510 MiB/s, 1 MiB no
// better).
const uploadFrame = 256 << 10

// sendFrames sends r as data frames of up to uploadFrame bytes, then, only
// when r ended with io.EOF, the end frame. (Not io.ReadFull: it reports a
// reader's io.ErrUnexpectedEOF — an HTTP body cut short — like an end.)
func sendFrames(fw *control.Writer, r io.Reader) error {
	buf := make([]byte, uploadFrame)
	for {
		n, err := fill(r, buf)
		if n > 0 {
			if werr := fw.Frame(control.FrameData, buf[:n]); werr != nil {
				return werr
			}
		}
		switch {
		case errors.Is(err, io.EOF):
			return fw.Frame(control.FrameEnd, nil)
		case err != nil:
			return fmt.Errorf("read input: %w", err)
		}
	}
}

// fill reads from r into buf until buf is full or r returns an error (io.EOF
// at its end).
func fill(r io.Reader, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		m, err := r.Read(buf[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// closeWrite ends c's write side (all of c when it cannot).
func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok && cw.CloseWrite() == nil {
		return
	}
	c.Close()
}

// sourceReader keeps the error of the reader it reads, so that a failed
// upload is told from a failed connection.
type sourceReader struct {
	r   io.Reader
	err error
}

func (s *sourceReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		s.err = err
	}
	return n, err
}

// errTooMuch is the error of a cappedWriter past its cap.
var errTooMuch = errors.New("answer too large")

// cappedWriter writes at most n bytes to w, then fails.
type cappedWriter struct {
	w io.Writer
	n int64
}

func (c *cappedWriter) Write(p []byte) (int, error) {
	if int64(len(p)) > c.n {
		return 0, errTooMuch
	}
	c.n -= int64(len(p))
	return c.w.Write(p)
}
