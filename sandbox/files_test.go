package sandbox

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"strings"
	"testing"
)

func TestFiles(t *testing.T) {
	rt := newRuntime(t, Config{Capacity: 1})
	id := newBox(t, rt, Options{}).ID
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	content := bytes.Repeat([]byte("0123456789abcdef"), 200000) // 3.2 MB, several frames
	if err := rt.PutFile(ctx, id, "a/b/c.txt", bytes.NewReader(content), 0o600); err != nil {
		t.Fatalf("PutFile: %v", err)
	}
	if out := shOK(t, rt, id, "stat -c '%a %U %s' /workspace/a/b/c.txt"); out != "600 sandbox 3200000\n" {
		t.Fatalf("stat: %q", out)
	}
	var got bytes.Buffer
	if err := rt.GetFile(ctx, id, "/workspace/a/b/c.txt", &got); err != nil || !bytes.Equal(got.Bytes(), content) {
		t.Fatalf("GetFile: %v (%d bytes)", err, got.Len())
	}
	shOK(t, rt, id, "ln -s /etc/passwd abs; ln -s / root; ln -s .. up; ln -s a/b/c.txt inner; ln -s /proc/self/root magic; mkdir d")

	t.Run("InnerSymlink", func(t *testing.T) {
		var b bytes.Buffer
		if err := rt.GetFile(ctx, id, "inner", &b); err != nil || b.Len() != len(content) {
			t.Fatalf("GetFile inner: %v", err)
		}
	})
	for _, tc := range []struct {
		name string
		path string
		put  bool
		want error
	}{
		{"GetDotDot", "../etc/passwd", false, ErrPath},
		{"PutDotDot", "a/../../x", true, ErrPath},
		{"GetAbsolute", "/etc/passwd", false, ErrPath},
		{"PutAbsolute", "/tmp/x", true, ErrPath},
		{"GetAbsSymlink", "abs", false, ErrPath},
		{"PutThroughAbsSymlink", "abs", true, ErrPath},
		{"GetRootSymlink", "root/etc/passwd", false, ErrPath},
		{"PutRootSymlinkParent", "root/tmp/x", true, ErrPath},
		{"GetUpSymlink", "up/etc/passwd", false, ErrPath},
		{"GetMagicLink", "magic/etc/passwd", false, ErrPath},
		{"PutWorkspaceItself", "/workspace", true, ErrPath},
		{"GetMissing", "nope.txt", false, fs.ErrNotExist},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			if tc.put {
				err = rt.PutFile(ctx, id, tc.path, strings.NewReader("x"), 0)
			} else {
				err = rt.GetFile(ctx, id, tc.path, &bytes.Buffer{})
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("%s: %v, want %v", tc.path, err, tc.want)
			}
		})
	}
	t.Run("GetDirectory", func(t *testing.T) {
		if err := rt.GetFile(ctx, id, "d", &bytes.Buffer{}); err == nil {
			t.Fatal("GetFile of a directory succeeded")
		}
	})
	t.Run("UnknownSandbox", func(t *testing.T) {
		if err := rt.GetFile(ctx, "nope", "x", &bytes.Buffer{}); !errors.Is(err, ErrNotFound) {
			t.Fatalf("GetFile: %v", err)
		}
	})
	if out := shOK(t, rt, id, "cat /etc/passwd | grep -c sandbox; ls /tmp"); out != "1\n" {
		t.Fatalf("an escape wrote outside the workspace: %q", out)
	}
}
