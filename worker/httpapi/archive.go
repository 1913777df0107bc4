package httpapi

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"

	"openvibe.network/agentsandbox/sandbox"
)

// getArchive handles GET /v1/sandboxes/{id}/archive/{path...}: a tar of the
// directory's tree (the workspace's for an empty path), streamed as it is
// read. A failure after the first bytes cuts the connection, so a client
// never takes a partial archive for a whole one.
func (s *Server) getArchive(w http.ResponseWriter, r *http.Request) error {
	id, rel, err := s.fileTarget(r, true)
	if err != nil {
		return err
	}
	lw := &lazyWriter{w: w, contentType: "application/x-tar"}
	if err := s.cfg.Runtime.GetArchive(r.Context(), id, rel, lw); err != nil {
		return fileError(rel, err)
	}
	lw.finish()
	addLog(r.Context(), slog.Int64("bytes", lw.n))
	return nil
}

// putArchive handles PUT /v1/sandboxes/{id}/archive/{path...}: the body, a
// tar or gzipped tar of at most Config.MaxUpload bytes, is unpacked into the
// directory (made when missing; merged into when it exists), all or
// nothing. A zip archive is refused by its first bytes, saying so.
func (s *Server) putArchive(w http.ResponseWriter, r *http.Request) error {
	id, rel, err := s.fileTarget(r, true)
	if err != nil {
		return err
	}
	body, err := s.upload(w, r)
	if err != nil {
		return err
	}
	head := make([]byte, len(zipMagic))
	n, _ := io.ReadFull(body, head)
	if magic := string(head[:n]); magic == zipMagic || magic == zipEmptyMagic {
		abandonBody(w)
		return newError(CodeInvalidArchive, "the body is a zip archive, and zip is not supported: send a tar or a gzipped tar (e.g. tar -czf - -C DIR .); nothing was written")
	}
	if err := s.cfg.Runtime.PutArchive(r.Context(), id, rel, io.MultiReader(bytes.NewReader(head[:n]), body)); err != nil {
		return body.fileError(rel, err)
	}
	addLog(r.Context(), slog.Int64("bytes", body.n))
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// The first bytes of a zip archive: a local file header, or the end of an
// empty archive's central directory.
const (
	zipMagic      = "PK\x03\x04"
	zipEmptyMagic = "PK\x05\x06"
)

// limitedBody remembers the error of the body it reads, so a body over the
// limit is a 413 whatever the runtime makes of the error.
type limitedBody struct {
	w   http.ResponseWriter
	r   io.Reader
	err error
	n   int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.n += int64(n)
	if err != nil && !errors.Is(err, io.EOF) {
		b.err = err
	}
	return n, err
}

// fileError is fileError for an upload: a body over the limit is a 413, one
// that ended early a 400. The rest of the body is not read.
func (b *limitedBody) fileError(rel string, err error) error {
	abandonBody(b.w)
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(b.err, &tooBig):
		return tooBig
	case b.err != nil:
		return badRequest("the upload ended before its end (%d bytes arrived); nothing was written", b.n)
	}
	return fileError(rel, err)
}

// fileError maps an error of a file operation on path rel of a sandbox
// that exists, by the runtime's sentinels (never by error text); others
// are the worker's faults.
func fileError(rel string, err error) error {
	if rel == "" {
		rel = "/workspace"
	}
	var archive *sandbox.ArchiveError
	switch {
	case errors.As(err, &archive) && errors.Is(err, sandbox.ErrExists):
		return newError(CodeExists, "the archive clashes with the destination: %s", archive.Reason)
	case errors.As(err, &archive):
		return newError(CodeInvalidArchive, "the archive was refused, nothing of it was written: %s", archive.Reason)
	case errors.Is(err, sandbox.ErrNotFound):
		return newError(CodeSandboxNotFound, "the sandbox ended while the files were read or written")
	case errors.Is(err, fs.ErrNotExist):
		return newError(CodeFileNotFound, "%q: no such file or directory in the workspace", rel)
	case errors.Is(err, sandbox.ErrNoSpace):
		return newError(CodeWorkspaceFull, "the workspace is full (its disk or file limit is reached); nothing was written: remove files or write less")
	case errors.Is(err, sandbox.ErrIsDir):
		return newError(CodeIsDirectory, "%q is a directory: list it with GET …/files/%s/, fetch it with GET …/archive/%s, or give the path of a file", rel, rel, rel)
	case errors.Is(err, sandbox.ErrNotDir):
		return newError(CodeNotDirectory, "%q or a directory on its path is a file, not a directory", rel)
	case errors.Is(err, sandbox.ErrExists):
		return newError(CodeExists, "%q exists and is not a directory", rel)
	case errors.Is(err, sandbox.ErrNotEmpty):
		return newError(CodeNotEmpty, "%q is a directory with entries: remove them first, or add ?recursive=1", rel)
	case errors.Is(err, sandbox.ErrNotRegular):
		return badRequest("%q is not a regular file (a fifo, socket or device)", rel)
	case errors.Is(err, sandbox.ErrTooLarge):
		return badRequest("%q is too large for this operation: a directory with too many entries, or a path that grows past %d bytes once its links are followed", rel, maxPathBytes)
	}
	return fmt.Errorf("file operation on %s: %w", rel, err)
}
