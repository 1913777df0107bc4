// Package unpack applies an OCI image layer (an uncompressed tar stream) to
// a directory of its own, treating every byte of it as hostile, in the form
// overlayfs stacks: a whiteout (".wh.NAME") becomes a whiteout device in the
// layer's own tree, an opaque marker (".wh..wh..opq") the
// trusted.overlay.opaque attribute of its directory, so that nothing a layer
// says can touch another layer or anything outside its directory.
//
// The rules, each tested with a crafted layer:
//   - every path is resolved beneath the layer's directory and no symbolic
//     link is ever followed (openat2 with RESOLVE_BENEATH and
//     RESOLVE_NO_SYMLINKS, or the same rule by hand); a name that is
//     absolute or has a ".." component, and an entry that passes through a
//     link or a file, are refused, as is a hard link whose target is outside
//     the layer, a directory or missing;
//   - no device node is made (character and block devices are skipped), nor
//     a FIFO (one in a shared read-only layer would be a pipe between every
//     sandbox of the image);
//   - setuid and setgid bits are cleared; no extended attribute of the
//     layer is kept (security.capability, trusted.overlay.*, ACLs,
//     SELinux labels);
//   - every byte and every entry is charged before it is written
//     (Limits.Reserve, Limits.MaxEntries), so a decompression bomb, a file
//     larger than its compressed size or millions of empty entries stop at
//     the cap; data after the archive's end is bounded.
package unpack

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Defaults of Limits.
const (
	DefaultMaxEntries = 1 << 20
	// EntryCost is what each entry is charged beside its data (an inode).
	EntryCost = 512
	// blockSize is what a file's data is rounded up to when charged.
	blockSize = 4096
	// maxTrailer bounds what may follow the archive's end marker (tar
	// writers pad to a record of 10 KiB).
	maxTrailer = 1 << 20
)

// Limits bound one layer.
type Limits struct {
	// MaxEntries is the most entries the layer may hold (default
	// DefaultMaxEntries).
	MaxEntries int64
	// Reserve is called before n more bytes are written (a file's data
	// rounded up to 4 KiB, EntryCost per entry); an error stops the unpack
	// with it. Nil: no cap.
	Reserve func(n int64) error
}

// Stats say what a layer held and what of it was not kept.
type Stats struct {
	Entries int64 `json:"entries"`
	// Bytes is the data written (files' sizes); Charged what Reserve was
	// asked for.
	Bytes   int64 `json:"bytes"`
	Charged int64 `json:"charged"`
	// Devices and FIFOs skipped, setuid/setgid bits cleared, entries whose
	// extended attributes were dropped.
	Devices int64 `json:"devices,omitempty"`
	FIFOs   int64 `json:"fifos,omitempty"`
	SetID   int64 `json:"setid,omitempty"`
	Xattrs  int64 `json:"xattrs,omitempty"`
}

// Errors of Layer (wrapped, with the entry's name).
var (
	// ErrUnsafe: an entry tries to leave the layer or to be something the
	// unpacker never makes.
	ErrUnsafe = errors.New("unsafe layer entry")
	// ErrTooMany: the layer has more entries than Limits.MaxEntries.
	ErrTooMany = errors.New("layer has too many entries")
	// ErrTrailer: too much data follows the archive's end.
	ErrTrailer = errors.New("data after the end of the layer's archive")
)

// Whiteout names (the OCI image layer specification).
const (
	whPrefix = ".wh."
	whOpaque = ".wh..wh..opq"
	// whMeta prefixes AUFS's own metadata entries, which are skipped.
	whMeta = ".wh..wh."
	// opaqueXattr marks an opaque directory for overlayfs.
	opaqueXattr = "trusted.overlay.opaque"
)

// Layer unpacks the tar stream r into the directory dir (an empty directory
// made by the caller, on a file system with trusted extended attributes).
// It reads r to its end (so that a digest computed over r covers all of
// it), at most maxTrailer bytes past the archive's end marker. Errors:
// ErrUnsafe, ErrTooMany, ErrTrailer (wrapped with the entry), Reserve's, a
// malformed archive, ctx's, or the file system's (ENOSPC: the disk is full).
// On error dir holds part of the layer: the caller removes it.
func Layer(ctx context.Context, dir string, r io.Reader, lim Limits) (Stats, error) {
	return layer(ctx, dir, r, lim, false)
}

// layer is Layer; byHand resolves paths as on a kernel without openat2.
func layer(ctx context.Context, dir string, r io.Reader, lim Limits, byHand bool) (Stats, error) {
	if lim.MaxEntries == 0 {
		lim.MaxEntries = DefaultMaxEntries
	}
	root, err := unix.Open(dir, dirFlags, 0)
	if err != nil {
		return Stats{}, fmt.Errorf("unpack layer: %w", err)
	}
	defer unix.Close(root)
	u := &unpacker{t: newTree(root), lim: lim, buf: make([]byte, 256<<10)}
	u.t.noOpenat2 = byHand
	defer u.t.close()
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return u.st, fmt.Errorf("unpack layer: read archive: %w", err)
		}
		if u.st.Entries%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return u.st, fmt.Errorf("unpack layer: %w", err)
			}
		}
		if err := u.entry(hdr, tr); err != nil {
			return u.st, fmt.Errorf("unpack layer: entry %q: %w", clip(hdr.Name), err)
		}
	}
	if err := u.finishDirs(); err != nil {
		return u.st, fmt.Errorf("unpack layer: %w", err)
	}
	n, err := io.Copy(io.Discard, io.LimitReader(r, maxTrailer+1))
	if err != nil {
		return u.st, fmt.Errorf("unpack layer: read archive: %w", err)
	}
	if n > maxTrailer {
		return u.st, fmt.Errorf("unpack layer: %w (more than %d bytes)", ErrTrailer, maxTrailer)
	}
	return u.st, nil
}

// clip shortens a name an error quotes.
func clip(s string) string {
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}

type unpacker struct {
	t   *tree
	lim Limits
	st  Stats
	buf []byte
	// dirs are the directories whose times are set at the end (their
	// entries change them meanwhile).
	dirs []dirTimes
}

type dirTimes struct {
	rel   string
	mtime time.Time
}

// cleanName validates an entry's name and returns it relative to the
// layer's root ("." for the root itself).
func cleanName(name string) (string, error) {
	if strings.HasPrefix(name, "/") {
		return "", fmt.Errorf("%w: absolute path", ErrUnsafe)
	}
	for c := range strings.SplitSeq(name, "/") {
		if c == ".." {
			return "", fmt.Errorf("%w: a \"..\" component", ErrUnsafe)
		}
	}
	return path.Clean(name), nil
}

// charge counts one entry and n bytes of data against the limits.
func (u *unpacker) charge(n int64) error {
	u.st.Entries++
	if u.st.Entries > u.lim.MaxEntries {
		return fmt.Errorf("%w (more than %d)", ErrTooMany, u.lim.MaxEntries)
	}
	c := EntryCost + (n+blockSize-1)/blockSize*blockSize
	if u.lim.Reserve != nil {
		if err := u.lim.Reserve(c); err != nil {
			return err
		}
	}
	u.st.Charged += c
	return nil
}

// entry applies one entry.
func (u *unpacker) entry(hdr *tar.Header, r io.Reader) error {
	rel, err := cleanName(hdr.Name)
	if err != nil {
		return err
	}
	size := int64(0)
	if hdr.Typeflag == tar.TypeReg || hdr.Typeflag == tar.TypeGNUSparse {
		size = hdr.Size
	}
	if size < 0 {
		return fmt.Errorf("%w: negative size", ErrUnsafe)
	}
	if err := u.charge(size); err != nil {
		return err
	}
	if len(hdr.PAXRecords) > 0 {
		for k := range hdr.PAXRecords {
			if strings.HasPrefix(k, "SCHILY.xattr.") || strings.HasPrefix(k, "LIBARCHIVE.xattr.") {
				u.st.Xattrs++
				break
			}
		}
	}
	if rel == "." {
		return nil // the layer's root: overlayfs takes the root's attributes from elsewhere
	}
	parent, base := path.Split(rel)
	parent = path.Clean(parent)
	switch {
	case strings.HasPrefix(parent, whMeta) || strings.Contains(parent, "/"+whMeta):
		return nil // below AUFS's metadata directories
	case base == whOpaque:
		return u.opaque(parent)
	case strings.HasPrefix(base, whMeta):
		return nil
	case strings.HasPrefix(base, whPrefix):
		return u.whiteout(parent, base[len(whPrefix):])
	}
	switch hdr.Typeflag {
	case tar.TypeDir:
		return u.mkdir(rel, parent, base, hdr)
	case tar.TypeReg, tar.TypeGNUSparse:
		return u.file(parent, base, hdr, r)
	case tar.TypeSymlink:
		return u.symlink(parent, base, hdr)
	case tar.TypeLink:
		return u.link(parent, base, hdr)
	case tar.TypeChar, tar.TypeBlock:
		u.st.Devices++
		return nil
	case tar.TypeFifo:
		u.st.FIFOs++
		return nil
	case tar.TypeXGlobalHeader:
		return nil
	}
	return fmt.Errorf("%w: entry type %q is not supported", ErrUnsafe, hdr.Typeflag)
}

// finishDirs sets the directories' modification times, now that nothing
// more is made in them.
func (u *unpacker) finishDirs() error {
	u.t.close()
	for i := len(u.dirs) - 1; i >= 0; i-- {
		d := u.dirs[i]
		parent, base := path.Split(d.rel)
		fd, err := u.t.dir(path.Clean(parent), false)
		if err != nil {
			continue // removed or replaced by a later entry
		}
		if err := setTimes(fd, base, d.mtime); err != nil && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("directory %q: %w", clip(d.rel), err)
		}
	}
	return nil
}

func setTimes(dir int, name string, t time.Time) error {
	ts := unix.NsecToTimespec(t.UnixNano())
	return unix.UtimesNanoAt(dir, name, []unix.Timespec{ts, ts}, unix.AT_SYMLINK_NOFOLLOW)
}
