package sandbox

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"openvibe.network/agentsandbox"
)

// workspaceTree lists everything in the workspace of sandbox id, one line
// per entry: type, mode, size (of files), path and link target.
func workspaceTree(tb testing.TB, rt *Runtime, id string) string {
	tb.Helper()
	return shOK(tb, rt, id, `cd /workspace && find . -mindepth 1 \( -type f -printf '%y %m %s %p\n' \) -o \( ! -type f -printf '%y %m - %p %l\n' \) | sort -k4`)
}

// brokenReader yields n bytes, then fails with err (or, when ctx is set,
// blocks until ctx ends and fails with its error).
type brokenReader struct {
	n   int
	err error
	ctx context.Context
}

func (b *brokenReader) Read(p []byte) (int, error) {
	if b.n == 0 {
		if b.ctx != nil {
			<-b.ctx.Done()
			return 0, b.ctx.Err()
		}
		return 0, b.err
	}
	n := min(len(p), b.n)
	clear(p[:n])
	b.n -= n
	return n, nil
}

// TestPutFileAllOrNothing: an upload that fails, is cancelled or fills the
// workspace leaves nothing (no file, no parents, no space taken), and a
// file it would have replaced keeps its content.
func TestPutFileAllOrNothing(t *testing.T) {
	rt := newRuntime(t, Config{Capacity: 1})
	id := newBox(t, rt, Options{Limits: agentsandbox.Limits{DiskMB: 8}}).ID
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := rt.PutFile(ctx, id, "keep.txt", strings.NewReader("old"), 0); err != nil {
		t.Fatal(err)
	}
	before := workspaceTree(t, rt, id)
	errBroken := errors.New("client went away")

	t.Run("ErrSourceFails", func(t *testing.T) {
		err := rt.PutFile(ctx, id, "new/dir/f", &brokenReader{n: 3 << 20, err: errBroken}, 0)
		if !errors.Is(err, errBroken) {
			t.Fatalf("PutFile: %v, want the reader's error", err)
		}
	})
	t.Run("ErrSourceCutShort", func(t *testing.T) { // as an HTTP body whose client went away
		err := rt.PutFile(ctx, id, "new/short", &brokenReader{n: 300 << 10, err: io.ErrUnexpectedEOF}, 0)
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("PutFile: %v, want io.ErrUnexpectedEOF", err)
		}
	})
	t.Run("ErrSourceFailsOverFile", func(t *testing.T) {
		err := rt.PutFile(ctx, id, "keep.txt", &brokenReader{n: 1 << 20, err: errBroken}, 0)
		if !errors.Is(err, errBroken) {
			t.Fatalf("PutFile: %v, want the reader's error", err)
		}
	})
	t.Run("ErrCancelled", func(t *testing.T) {
		cctx, ccancel := context.WithCancel(ctx)
		time.AfterFunc(200*time.Millisecond, ccancel)
		err := rt.PutFile(cctx, id, "new/f", &brokenReader{n: 1 << 20, ctx: cctx}, 0)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("PutFile: %v, want context.Canceled", err)
		}
	})
	t.Run("ErrNoSpace", func(t *testing.T) {
		err := rt.PutFile(ctx, id, "new/big", bytes.NewReader(make([]byte, 12<<20)), 0)
		if !errors.Is(err, ErrNoSpace) {
			t.Fatalf("PutFile: %v, want ErrNoSpace", err)
		}
	})
	t.Run("ErrDirectory", func(t *testing.T) {
		shOK(t, rt, id, "mkdir -p d/sub")
		defer shOK(t, rt, id, "rm -r d")
		for _, p := range []string{"d", "d/sub"} {
			if err := rt.PutFile(ctx, id, p, strings.NewReader("x"), 0); !errors.Is(err, ErrIsDir) {
				t.Errorf("PutFile %s: %v, want ErrIsDir", p, err)
			}
			if err := rt.GetFile(ctx, id, p, io.Discard); !errors.Is(err, ErrIsDir) {
				t.Errorf("GetFile %s: %v, want ErrIsDir", p, err)
			}
		}
		if err := rt.PutFile(ctx, id, "keep.txt/x", strings.NewReader("x"), 0); !errors.Is(err, ErrNotDir) {
			t.Errorf("PutFile under a file: %v, want ErrNotDir", err)
		}
	})
	// Wait for the init to have closed what it discarded, then check.
	time.Sleep(50 * time.Millisecond)
	if after := workspaceTree(t, rt, id); after != before {
		t.Fatalf("failed uploads left something:\nbefore\n%s\nafter\n%s", before, after)
	}
	var got bytes.Buffer
	if err := rt.GetFile(ctx, id, "keep.txt", &got); err != nil || got.String() != "old" {
		t.Fatalf("keep.txt after failed replacements: %q %v", got.String(), err)
	}
	// The space of the failed uploads is free again: 7 of 8 MB fit.
	if err := rt.PutFile(ctx, id, "fits", bytes.NewReader(make([]byte, 7<<20)), 0o600); err != nil {
		t.Fatalf("PutFile after the failures: %v", err)
	}
	if out := shOK(t, rt, id, "stat -c '%a %s' fits"); out != "600 7340032\n" {
		t.Fatalf("stat fits: %q", out)
	}
}

// TestTreeOps lists, makes and removes workspace entries.
func TestTreeOps(t *testing.T) {
	rt := newRuntime(t, Config{Capacity: 1})
	id := newBox(t, rt, Options{}).ID
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	shOK(t, rt, id, "mkdir -p d/sub && printf hello > d/f && chmod 640 d/f && chmod 700 d/sub && ln -s f d/link && mkfifo -m 600 d/pipe && touch -d @1700000000 d/f")

	t.Run("List", func(t *testing.T) {
		got, err := rt.ListDir(ctx, id, "d")
		if err != nil {
			t.Fatal(err)
		}
		for i := range got[1:] { // only f's time is known
			got[i+1].ModTime = 0
		}
		dirSize, _ := strconv.ParseInt(strings.TrimSpace(shOK(t, rt, id, "stat -c %s d/sub")), 10, 64)
		want := []FileInfo{
			{Name: "f", Type: "file", Size: 5, Mode: 0o640, ModTime: 1700000000e9},
			{Name: "link", Type: "symlink", Size: 1, Mode: 0o777},
			{Name: "pipe", Type: "other", Mode: 0o600},
			{Name: "sub", Type: "directory", Size: dirSize, Mode: 0o700},
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Fatalf("ListDir (-want +got):\n%s", d)
		}
	})
	t.Run("ListWorkspace", func(t *testing.T) {
		got, err := rt.ListDir(ctx, id, "")
		if err != nil || len(got) != 1 || got[0].Name != "d" {
			t.Fatalf("ListDir of the workspace: %+v %v", got, err)
		}
	})
	t.Run("ListEmpty", func(t *testing.T) {
		got, err := rt.ListDir(ctx, id, "d/sub")
		if err != nil || got == nil || len(got) != 0 {
			t.Fatalf("ListDir of an empty directory: %#v %v", got, err)
		}
	})
	t.Run("Mkdir", func(t *testing.T) {
		if err := rt.Mkdir(ctx, id, "m/n/o", 0o750); err != nil {
			t.Fatal(err)
		}
		if err := rt.Mkdir(ctx, id, "m/n/o", 0); err != nil {
			t.Fatalf("Mkdir of a directory that exists: %v", err)
		}
		if out := shOK(t, rt, id, "stat -c %a m m/n m/n/o"); out != "755\n755\n750\n" {
			t.Fatalf("modes: %q", out)
		}
	})
	for _, tc := range []struct {
		name string
		call func() error
		want error
	}{
		{"ErrListFile", func() error { _, err := rt.ListDir(ctx, id, "d/f"); return err }, ErrNotDir},
		{"ErrListMissing", func() error { _, err := rt.ListDir(ctx, id, "nope"); return err }, fs.ErrNotExist},
		{"ErrListOutside", func() error { _, err := rt.ListDir(ctx, id, "../etc"); return err }, ErrPath},
		{"ErrListAbsLink", func() error { shOK(t, rt, id, "ln -sf /etc abs"); _, err := rt.ListDir(ctx, id, "abs"); return err }, ErrPath},
		{"ErrMkdirOnFile", func() error { return rt.Mkdir(ctx, id, "d/f", 0) }, ErrExists},
		{"ErrMkdirUnderFile", func() error { return rt.Mkdir(ctx, id, "d/f/x", 0) }, ErrNotDir},
		{"ErrRemoveNotEmpty", func() error { return rt.Remove(ctx, id, "d", false) }, ErrNotEmpty},
		{"ErrRemoveMissing", func() error { return rt.Remove(ctx, id, "nope", false) }, fs.ErrNotExist},
		{"ErrRemoveWorkspace", func() error { return rt.Remove(ctx, id, "/workspace", true) }, ErrPath},
		{"ErrRemoveOutside", func() error { return rt.Remove(ctx, id, "abs/passwd", false) }, ErrPath},
		{"ErrUnknown", func() error { _, err := rt.ListDir(ctx, "nope", ""); return err }, ErrNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.call(); !errors.Is(err, tc.want) {
				t.Fatalf("%v, want %v", err, tc.want)
			}
		})
	}
	t.Run("Remove", func(t *testing.T) {
		for _, p := range []string{"d/link", "d/f", "d/pipe", "d/sub", "abs"} {
			if err := rt.Remove(ctx, id, p, false); err != nil {
				t.Fatalf("Remove %s: %v", p, err)
			}
		}
		shOK(t, rt, id, "mkdir -p d/x/y && touch d/x/y/z && chmod 0 d/x/y && chmod 500 d/x")
		if err := rt.Remove(ctx, id, "d", true); err != nil {
			t.Fatalf("Remove recursive: %v", err)
		}
		if got := workspaceTree(t, rt, id); got != "d 755 - ./m \nd 755 - ./m/n \nd 750 - ./m/n/o \n" {
			t.Fatalf("left: %q", got)
		}
	})
}

// TestRemoveDeepTree removes a tree 10,000 levels deep (with a file on
// every level) from a sandbox whose init may hold only 64 descriptors.
func TestRemoveDeepTree(t *testing.T) {
	rt := newRuntime(t, Config{Capacity: 1, MaxOpenFiles: 64})
	id := newBox(t, rt, Options{}).ID
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	shOK(t, rt, id, `python3 -c '
import os
os.mkdir("deep"); os.chdir("deep")
for i in range(10000):
    open("f", "w").close(); os.mkdir("d"); os.chdir("d")
'`)
	start := time.Now()
	if err := rt.Remove(ctx, id, "deep", true); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	t.Logf("removed 20,000 entries 10,000 levels deep in %v", time.Since(start))
	if got := workspaceTree(t, rt, id); got != "" {
		t.Fatalf("left: %q", got)
	}
}
