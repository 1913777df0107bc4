package sandbox

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Names of the shared copies of the init binary under a state dir:
// initCopyPrefix+fingerprint when complete, initCopyTmpPrefix+random while
// being written.
const (
	initCopyPrefix    = "init-"
	initCopyTmpPrefix = initCopyPrefix + "tmp-"
)

// initCopyTmpAge is how old a half-written copy must be before a runtime
// takes it for one that a dead runtime left (a live one writes 6 MB in a few
// milliseconds).
const initCopyTmpAge = 10 * time.Minute

// installInit puts the init binary src at dst, in the runtime's directory
// under stateDir, as a root-owned 0755 file that the sandbox uids can read
// and no one else can change, pinned to the bytes src had when the runtime
// started (a package upgrade that replaces src changes no running
// runtime's init):
//   - a hard link to src itself, when src is root-owned, 0755 and on the
//     state dir's file system;
//   - else a hard link to the state dir's shared copy of src, made by the
//     first runtime that needs it (see makeInitCopy) and linked by the
//     next ones (every `codes-sandbox run` on a host whose /run is a tmpfs
//     would otherwise copy 6 MB and remove it again: about 5 ms of each
//     run). The copy is named by src's fingerprint (device, inode, size,
//     modification and change times), so a replaced or modified src gets a
//     new one, and the copies of an earlier src are removed: each runtime
//     holds its own link, so one in use lives on.
func installInit(stateDir, src, dst string) error {
	fi, err := os.Stat(src)
	if err != nil {
		return fmt.Errorf("install init binary: %w", err)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid == 0 && fi.Mode().Perm() == 0o755 {
		if os.Link(src, dst) == nil {
			return nil
		}
	}
	name := initCopyPrefix + fingerprint(fi)
	switch err := os.Link(filepath.Join(stateDir, name), dst); {
	case err == nil:
		removeOtherInitCopies(stateDir, name)
		return nil
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("install init binary: %w", err)
	}
	for range 3 {
		done, err := makeInitCopy(src, name, filepath.Join(stateDir, name), dst)
		if err != nil {
			return err
		}
		if done {
			removeOtherInitCopies(stateDir, name)
			return nil
		}
		// src changed while it was copied: copy it as it is now.
		if fi, err = os.Stat(src); err != nil {
			return fmt.Errorf("install init binary: %w", err)
		}
		name = initCopyPrefix + fingerprint(fi)
	}
	return fmt.Errorf("install init binary: %s kept changing while it was copied", src)
}

// fingerprint names what fi says of a file: a file replaced (a new inode)
// or written (new times) has another.
func fingerprint(fi fs.FileInfo) string {
	h := sha256.New()
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		fmt.Fprintf(h, "%d %d %d %d.%d %d.%d", st.Dev, st.Ino, st.Size, st.Mtim.Sec, st.Mtim.Nsec, st.Ctim.Sec, st.Ctim.Nsec)
	} else {
		fmt.Fprintf(h, "%d %d", fi.Size(), fi.ModTime().UnixNano())
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// makeInitCopy copies src (whose copy is named name) to a temporary file
// beside shared, links dst to it and renames it to shared, for the next
// runtimes; dst holds its own link, so a runtime that removes shared
// meanwhile takes nothing from this one. done is false, and nothing is
// installed, when src changed while it was copied.
func makeInitCopy(src, name, shared, dst string) (done bool, err error) {
	tmp := filepath.Join(filepath.Dir(shared), initCopyTmpPrefix+randomID())
	defer os.Remove(tmp) // gone once renamed
	if err := copyFile(src, tmp, 0o755); err != nil {
		return false, fmt.Errorf("install init binary: copy %s: %w", src, err)
	}
	if now, err := os.Stat(src); err != nil || initCopyPrefix+fingerprint(now) != name {
		return false, nil
	}
	if err := os.Link(tmp, dst); err != nil {
		return false, fmt.Errorf("install init binary: %w", err)
	}
	_ = os.Rename(tmp, shared) // best effort: without it, the next runtime copies again
	return true, nil
}

// removeOtherInitCopies removes the shared copies under stateDir but keep,
// and what a runtime that died while copying left. It is best effort: what
// it cannot remove, a later runtime does.
func removeOtherInitCopies(stateDir, keep string) {
	paths, _ := filepath.Glob(filepath.Join(stateDir, initCopyPrefix+"*"))
	for _, p := range paths {
		name := filepath.Base(p)
		if name == keep {
			continue
		}
		if strings.HasPrefix(name, initCopyTmpPrefix) {
			if fi, err := os.Lstat(p); err != nil || time.Since(fi.ModTime()) < initCopyTmpAge {
				continue // another runtime is writing it
			}
		}
		_ = os.Remove(p)
	}
}
