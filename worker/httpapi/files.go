package httpapi

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"strconv"

	"openvibe.network/agentsandbox/sandbox"
)

// defaultFileMode is the mode of a file put without X-File-Mode.
const defaultFileMode fs.FileMode = 0o644

// fileMode parses the X-File-Mode header: octal permission bits, at most 0777.
func fileMode(h string) (fs.FileMode, error) {
	if h == "" {
		return defaultFileMode, nil
	}
	m, err := strconv.ParseUint(h, 8, 32)
	if err != nil || m > 0o777 {
		return 0, badRequest("X-File-Mode %q is not octal permission bits from 0 to 0777 (e.g. 0755)", h)
	}
	return fs.FileMode(m), nil
}

// fileTarget checks the sandbox and path of a file route.
func (s *Server) fileTarget(r *http.Request) (id, rel string, err error) {
	id = r.PathValue("id")
	if rel, err = workspacePath("path", r.PathValue("path")); err != nil {
		return "", "", err
	}
	if !s.exists(id) {
		return "", "", errSandboxNotFound(id)
	}
	return id, rel, nil
}

// fileError maps an error of PutFile or GetFile on a sandbox that exists,
// by the runtime's sentinels (never by error text).
func fileError(op string, err error) error {
	switch {
	case errors.Is(err, sandbox.ErrNotFound) || errors.Is(err, fs.ErrNotExist):
		return &Error{Status: statusOf(CodeFileNotFound), Code: CodeFileNotFound, Message: "no such file in the workspace"}
	case errors.Is(err, sandbox.ErrNoSpace):
		return &Error{Status: statusOf(CodeWorkspaceFull), Code: CodeWorkspaceFull,
			Message: "the workspace is full (its disk limit is reached); remove files or write less"}
	case errors.Is(err, sandbox.ErrIsDir):
		return badRequest("the path is a directory; give the path of a file")
	case errors.Is(err, sandbox.ErrNotDir):
		return badRequest("a part of the path is a file, not a directory")
	}
	return fmt.Errorf("%s: %w", op, err)
}

// limitedBody remembers the error of the body it reads, so a body over the
// limit is a 413 whatever the runtime makes of the error.
type limitedBody struct {
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

// putFile handles PUT /v1/sandboxes/{id}/files/{path...}: the body is the
// content, X-File-Mode the optional octal mode.
func (s *Server) putFile(w http.ResponseWriter, r *http.Request) error {
	mode, err := fileMode(r.Header.Get("X-File-Mode"))
	if err != nil {
		return err
	}
	id, rel, err := s.fileTarget(r)
	if err != nil {
		return err
	}
	body := &limitedBody{r: http.MaxBytesReader(w, r.Body, s.cfg.MaxBody)}
	if err := s.cfg.Runtime.PutFile(r.Context(), id, rel, body, mode); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(body.err, &tooBig) {
			return tooBig
		}
		return fileError("put file", err)
	}
	addLog(r.Context(), slog.Int64("bytes", body.n))
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// lazyWriter sends the headers of a file on its first write, so an error
// before any content can still be a JSON error.
type lazyWriter struct {
	w http.ResponseWriter
	n int64
}

func (lw *lazyWriter) Write(p []byte) (int, error) {
	if lw.n == 0 && len(p) > 0 {
		lw.w.Header().Set("Content-Type", "application/octet-stream")
		lw.w.Header().Set("X-Content-Type-Options", "nosniff")
		lw.w.WriteHeader(http.StatusOK)
	}
	n, err := lw.w.Write(p)
	lw.n += int64(n)
	return n, err
}

// getFile handles GET /v1/sandboxes/{id}/files/{path...}.
func (s *Server) getFile(w http.ResponseWriter, r *http.Request) error {
	id, rel, err := s.fileTarget(r)
	if err != nil {
		return err
	}
	lw := &lazyWriter{w: w}
	if err := s.cfg.Runtime.GetFile(r.Context(), id, rel, lw); err != nil {
		return fileError("get file", err)
	}
	if lw.n == 0 { // an empty file
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", "0")
		w.WriteHeader(http.StatusOK)
	}
	addLog(r.Context(), slog.Int64("bytes", lw.n))
	return nil
}
