package sandbox

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"openvibe.network/agentsandbox"
)

// tarEntry is one entry of a test archive: its header and content.
type tarEntry struct {
	hdr  tar.Header
	body string
}

func file(name, body string) tarEntry {
	return tarEntry{tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(body))}, body}
}

func dir(name string) tarEntry {
	return tarEntry{hdr: tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: 0o755}}
}

func symlink(name, target string) tarEntry {
	return tarEntry{hdr: tar.Header{Typeflag: tar.TypeSymlink, Name: name, Linkname: target, Mode: 0o777}}
}

func hardLink(name, target string) tarEntry {
	return tarEntry{hdr: tar.Header{Typeflag: tar.TypeLink, Name: name, Linkname: target, Mode: 0o644}}
}

// makeTar writes the entries as a tar.
func makeTar(tb testing.TB, entries ...tarEntry) []byte {
	tb.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		hdr := e.hdr
		hdr.ModTime = time.Unix(1700000000, 0)
		if err := tw.WriteHeader(&hdr); err != nil {
			tb.Fatal(err)
		}
		if _, err := tw.Write([]byte(e.body)); err != nil {
			tb.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

// treeOf lists the tree below dir of sandbox id with every property an
// archive carries: type, mode, size (of non-directories: a directory's
// depends on what the archive leaves out), time, link count, path, link
// target.
func treeOf(tb testing.TB, rt *Runtime, id, dir string) string {
	tb.Helper()
	return shOK(tb, rt, id, `cd /workspace/`+dir+` && find . -mindepth 1 \( -type d -printf '%y %m - %Ts %n %p\n' \) -o \( ! -type p -printf '%y %m %s %Ts %n %p %l\n' \) | sort -k6`)
}

// TestArchiveRoundTrip: a tree archived and unpacked elsewhere is the same
// tree, also gzipped, and unpacking into a directory that has content
// merges it.
func TestArchiveRoundTrip(t *testing.T) {
	rt := newRuntime(t, Config{Capacity: 1})
	id := newBox(t, rt, Options{}).ID
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	shOK(t, rt, id, `mkdir -p src/a/b/c src/empty src/locked && cd src &&
		printf 'hello\n' > a/f.txt && chmod 600 a/f.txt && head -c 300000 /dev/urandom > a/b/big.bin &&
		printf '#!/bin/sh\n' > run.sh && chmod 755 run.sh && ln a/f.txt hard && ln -s a/f.txt link && ln -s ../src/a up &&
		touch 'a/b/c/name with spaces' && mkfifo a/pipe && mkdir -p $(python3 -c 'print("/".join(["deep"]*60))') &&
		chmod 500 locked && chmod 750 a/b && touch -d @1600000000 a/b run.sh`)
	want := treeOf(t, rt, id, "src")

	var tarball bytes.Buffer
	if err := rt.GetArchive(ctx, id, "src", &tarball); err != nil {
		t.Fatalf("GetArchive: %v", err)
	}
	if err := rt.PutArchive(ctx, id, "copy/of/src", bytes.NewReader(tarball.Bytes())); err != nil {
		t.Fatalf("PutArchive: %v", err)
	}
	if d := cmp.Diff(want, treeOf(t, rt, id, "copy/of/src")); d != "" {
		t.Fatalf("the unpacked tree differs (-want +got):\n%s", d)
	}

	t.Run("Gzip", func(t *testing.T) {
		var gz bytes.Buffer
		zw := gzip.NewWriter(&gz)
		zw.Write(tarball.Bytes())
		zw.Close()
		if err := rt.PutArchive(ctx, id, "gz", &gz); err != nil {
			t.Fatalf("PutArchive: %v", err)
		}
		if d := cmp.Diff(want, treeOf(t, rt, id, "gz")); d != "" {
			t.Fatalf("the unpacked tree differs (-want +got):\n%s", d)
		}
	})
	t.Run("Merge", func(t *testing.T) {
		shOK(t, rt, id, "mkdir -p m/sub && echo old > m/old.txt && echo keep > m/sub/keep && echo mine > m/mine")
		err := rt.PutArchive(ctx, id, "m", bytes.NewReader(makeTar(t, file("old.txt", "new\n"), file("sub/new", "n\n"), dir("fresh/"), file("fresh/x", "x"))))
		if err != nil {
			t.Fatalf("PutArchive: %v", err)
		}
		out := shOK(t, rt, id, "cd m && for f in old.txt sub/keep sub/new mine fresh/x; do printf '%s=%s;' $f \"$(cat $f)\"; done; ls -A | tr '\\n' ' '")
		if out != "old.txt=new;sub/keep=keep;sub/new=n;mine=mine;fresh/x=x;fresh mine old.txt sub " {
			t.Fatalf("merged: %q", out)
		}
	})
	t.Run("IntoWorkspace", func(t *testing.T) {
		if err := rt.PutArchive(ctx, id, "", bytes.NewReader(makeTar(t, file("top.txt", "top")))); err != nil {
			t.Fatalf("PutArchive: %v", err)
		}
		if out := shOK(t, rt, id, "cat /workspace/top.txt; ls -a /workspace | grep -c tar-put || true"); out != "top0\n" {
			t.Fatalf("top.txt and temporary directories: %q", out)
		}
	})
}

// TestArchiveRefused: an archive with an entry that leaves the workspace,
// a link that does, or anything but files, directories and links, is
// refused with the reason, and nothing of it is written; so is one that
// does not fit.
func TestArchiveRefused(t *testing.T) {
	rt := newRuntime(t, Config{Capacity: 1})
	id := newBox(t, rt, Options{Limits: agentsandbox.Limits{DiskMB: 8}}).ID
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	shOK(t, rt, id, "mkdir -p dest/x && echo keep > keep.txt && echo a > dest/a")
	good := []tarEntry{dir("ok/"), file("ok/f", "fine"), file("top", "fine")}
	for _, tc := range []struct {
		name    string
		entries []tarEntry
		raw     []byte
		dest    string
		want    error
		reason  string
	}{
		{name: "DotDot", entries: []tarEntry{file("a/../../escape", "x")}, want: ErrInvalidArchive, reason: "contains `..`"},
		{name: "DotDotFirst", entries: []tarEntry{file("../escape", "x")}, want: ErrInvalidArchive, reason: "contains `..`"},
		{name: "AbsoluteName", entries: []tarEntry{file("/tmp/escape", "x")}, want: ErrInvalidArchive, reason: "absolute name"},
		{name: "AbsoluteSymlink", entries: []tarEntry{symlink("etc", "/etc")}, want: ErrInvalidArchive, reason: "absolute path"},
		{name: "ClimbingSymlink", entries: []tarEntry{symlink("sub/up", "../../../etc")}, want: ErrInvalidArchive, reason: "leads out of the workspace"},
		{name: "ChainedSymlinks", entries: []tarEntry{symlink("d/up", ".."), symlink("up2", "d/up/../..")}, want: ErrInvalidArchive, reason: `"up2" is a symlink`},
		{name: "WriteThroughSymlink", entries: []tarEntry{symlink("l", "ok"), file("l/f", "x")}, want: ErrInvalidArchive, reason: "file or symlink"},
		{name: "HardLinkOut", entries: []tarEntry{hardLink("h", "../../keep.txt")}, want: ErrInvalidArchive, reason: "hard link"},
		{name: "HardLinkAbsolute", entries: []tarEntry{hardLink("h", "/etc/passwd")}, want: ErrInvalidArchive, reason: "hard link"},
		{name: "HardLinkToOutsideFile", entries: []tarEntry{hardLink("h", "a")}, want: ErrInvalidArchive, reason: "not a file earlier in the archive"},
		{name: "Device", entries: []tarEntry{{hdr: tar.Header{Typeflag: tar.TypeChar, Name: "null", Devmajor: 1, Devminor: 3, Mode: 0o666}}}, want: ErrInvalidArchive, reason: "device node or fifo"},
		{name: "Fifo", entries: []tarEntry{{hdr: tar.Header{Typeflag: tar.TypeFifo, Name: "pipe", Mode: 0o644}}}, want: ErrInvalidArchive, reason: "device node or fifo"},
		{name: "NotTar", raw: bytes.Repeat([]byte("not a tar archive "), 100), want: ErrInvalidArchive, reason: "not a valid tar"},
		{name: "Truncated", raw: makeTar(t, file("big", strings.Repeat("x", 5000)))[:2048], want: ErrInvalidArchive, reason: "not a valid tar"},
		{name: "FileOverDestDir", entries: []tarEntry{file("x", "x")}, want: ErrExists, reason: `"x" is a file or link but the destination has a directory`},
		{name: "DirOverDestFile", entries: []tarEntry{file("a/b", "x")}, want: ErrExists, reason: `"a" is a directory but the destination has a file`},
		{name: "DestIsFile", entries: nil, dest: "keep.txt", want: ErrNotDir},
		{name: "DestOutside", entries: nil, dest: "../etc", want: ErrPath},
		{name: "NoSpace", entries: []tarEntry{file("big", strings.Repeat("x", 12<<20))}, want: ErrNoSpace},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := workspaceTree(t, rt, id)
			raw := tc.raw
			if raw == nil {
				raw = makeTar(t, append(append(good[:len(good):len(good)], tc.entries...), good...)...)
			}
			dest := tc.dest
			if dest == "" {
				dest = "dest"
			}
			err := rt.PutArchive(ctx, id, dest, bytes.NewReader(raw))
			if !errors.Is(err, tc.want) {
				t.Fatalf("PutArchive: %v, want %v", err, tc.want)
			}
			var ae *ArchiveError
			if tc.reason != "" && (!errors.As(err, &ae) || !strings.Contains(ae.Reason, tc.reason)) {
				t.Fatalf("PutArchive: %v, want an ArchiveError saying %q", err, tc.reason)
			}
			if after := workspaceTree(t, rt, id); after != before {
				t.Fatalf("a refused archive wrote:\nbefore\n%s\nafter\n%s", before, after)
			}
		})
	}
	// The refused archives' space is free again.
	if err := rt.PutFile(ctx, id, "fits", bytes.NewReader(make([]byte, 7<<20)), 0); err != nil {
		t.Fatalf("PutFile after the refusals: %v", err)
	}
}
