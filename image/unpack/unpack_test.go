package unpack

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"openvibe.network/agentsandbox/internal/testenv"
)

// entry is one member of a crafted layer.
type entry struct {
	hdr  tar.Header
	data string
}

func reg(name, data string, mode int64) entry {
	return entry{tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(data))}, data}
}
func dir(name string, mode int64) entry {
	return entry{hdr: tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: mode}}
}
func symlink(name, target string) entry {
	return entry{hdr: tar.Header{Typeflag: tar.TypeSymlink, Name: name, Linkname: target, Mode: 0o777}}
}
func hardlink(name, target string) entry {
	return entry{hdr: tar.Header{Typeflag: tar.TypeLink, Name: name, Linkname: target}}
}

// layerTar is the tar stream of entries.
func layerTar(tb testing.TB, entries ...entry) []byte {
	tb.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := e.hdr
		if h.ModTime.IsZero() {
			h.ModTime = time.Unix(1700000000, 0)
		}
		if h.Typeflag == tar.TypeReg && h.Size == 0 {
			h.Size = int64(len(e.data))
		}
		if err := tw.WriteHeader(&h); err != nil {
			tb.Fatalf("write header %q: %v", h.Name, err)
		}
		if _, err := io.WriteString(tw, e.data); err != nil {
			tb.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

// fixture is a layer directory beside a directory it must never touch.
type fixture struct {
	layer, outside string
}

func newFixture(tb testing.TB) fixture {
	tb.Helper()
	testenv.RequireRoot(tb) // whiteout devices and trusted.* attributes
	base := tb.TempDir()
	f := fixture{layer: filepath.Join(base, "layer"), outside: filepath.Join(base, "outside")}
	for _, d := range []string{f.layer, f.outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			tb.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(f.outside, "victim"), []byte("intact"), 0o644); err != nil {
		tb.Fatal(err)
	}
	return f
}

// untouched fails tb unless the outside directory holds exactly its victim,
// unchanged, with one link and no attributes.
func (f fixture) untouched(tb testing.TB) {
	tb.Helper()
	names, err := os.ReadDir(f.outside)
	if err != nil || len(names) != 1 || names[0].Name() != "victim" {
		tb.Errorf("outside directory now holds %v (%v)", names, err)
	}
	victim := filepath.Join(f.outside, "victim")
	if b, err := os.ReadFile(victim); err != nil || string(b) != "intact" {
		tb.Errorf("victim is %q (%v)", b, err)
	}
	var st unix.Stat_t
	if err := unix.Lstat(victim, &st); err != nil || st.Nlink != 1 {
		tb.Errorf("victim has %d links (%v)", st.Nlink, err)
	}
	if n, _ := unix.Listxattr(f.outside, nil); n > 0 {
		tb.Errorf("outside directory got extended attributes")
	}
	if _, err := os.Lstat(filepath.Join(filepath.Dir(f.outside), "escaped")); err == nil {
		tb.Errorf("a file was made beside the layer")
	}
}

// unpackBoth runs one layer through both ways of resolving paths (openat2,
// and by hand as on a kernel without it) into fresh fixtures.
func unpackBoth(t *testing.T, lim Limits, data []byte, check func(t *testing.T, f fixture, st Stats, err error)) {
	for _, byHand := range []bool{false, true} {
		t.Run(map[bool]string{false: "openat2", true: "by-hand"}[byHand], func(t *testing.T) {
			f := newFixture(t)
			st, err := layer(context.Background(), f.layer, bytes.NewReader(data), lim, byHand)
			check(t, f, st, err)
			f.untouched(t)
		})
	}
}

// TestHostileLayers: each crafted layer tries one way out of its directory
// or one thing the unpacker never makes; none writes outside, none makes a
// device, keeps a setuid bit or an attribute.
func TestHostileLayers(t *testing.T) {
	cases := []struct {
		name    string
		entries func(f fixture) []entry
		wantErr error // nil: the layer unpacks
		check   func(t *testing.T, f fixture, st Stats)
	}{
		{name: "DotDot", wantErr: ErrUnsafe, entries: func(fixture) []entry {
			return []entry{reg("../outside/victim", "owned", 0o644)}
		}},
		{name: "DotDotInside", wantErr: ErrUnsafe, entries: func(fixture) []entry {
			return []entry{dir("a/", 0o755), reg("a/../../escaped", "owned", 0o644)}
		}},
		{name: "Absolute", wantErr: ErrUnsafe, entries: func(f fixture) []entry {
			return []entry{reg(filepath.Join(f.outside, "victim"), "owned", 0o644)}
		}},
		{name: "WriteThroughRelativeSymlink", wantErr: errNotDir, entries: func(fixture) []entry {
			return []entry{symlink("evil", "../outside"), reg("evil/victim", "owned", 0o644)}
		}},
		{name: "WriteThroughAbsoluteSymlink", wantErr: errNotDir, entries: func(f fixture) []entry {
			return []entry{symlink("evil", f.outside), reg("evil/new", "owned", 0o644)}
		}},
		{name: "DirThroughSymlink", wantErr: errNotDir, entries: func(f fixture) []entry {
			return []entry{symlink("evil", f.outside), dir("evil/sub/", 0o755)}
		}},
		{name: "FileReplacesSymlink", entries: func(f fixture) []entry {
			return []entry{symlink("f", filepath.Join(f.outside, "victim")), reg("f", "mine", 0o644)}
		}, check: func(t *testing.T, f fixture, _ Stats) {
			if b, err := os.ReadFile(filepath.Join(f.layer, "f")); err != nil || string(b) != "mine" {
				t.Errorf("f = %q, %v", b, err)
			}
		}},
		{name: "HardlinkOutside", wantErr: ErrUnsafe, entries: func(fixture) []entry {
			return []entry{hardlink("h", "../outside/victim")}
		}},
		{name: "HardlinkAbsolute", wantErr: ErrUnsafe, entries: func(f fixture) []entry {
			return []entry{hardlink("h", filepath.Join(f.outside, "victim"))}
		}},
		{name: "HardlinkThroughSymlink", wantErr: ErrUnsafe, entries: func(f fixture) []entry {
			return []entry{symlink("d", f.outside), hardlink("h", "d/victim")}
		}},
		{name: "HardlinkToSymlinkIsTheLink", entries: func(f fixture) []entry {
			return []entry{symlink("s", filepath.Join(f.outside, "victim")), hardlink("h", "s")}
		}, check: func(t *testing.T, f fixture, _ Stats) {
			if fi, err := os.Lstat(filepath.Join(f.layer, "h")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
				t.Errorf("h is %v, %v; want a link to the symbolic link itself", fi, err)
			}
		}},
		{name: "HardlinkToDirectory", wantErr: ErrUnsafe, entries: func(fixture) []entry {
			return []entry{dir("d/", 0o755), hardlink("h", "d")}
		}},
		{name: "HardlinkMissing", wantErr: ErrUnsafe, entries: func(fixture) []entry {
			return []entry{hardlink("h", "nowhere")}
		}},
		{name: "ThroughFile", wantErr: errNotDir, entries: func(fixture) []entry {
			return []entry{reg("a", "x", 0o644), reg("a/b", "y", 0o644)}
		}},
		{name: "Devices", entries: func(fixture) []entry {
			return []entry{
				{hdr: tar.Header{Typeflag: tar.TypeChar, Name: "dev/mem", Devmajor: 1, Devminor: 1, Mode: 0o666}},
				{hdr: tar.Header{Typeflag: tar.TypeBlock, Name: "dev/sda", Devmajor: 8, Devminor: 0, Mode: 0o666}},
				{hdr: tar.Header{Typeflag: tar.TypeChar, Name: "wh", Mode: 0o666}}, // looks like a whiteout
			}
		}, check: func(t *testing.T, f fixture, st Stats) {
			if st.Devices != 3 {
				t.Errorf("Devices = %d, want 3", st.Devices)
			}
			assertNoSpecialFiles(t, f.layer)
		}},
		{name: "FIFO", entries: func(fixture) []entry {
			return []entry{{hdr: tar.Header{Typeflag: tar.TypeFifo, Name: "pipe", Mode: 0o666}}}
		}, check: func(t *testing.T, f fixture, st Stats) {
			if st.FIFOs != 1 {
				t.Errorf("FIFOs = %d, want 1", st.FIFOs)
			}
			if _, err := os.Lstat(filepath.Join(f.layer, "pipe")); err == nil {
				t.Error("the FIFO was made")
			}
		}},
		{name: "SetID", entries: func(fixture) []entry {
			return []entry{reg("bin/su", "x", 0o4755), reg("bin/wall", "x", 0o2755), dir("shared/", 0o3777)}
		}, check: func(t *testing.T, f fixture, st Stats) {
			for name, want := range map[string]os.FileMode{"bin/su": 0o755, "bin/wall": 0o755, "shared": os.ModeDir | os.ModeSticky | 0o777} {
				if fi, err := os.Lstat(filepath.Join(f.layer, name)); err != nil || fi.Mode() != want {
					t.Errorf("%s: mode %v (%v), want %v", name, fi.Mode(), err, want)
				}
			}
			if st.SetID != 3 {
				t.Errorf("SetID = %d, want 3", st.SetID)
			}
		}},
		{name: "Xattrs", entries: func(fixture) []entry {
			e := reg("bin/ping", "x", 0o755)
			e.hdr.PAXRecords = map[string]string{
				"SCHILY.xattr.security.capability":      "\x01\x00\x00\x02\x00\x20\x00\x00",
				"SCHILY.xattr.trusted.overlay.redirect": "/etc",
				"SCHILY.xattr.user.note":                "x",
			}
			d := dir("etc/", 0o755)
			d.hdr.PAXRecords = map[string]string{"SCHILY.xattr.trusted.overlay.opaque": "y"}
			return []entry{e, d}
		}, check: func(t *testing.T, f fixture, st Stats) {
			for _, name := range []string{"bin/ping", "etc"} {
				if n, err := unix.Llistxattr(filepath.Join(f.layer, name), nil); err != nil || n != 0 {
					t.Errorf("%s has %d bytes of attribute names (%v)", name, n, err)
				}
			}
			if st.Xattrs != 2 {
				t.Errorf("Xattrs = %d, want 2", st.Xattrs)
			}
		}},
		{name: "WhiteoutDotDot", wantErr: ErrUnsafe, entries: func(fixture) []entry {
			return []entry{reg(".wh...", "", 0o644)}
		}},
		{name: "WhiteoutDot", wantErr: ErrUnsafe, entries: func(fixture) []entry {
			return []entry{reg("a/.wh..", "", 0o644)}
		}},
		{name: "WhiteoutOutside", wantErr: ErrUnsafe, entries: func(fixture) []entry {
			return []entry{reg("../outside/.wh.victim", "", 0o644)}
		}},
		{name: "WhiteoutThroughSymlink", wantErr: errNotDir, entries: func(f fixture) []entry {
			return []entry{symlink("s", f.outside), reg("s/.wh.victim", "", 0o644)}
		}},
		{name: "OpaqueThroughSymlink", wantErr: errNotDir, entries: func(f fixture) []entry {
			return []entry{symlink("s", f.outside), reg("s/.wh..wh..opq", "", 0o644)}
		}},
		{name: "WhiteoutsInsideTheLayer", entries: func(fixture) []entry {
			return []entry{dir("d/", 0o755), reg("d/x", "x", 0o644), reg(".wh.d", "", 0o644),
				reg("e/.wh..wh..opq", "", 0o644), reg(".wh..wh.plnk/123", "", 0o644)}
		}, check: func(t *testing.T, f fixture, _ Stats) {
			var st unix.Stat_t
			if err := unix.Lstat(filepath.Join(f.layer, "d"), &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFCHR || st.Rdev != 0 {
				t.Errorf("d is not a whiteout: mode %o rdev %d (%v)", st.Mode, st.Rdev, err)
			}
			buf := make([]byte, 8)
			if n, err := unix.Getxattr(filepath.Join(f.layer, "e"), opaqueXattr, buf); err != nil || string(buf[:n]) != "y" {
				t.Errorf("e is not opaque: %q, %v", buf[:n], err)
			}
			if _, err := os.Lstat(filepath.Join(f.layer, ".wh..wh.plnk")); err == nil {
				t.Error("AUFS metadata was unpacked")
			}
		}},
		{name: "FileReplacesDirectory", entries: func(fixture) []entry {
			return []entry{dir("d/", 0o755), reg("d/x", "x", 0o644), reg("d", "file", 0o600)}
		}, check: func(t *testing.T, f fixture, _ Stats) {
			if b, err := os.ReadFile(filepath.Join(f.layer, "d")); err != nil || string(b) != "file" {
				t.Errorf("d = %q, %v", b, err)
			}
		}},
		{name: "OwnersModesTimes", entries: func(fixture) []entry {
			e := reg("home/u/f", "data", 0o640)
			e.hdr.Uid, e.hdr.Gid, e.hdr.ModTime = 1234, 5678, time.Unix(1500000000, 0)
			d := dir("home/u/", 0o750)
			d.hdr.Uid, d.hdr.ModTime = 1234, time.Unix(1400000000, 0)
			return []entry{d, e}
		}, check: func(t *testing.T, f fixture, st Stats) {
			var s unix.Stat_t
			if err := unix.Lstat(filepath.Join(f.layer, "home/u/f"), &s); err != nil || s.Uid != 1234 || s.Gid != 5678 || s.Mode&0o7777 != 0o640 || s.Mtim.Sec != 1500000000 {
				t.Errorf("f: uid %d gid %d mode %o mtime %d (%v)", s.Uid, s.Gid, s.Mode, s.Mtim.Sec, err)
			}
			if err := unix.Lstat(filepath.Join(f.layer, "home/u"), &s); err != nil || s.Uid != 1234 || s.Mode&0o7777 != 0o750 || s.Mtim.Sec != 1400000000 {
				t.Errorf("u: uid %d mode %o mtime %d (%v)", s.Uid, s.Mode, s.Mtim.Sec, err)
			}
			if st.Entries != 2 || st.Bytes != 4 || st.Charged != 2*EntryCost+4096 {
				t.Errorf("stats %+v", st)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// The entries need the fixture's paths: build them per run.
			for _, byHand := range []bool{false, true} {
				t.Run(map[bool]string{false: "openat2", true: "by-hand"}[byHand], func(t *testing.T) {
					f := newFixture(t)
					st, err := layer(context.Background(), f.layer, bytes.NewReader(layerTar(t, c.entries(f)...)), Limits{}, byHand)
					switch {
					case c.wantErr == nil && err != nil:
						t.Fatalf("Layer: %v", err)
					case c.wantErr != nil && !errors.Is(err, c.wantErr):
						t.Fatalf("Layer = %v, want %v", err, c.wantErr)
					}
					if c.check != nil {
						c.check(t, f, st)
					}
					f.untouched(t)
				})
			}
		})
	}
}

// assertNoSpecialFiles fails when root holds anything but directories,
// regular files and symbolic links.
func assertNoSpecialFiles(tb testing.TB, root string) {
	tb.Helper()
	_ = filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode()&(os.ModeDevice|os.ModeCharDevice|os.ModeNamedPipe|os.ModeSocket) != 0 {
			tb.Errorf("%s is a special file (%v)", p, fi.Mode())
		}
		return nil
	})
}

// TestLayerCaps: too many entries, a file larger than the cap, many files
// that together pass it, and data after the archive's end are refused, and
// nothing is written past the cap.
func TestLayerCaps(t *testing.T) {
	capped := func(limit int64) (Limits, *int64) {
		var used int64
		return Limits{Reserve: func(n int64) error {
			if used+n > limit {
				return fmt.Errorf("over the cap of %d bytes", limit)
			}
			used += n
			return nil
		}}, &used
	}
	t.Run("MillionsOfEntries", func(t *testing.T) {
		var entries []entry
		for i := range 1001 {
			entries = append(entries, reg(fmt.Sprintf("f%d", i), "", 0o644))
		}
		unpackBoth(t, Limits{MaxEntries: 1000}, layerTar(t, entries...), func(t *testing.T, f fixture, st Stats, err error) {
			if !errors.Is(err, ErrTooMany) {
				t.Fatalf("Layer = %v, want ErrTooMany", err)
			}
			if n, _ := os.ReadDir(f.layer); len(n) != 1000 {
				t.Errorf("%d entries made, want 1000", len(n))
			}
		})
	})
	t.Run("Bomb", func(t *testing.T) {
		// A 1 GiB file of zeros (a few MiB of gzip): refused before any of
		// it is written.
		lim, used := capped(8 << 20)
		f := newFixture(t)
		pr, pw := io.Pipe()
		go func() {
			tw := tar.NewWriter(pw)
			_ = tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "zeros", Size: 1 << 30, Mode: 0o644})
			_, _ = io.CopyN(tw, zeroReader{}, 1<<30)
			pw.CloseWithError(tw.Close())
		}()
		_, err := Layer(context.Background(), f.layer, pr, lim)
		pr.Close()
		if err == nil || !strings.Contains(err.Error(), "over the cap") {
			t.Fatalf("Layer = %v, want the cap's error", err)
		}
		if _, err := os.Lstat(filepath.Join(f.layer, "zeros")); err == nil {
			t.Error("the file was made")
		}
		if *used != 0 {
			t.Errorf("%d bytes charged", *used)
		}
	})
	t.Run("ManySmallPastTheCap", func(t *testing.T) {
		var entries []entry
		for i := range 100 {
			entries = append(entries, reg(fmt.Sprintf("f%d", i), strings.Repeat("x", 10000), 0o644))
		}
		lim, used := capped(256 << 10)
		unpackBoth(t, lim, layerTar(t, entries...), func(t *testing.T, f fixture, _ Stats, err error) {
			if err == nil || !strings.Contains(err.Error(), "over the cap") {
				t.Fatalf("Layer = %v, want the cap's error", err)
			}
			if *used > 256<<10 {
				t.Errorf("%d bytes charged past the cap", *used)
			}
			*used = 0
		})
	})
	t.Run("Trailer", func(t *testing.T) {
		data := append(layerTar(t, reg("f", "x", 0o644)), make([]byte, 2<<20)...)
		unpackBoth(t, Limits{}, data, func(t *testing.T, _ fixture, _ Stats, err error) {
			if !errors.Is(err, ErrTrailer) {
				t.Fatalf("Layer = %v, want ErrTrailer", err)
			}
		})
	})
	t.Run("Cancelled", func(t *testing.T) {
		f := newFixture(t)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := Layer(ctx, f.layer, bytes.NewReader(layerTar(t, reg("f", "x", 0o644))), Limits{}); !errors.Is(err, context.Canceled) {
			t.Fatalf("Layer = %v, want context.Canceled", err)
		}
	})
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
