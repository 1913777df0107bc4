package apitest

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"path"
	"slices"
	"strings"
	"time"

	"openvibe.network/agentsandbox/sandbox"
)

// The fake's files are the map of its sandbox: a file by its path, a
// directory made by Mkdir or an archive by its path with a trailing "/"
// (and nil content); the parents of every path are directories too.

// modTime is the modification time of every file of the fake.
func modTime() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }

// isDirError is sandbox.ErrIsDir when p is a directory of b. Call with
// f.mu held.
func isDirError(b *box, p string) error {
	if _, isDir := kindOf(b, p); isDir {
		return fmt.Errorf("%s: %w", p, sandbox.ErrIsDir)
	}
	return nil
}

// kindOf says whether p is a file or a directory of b (neither: both
// false). Call with f.mu held.
func kindOf(b *box, p string) (isFile, isDir bool) {
	if p == "" || p == "." {
		return false, true
	}
	if _, ok := b.files[p]; ok {
		return true, false
	}
	for k := range b.files {
		if strings.HasPrefix(k, p+"/") {
			return false, true
		}
	}
	return false, false
}

// checkDir fails unless dir is a directory of b. Call with f.mu held.
func checkDir(b *box, dir string) error {
	switch isFile, isDir := kindOf(b, dir); {
	case isFile:
		return fmt.Errorf("%s: %w", dir, sandbox.ErrNotDir)
	case !isDir:
		return fmt.Errorf("%s: %w", dir, fs.ErrNotExist)
	}
	return nil
}

// under is the prefix of the paths below dir.
func under(dir string) string {
	if dir == "" || dir == "." {
		return ""
	}
	return dir + "/"
}

// ListDir lists the files and directories directly in dir. It fails with
// sandbox.ErrNotFound, sandbox.ErrPath, fs.ErrNotExist or sandbox.ErrNotDir.
func (f *Fake) ListDir(_ context.Context, id, dir string) ([]sandbox.FileInfo, error) {
	b, err := f.get(id)
	if err != nil {
		return nil, err
	}
	if err := checkPath(dir); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := checkDir(b, dir); err != nil {
		return nil, err
	}
	entries := map[string]sandbox.FileInfo{}
	for k, data := range b.files {
		rest, ok := strings.CutPrefix(k, under(dir))
		if !ok || rest == "" {
			continue
		}
		name, more, _ := strings.Cut(rest, "/")
		if more == "" && !strings.HasSuffix(rest, "/") {
			entries[name] = sandbox.FileInfo{Name: name, Type: "file", Size: int64(len(data)), Mode: 0o644, ModTime: modTime().UnixNano()}
		} else {
			entries[name] = sandbox.FileInfo{Name: name, Type: "directory", Mode: 0o755, ModTime: modTime().UnixNano()}
		}
	}
	out := []sandbox.FileInfo{}
	for _, name := range slices.Sorted(maps.Keys(entries)) {
		out = append(out, entries[name])
	}
	return out, nil
}

// Remove removes a file, or a directory that is empty or, with recursive,
// everything in it. It fails with sandbox.ErrNotFound, sandbox.ErrPath,
// fs.ErrNotExist or sandbox.ErrNotEmpty.
func (f *Fake) Remove(_ context.Context, id, p string, recursive bool) error {
	b, err := f.get(id)
	if err != nil {
		return err
	}
	if err := checkPath(p); err != nil || p == "" {
		return sandbox.ErrPath
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	switch isFile, isDir := kindOf(b, p); {
	case isFile:
		delete(b.files, p)
		return nil
	case !isDir:
		return fmt.Errorf("remove %s: %w", p, fs.ErrNotExist)
	}
	for k := range b.files {
		if strings.HasPrefix(k, p+"/") && k != p+"/" && !recursive {
			return fmt.Errorf("remove %s: %w", p, sandbox.ErrNotEmpty)
		}
	}
	maps.DeleteFunc(b.files, func(k string, _ []byte) bool { return strings.HasPrefix(k, p+"/") })
	return nil
}

// Mkdir records a directory (mode is ignored). It fails with
// sandbox.ErrNotFound, sandbox.ErrPath or sandbox.ErrExists.
func (f *Fake) Mkdir(_ context.Context, id, dir string, _ fs.FileMode) error {
	b, err := f.get(id)
	if err != nil {
		return err
	}
	if err := checkPath(dir); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if isFile, _ := kindOf(b, dir); isFile {
		return fmt.Errorf("mkdir %s: %w", dir, sandbox.ErrExists)
	}
	if dir != "" {
		b.files[dir+"/"] = nil
	}
	return nil
}

// GetArchive writes a tar of the files and directories below dir. It
// fails as ListDir does.
func (f *Fake) GetArchive(_ context.Context, id, dir string, w io.Writer) error {
	b, err := f.get(id)
	if err != nil {
		return err
	}
	if err := checkPath(dir); err != nil {
		return err
	}
	f.mu.Lock()
	if err := checkDir(b, dir); err != nil {
		f.mu.Unlock()
		return err
	}
	files := map[string][]byte{}
	for k, data := range b.files {
		if rest, ok := strings.CutPrefix(k, under(dir)); ok && rest != "" {
			files[rest] = data
		}
	}
	f.mu.Unlock()
	tw := tar.NewWriter(w)
	for _, name := range slices.Sorted(maps.Keys(files)) {
		hdr := &tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(files[name])), ModTime: modTime()}
		if strings.HasSuffix(name, "/") {
			hdr.Typeflag, hdr.Mode = tar.TypeDir, 0o755
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if _, err := tw.Write(files[name]); err != nil {
			return err
		}
	}
	return tw.Close()
}

// PutArchive stores the regular files and directories of the tar r below
// dir, all or nothing. An entry that leaves dir or is of another type is
// refused with a *sandbox.ArchiveError; it fails with sandbox.ErrNotFound,
// sandbox.ErrPath, sandbox.ErrNotDir or r's error too.
func (f *Fake) PutArchive(_ context.Context, id, dir string, r io.Reader) error {
	b, err := f.get(id)
	if err != nil {
		return err
	}
	if err := checkPath(dir); err != nil {
		return err
	}
	got := map[string][]byte{}
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return &sandbox.ArchiveError{Reason: "not a tar: " + err.Error(), Err: sandbox.ErrInvalidArchive}
		}
		name := path.Clean(hdr.Name)
		if checkPath(name) != nil {
			return &sandbox.ArchiveError{Reason: fmt.Sprintf("entry %q leaves the directory", hdr.Name), Err: sandbox.ErrInvalidArchive}
		}
		switch hdr.Typeflag {
		case tar.TypeReg:
			data, err := io.ReadAll(tr)
			if err != nil {
				return err
			}
			got[under(dir)+name] = data
		case tar.TypeDir:
			got[under(dir)+name+"/"] = nil
		default:
			return &sandbox.ArchiveError{Reason: fmt.Sprintf("entry %q is not a file or directory", hdr.Name), Err: sandbox.ErrInvalidArchive}
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if isFile, _ := kindOf(b, dir); isFile {
		return fmt.Errorf("unpack into %s: %w", dir, sandbox.ErrNotDir)
	}
	maps.Copy(b.files, got)
	return nil
}
