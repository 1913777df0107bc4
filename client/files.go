package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"openvibe.network/agentsandbox/workerapi"
	"strconv"
	"strings"
	"time"
)

// Sentinels of the file operations, matched by errors.Is on an *APIError
// by its code (see the worker's docs/openapi.yaml).
var (
	// ErrIsDirectory: a file operation on a directory (is_directory, 400).
	ErrIsDirectory = errors.New("worker api: is a directory")
	// ErrNotDirectory: a directory operation on a file, or a file on the
	// path (not_directory, 400).
	ErrNotDirectory = errors.New("worker api: not a directory")
	// ErrExists: something is in the way (exists, 409).
	ErrExists = errors.New("worker api: exists")
	// ErrNotEmpty: a directory with entries removed without recursive
	// (not_empty, 409).
	ErrNotEmpty = errors.New("worker api: directory not empty")
	// ErrWorkspaceFull: the sandbox's disk or file limit is reached
	// (workspace_full, 507).
	ErrWorkspaceFull = errors.New("worker api: workspace full")
	// ErrTooLarge: an upload over the worker's limit (body_too_large, 413).
	ErrTooLarge = errors.New("worker api: too large")
	// ErrInvalidArchive: an archive refused, nothing of it written
	// (invalid_archive, 400; the message names the entry).
	ErrInvalidArchive = errors.New("worker api: archive refused")
)

// codeSentinel is the sentinel of an error code, nil for none.
func codeSentinel(code string) error {
	switch code {
	case "is_directory":
		return ErrIsDirectory
	case "not_directory":
		return ErrNotDirectory
	case "exists":
		return ErrExists
	case "not_empty":
		return ErrNotEmpty
	case "workspace_full":
		return ErrWorkspaceFull
	case "body_too_large":
		return ErrTooLarge
	case "invalid_archive":
		return ErrInvalidArchive
	case "no_browser":
		return ErrNoBrowser
	case "browser_busy":
		return ErrBrowserBusy
	case "no_preview":
		return ErrNoPreview
	}
	return nil
}

// maxListingBytes bounds the JSON of a directory listing the client reads.
const maxListingBytes = 64 << 20

// FileInfo is one entry of a workspace directory.
type FileInfo struct {
	Name string
	// Type is "file", "directory", "symlink" (the link itself) or "other"
	// (a fifo, socket or device).
	Type string
	Size int64
	// Mode holds the permission bits.
	Mode    fs.FileMode
	ModTime time.Time
}

// Files is the workspace of one sandbox of a worker: paths are relative to
// /workspace (a leading "/" is dropped). Make it with Worker.Files; it is
// as safe for concurrent use as the Worker. Its methods fail as every Worker
// method does (see Worker), ErrNotFound for an unknown sandbox or file, and
// with the sentinels above.
type Files struct {
	w  *Worker
	id string
}

// Files returns the workspace of sandbox id.
func (w *Worker) Files(id string) *Files { return &Files{w: w, id: id} }

// filesPath is the URL path of p under route ("files" or "archive") of the
// sandbox; a directory's ends in "/" ("" is the workspace).
func (f *Files) filesPath(route, p string, dir bool) string {
	if dir {
		p = strings.TrimRight(p, "/")
	}
	rel := filePath(p)
	if dir && rel != "" {
		rel += "/"
	}
	return sandboxPath(f.id, route) + "/" + rel
}

// List returns the entries of directory dir ("" for the workspace), sorted
// by name. It fails with ErrNotDirectory when dir is a file.
func (f *Files) List(ctx context.Context, dir string) ([]FileInfo, error) {
	resp, err := f.w.do(ctx, http.MethodGet, f.filesPath("files", dir, true), nil, http.Header{"Accept": {"application/json"}}, http.StatusOK)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", dir, err)
	}
	defer resp.Body.Close()
	var body workerapi.DirListing
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxListingBytes)).Decode(&body); err != nil {
		return nil, fmt.Errorf("list %s: read answer: %w", dir, err)
	}
	out := make([]FileInfo, 0, len(body.Items))
	for _, it := range body.Items {
		mode, err := strconv.ParseUint(it.Mode, 8, 32)
		if err != nil {
			return nil, fmt.Errorf("list %s: mode %q of %s: %w", dir, it.Mode, it.Name, err)
		}
		out = append(out, FileInfo{Name: it.Name, Type: it.Type, Size: it.Size, Mode: fs.FileMode(mode), ModTime: it.ModTime})
	}
	return out, nil
}

// Put writes r, streamed, to the file at path with mode (0 means 0644),
// making its parents. The worker takes the file only once all of r
// arrived: when r fails or ctx ends, nothing is written. An *os.File (or
// any io.Seeker with a Stat method) is sent with its length, so that the
// worker refuses one over its limit (ErrTooLarge) before it is sent. It
// fails with ErrIsDirectory when path is a directory, ErrWorkspaceFull, and
// a 400 *APIError for a path that leaves the workspace.
func (f *Files) Put(ctx context.Context, path string, r io.Reader, mode fs.FileMode) error {
	hdr := http.Header{"Content-Type": {"application/octet-stream"}}
	if mode != 0 {
		hdr.Set("X-File-Mode", fmt.Sprintf("%#o", mode.Perm()))
	}
	if err := f.upload(ctx, f.filesPath("files", path, false), r, hdr); err != nil {
		return fmt.Errorf("put file: %w", err)
	}
	return nil
}

// Get copies the file at path to dst. It fails with ErrNotFound for a
// missing file and ErrIsDirectory for a directory.
func (f *Files) Get(ctx context.Context, path string, dst io.Writer) error {
	if err := f.download(ctx, f.filesPath("files", path, false), dst); err != nil {
		return fmt.Errorf("get file: %w", err)
	}
	return nil
}

// Remove removes the file, symlink or empty directory at path; with
// recursive, a directory and everything in it. It fails with ErrNotEmpty
// for a directory with entries without recursive.
func (f *Files) Remove(ctx context.Context, path string, recursive bool) error {
	p := f.filesPath("files", path, false)
	if recursive {
		p += "?recursive=1"
	}
	resp, err := f.w.do(ctx, http.MethodDelete, p, nil, nil, http.StatusNoContent)
	if err != nil {
		return fmt.Errorf("remove %s: %w", path, err)
	}
	resp.Body.Close()
	return nil
}

// Mkdir makes directory dir with its parents (mode 0755); one that exists
// is left as it is. It fails with ErrExists when a file is in its place.
func (f *Files) Mkdir(ctx context.Context, dir string) error {
	resp, err := f.w.do(ctx, http.MethodPut, f.filesPath("files", dir, true), nil, http.Header{"X-File-Type": {"directory"}}, http.StatusNoContent)
	if err != nil {
		return fmt.Errorf("mkdir %s: %w", dir, err)
	}
	resp.Body.Close()
	return nil
}

// GetArchive copies a tar of the tree of directory dir ("" for the
// workspace) to dst as it arrives. When the worker fails midway, the
// connection is cut and GetArchive fails: what dst got is not a whole
// archive.
func (f *Files) GetArchive(ctx context.Context, dir string, dst io.Writer) error {
	if err := f.download(ctx, f.filesPath("archive", dir, true), dst); err != nil {
		return fmt.Errorf("get archive: %w", err)
	}
	return nil
}

// PutArchive unpacks the tar (or gzipped tar) r, streamed, into directory
// dir ("" for the workspace; made when missing, merged into when it
// exists), all or nothing. It fails with ErrInvalidArchive (the message
// names the entry) for an archive with entries that leave the workspace,
// links that do, or special files, ErrExists for one that clashes with the
// destination, ErrWorkspaceFull and ErrTooLarge; then nothing was written.
func (f *Files) PutArchive(ctx context.Context, dir string, r io.Reader) error {
	hdr := http.Header{"Content-Type": {"application/x-tar"}}
	if err := f.upload(ctx, f.filesPath("archive", dir, true), r, hdr); err != nil {
		return fmt.Errorf("put archive: %w", err)
	}
	return nil
}

// upload PUTs r to p, with its length when it is a file.
func (f *Files) upload(ctx context.Context, p string, r io.Reader, hdr http.Header) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, f.w.base+p, r)
	if err != nil {
		return err
	}
	if n, ok := remaining(r); ok {
		req.ContentLength = n
		if n == 0 {
			req.Body = http.NoBody
		}
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	resp, err := f.w.send(req, http.StatusNoContent)
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

// remaining is what is left to read of a regular file r (an io.Seeker with
// a Stat method, like *os.File).
func remaining(r io.Reader) (int64, bool) {
	type statSeeker interface {
		io.Seeker
		Stat() (fs.FileInfo, error)
	}
	s, ok := r.(statSeeker)
	if !ok {
		return 0, false
	}
	fi, err := s.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return 0, false
	}
	off, err := s.Seek(0, io.SeekCurrent)
	if err != nil || off > fi.Size() {
		return 0, false
	}
	return fi.Size() - off, true
}

// download GETs p into dst.
func (f *Files) download(ctx context.Context, p string, dst io.Writer) error {
	resp, err := f.w.do(ctx, http.MethodGet, p, nil, nil, http.StatusOK)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(dst, resp.Body); err != nil {
		return scrub(err)
	}
	return nil
}
