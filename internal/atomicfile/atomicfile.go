// Package atomicfile writes a file so that a reader sees either its old
// content or the whole new one, never a part, and so that the new content
// survives a crash once Write returns: the data goes to a temporary file in
// the same directory, is synced, renamed over the target, and the directory
// is synced.
//
// ovlive writes its address file with it; any command that writes a file
// another process reads should.
package atomicfile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Write replaces the file at path with data, with permission bits perm
// (exactly: the umask does not apply). The temporary file is named
// .BASE.tmp-* in path's directory and is removed when Write fails. Its error
// says which step failed (create, write, sync, chmod, rename or the
// directory's sync) and wraps the system's error; after a failure the file
// at path is unchanged, except that a failed directory sync leaves the new
// content in place but possibly not yet durable.
func Write(path string, data []byte, perm os.FileMode) error {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	tmp, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: create temporary file: %w", path, err)
	}
	name := tmp.Name()
	if err := fill(tmp, data, perm); err != nil {
		_ = os.Remove(name)
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(name, path); err != nil {
		_ = os.Remove(name)
		return fmt.Errorf("write %s: rename: %w", path, err)
	}
	if err := syncDir(dir); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// fill writes data to f, gives it perm, syncs and closes it.
func fill(f *os.File, data []byte, perm os.FileMode) error {
	_, werr := f.Write(data)
	if werr != nil {
		werr = fmt.Errorf("write: %w", werr)
	} else if err := f.Chmod(perm); err != nil {
		werr = fmt.Errorf("chmod: %w", err)
	} else if err := f.Sync(); err != nil {
		werr = fmt.Errorf("sync: %w", err)
	}
	if err := f.Close(); err != nil && werr == nil {
		werr = fmt.Errorf("close: %w", err)
	}
	return werr
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync directory: %w", err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil && !errors.Is(err, os.ErrInvalid) {
		return fmt.Errorf("sync directory: %w", err)
	}
	return nil
}
