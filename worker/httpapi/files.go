package httpapi

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"openvibe.network/agentsandbox/sandbox"
)

// FileTree is what the file and archive routes need of a runtime besides
// PutFile and GetFile; *sandbox.Runtime implements it. Its errors are the
// sandbox package's sentinels (ErrNotFound, ErrPath, fs.ErrNotExist,
// ErrIsDir, ErrNotDir, ErrExists, ErrNotEmpty, ErrNoSpace, ErrTooLarge,
// ErrNotRegular) and *sandbox.ArchiveError, wrapped or not.
type FileTree interface {
	ListDir(ctx context.Context, id, dir string) ([]sandbox.FileInfo, error)
	Remove(ctx context.Context, id, path string, recursive bool) error
	Mkdir(ctx context.Context, id, dir string, mode fs.FileMode) error
	GetArchive(ctx context.Context, id, dir string, w io.Writer) error
	PutArchive(ctx context.Context, id, dir string, r io.Reader) error
}

// Defaults of the file routes.
const (
	defaultFileMode fs.FileMode = 0o644
	defaultDirMode  fs.FileMode = 0o755
)

// fileMode parses the X-File-Mode header: octal permission bits, at most
// 0777; def when absent.
func fileMode(h string, def fs.FileMode) (fs.FileMode, error) {
	if h == "" {
		return def, nil
	}
	m, err := strconv.ParseUint(h, 8, 32)
	if err != nil || m > 0o777 {
		return 0, badRequest("X-File-Mode %q is not octal permission bits from 0 to 0777 (e.g. 0755)", h)
	}
	return fs.FileMode(m), nil
}

// fileTarget checks the sandbox and path of a file route; a directory's
// path may end in "/" or be empty (the workspace) when dir is set.
func (s *Server) fileTarget(r *http.Request, dir bool) (id, rel string, err error) {
	id, p := r.PathValue("id"), r.PathValue("path")
	switch {
	case dir && strings.TrimSuffix(p, "/") == "":
		rel = ""
	case dir:
		rel, err = workspacePath("path", strings.TrimSuffix(p, "/"))
	default:
		rel, err = workspacePath("path", p)
	}
	if err != nil {
		return "", "", err
	}
	if !s.exists(id) {
		return "", "", errSandboxNotFound(id)
	}
	return id, rel, nil
}

// namesDir reports whether a file route's path names a directory: it is
// empty (the workspace) or ends in "/".
func namesDir(r *http.Request) bool {
	p := r.PathValue("path")
	return p == "" || strings.HasSuffix(p, "/")
}

// upload is the body of an upload, bounded by Config.MaxUpload: refused at
// once when its Content-Length is over, and failed as soon as more arrives.
func (s *Server) upload(w http.ResponseWriter, r *http.Request) (*limitedBody, error) {
	if r.ContentLength > s.cfg.MaxUpload {
		abandonBody(w)
		return nil, &http.MaxBytesError{Limit: s.cfg.MaxUpload}
	}
	return &limitedBody{w: w, r: http.MaxBytesReader(w, r.Body, s.cfg.MaxUpload)}, nil
}

// abandonBody makes the answer close the connection, so that the server
// does not read the rest of a body the handler gave up on before it
// answers (net/http would, and a client that stopped sending would never
// get the answer: MaxBytesReader cannot tell the server through the
// logging writer).
func abandonBody(w http.ResponseWriter) {
	w.Header().Set("Connection", "close")
}

// putFile handles PUT /v1/sandboxes/{id}/files/{path...}: the body is the
// content, X-File-Mode the optional octal mode; with `X-File-Type:
// directory` it makes a directory instead (see makeDir).
func (s *Server) putFile(w http.ResponseWriter, r *http.Request) error {
	switch kind := r.Header.Get("X-File-Type"); kind {
	case "directory":
		return s.makeDir(w, r)
	case "", "file":
	default:
		return badRequest("X-File-Type %q is neither `file` (the default) nor `directory`", kind)
	}
	if namesDir(r) {
		return badRequest("the path ends in `/`, so it names a directory: send `X-File-Type: directory` to make one, or give the path of a file")
	}
	mode, err := fileMode(r.Header.Get("X-File-Mode"), defaultFileMode)
	if err != nil {
		return err
	}
	id, rel, err := s.fileTarget(r, false)
	if err != nil {
		return err
	}
	body, err := s.upload(w, r)
	if err != nil {
		return err
	}
	if err := s.cfg.Runtime.PutFile(r.Context(), id, rel, body, mode); err != nil {
		return body.fileError(rel, err)
	}
	addLog(r.Context(), slog.Int64("bytes", body.n))
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// makeDir handles PUT …/files/{dir} with `X-File-Type: directory`: the
// directory and its parents are made (X-File-Mode, default 0755, is the
// last one's mode); one that exists is left as it is.
func (s *Server) makeDir(w http.ResponseWriter, r *http.Request) error {
	mode, err := fileMode(r.Header.Get("X-File-Mode"), defaultDirMode)
	if err != nil {
		return err
	}
	id, rel, err := s.fileTarget(r, true)
	if err != nil {
		return err
	}
	if err := s.cfg.Runtime.Mkdir(r.Context(), id, rel, mode); err != nil {
		return fileError(rel, err)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// getFile handles GET /v1/sandboxes/{id}/files/{path...}: a file's content,
// or, for a path that ends in "/", the directory's listing (see listDir).
func (s *Server) getFile(w http.ResponseWriter, r *http.Request) error {
	if namesDir(r) {
		return s.listDir(w, r)
	}
	id, rel, err := s.fileTarget(r, false)
	if err != nil {
		return err
	}
	lw := &lazyWriter{w: w, contentType: "application/octet-stream"}
	if err := s.cfg.Runtime.GetFile(r.Context(), id, rel, lw); err != nil {
		return fileError(rel, err)
	}
	lw.finish()
	addLog(r.Context(), slog.Int64("bytes", lw.n))
	return nil
}

// listDir handles GET …/files/{dir}/: the directory's entries, sorted by
// name.
func (s *Server) listDir(w http.ResponseWriter, r *http.Request) error {
	id, rel, err := s.fileTarget(r, true)
	if err != nil {
		return err
	}
	infos, err := s.cfg.Runtime.ListDir(r.Context(), id, rel)
	if err != nil {
		return fileError(rel, err)
	}
	out := DirListing{Items: make([]FileEntry, 0, len(infos))}
	for _, fi := range infos {
		out.Items = append(out.Items, FileEntry{Name: fi.Name, Type: fi.Type, Size: fi.Size,
			Mode: fmt.Sprintf("%04o", fi.Mode), ModTime: time.Unix(0, fi.ModTime).UTC()})
	}
	addLog(r.Context(), slog.Int("entries", len(out.Items)))
	writeJSON(w, http.StatusOK, out)
	return nil
}

// deleteFile handles DELETE /v1/sandboxes/{id}/files/{path...}: a file, a
// symlink or an empty directory; with ?recursive=1 a directory and
// everything in it.
func (s *Server) deleteFile(w http.ResponseWriter, r *http.Request) error {
	var recursive bool
	switch v := r.URL.Query().Get("recursive"); v {
	case "", "0", "false":
	case "1", "true":
		recursive = true
	default:
		return badRequest("recursive=%q: give 1 to remove a directory with everything in it, or leave it out", v)
	}
	id, rel, err := s.fileTarget(r, true)
	if err != nil {
		return err
	}
	if rel == "" {
		return badRequest("give the path of a file or directory to remove; the workspace itself cannot be removed")
	}
	if err := s.cfg.Runtime.Remove(r.Context(), id, rel, recursive); err != nil {
		return fileError(rel, err)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// lazyWriter sends the headers of a download on its first write, so an
// error before any content can still be a JSON error.
type lazyWriter struct {
	w           http.ResponseWriter
	contentType string
	n           int64
}

func (lw *lazyWriter) Write(p []byte) (int, error) {
	if len(p) == 0 { // would send the headers with no content type
		return 0, nil
	}
	if lw.n == 0 {
		lw.w.Header().Set("Content-Type", lw.contentType)
		lw.w.Header().Set("X-Content-Type-Options", "nosniff")
		lw.w.WriteHeader(http.StatusOK)
	}
	n, err := lw.w.Write(p)
	lw.n += int64(n)
	return n, err
}

// ReadFrom sends a regular file (the descriptor the runtime hands over for
// a download) with its length as Content-Length, so a client knows the
// size before the content and can tell a cut answer from a whole one. At
// most that many bytes are sent; a file that shrinks while it is sent (the
// sandbox may write to it) fails the download, so the server cuts the
// connection rather than end a short answer. It copies through a 256 KiB
// buffer: net/http's own ReadFrom (sendfile(2)) took downloads from 1,439
// to 1,065 MiB/s here (scripts/bench-files.sh, 9 runs). Any other reader,
// and an empty file, is copied as Write would.
func (lw *lazyWriter) ReadFrom(src io.Reader) (int64, error) {
	f, ok := src.(*os.File)
	var size int64
	if ok && lw.n == 0 {
		if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
			size = fi.Size()
		}
	}
	if size <= 0 {
		return io.CopyBuffer(struct{ io.Writer }{lw}, src, make([]byte, 256<<10))
	}
	h := lw.w.Header()
	h.Set("Content-Type", lw.contentType)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Length", strconv.FormatInt(size, 10))
	lw.w.WriteHeader(http.StatusOK)
	n, err := io.CopyBuffer(struct{ io.Writer }{lw.w}, io.LimitReader(f, size), make([]byte, 256<<10))
	lw.n += n
	if err == nil && n < size {
		err = fmt.Errorf("the file shrank from %d to %d bytes while it was sent", size, n)
	}
	return n, err
}

// finish answers an empty download (nothing was written).
func (lw *lazyWriter) finish() {
	if lw.n == 0 {
		lw.w.Header().Set("Content-Type", lw.contentType)
		lw.w.Header().Set("Content-Length", "0")
		lw.w.WriteHeader(http.StatusOK)
	}
}
