package client_test

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"openvibe.network/agentsandbox/client"
	"openvibe.network/agentsandbox/sandbox"
	"openvibe.network/agentsandbox/worker/httpapi"
	"openvibe.network/agentsandbox/worker/httpapi/apitest"
)

// tarBytes is a tar of files (content: their name) and directories (names
// ending in "/").
func tarBytes(tb testing.TB, names ...string) []byte {
	tb.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, n := range names {
		hdr := &tar.Header{Name: n, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(n))}
		if strings.HasSuffix(n, "/") {
			hdr.Typeflag, hdr.Size = tar.TypeDir, 0
		}
		if err := tw.WriteHeader(hdr); err != nil {
			tb.Fatal(err)
		}
		if _, err := tw.Write([]byte(n)[:hdr.Size]); err != nil {
			tb.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

func TestFilesRoundTrip(t *testing.T) {
	fake := apitest.NewFake(1)
	info, _ := fake.Create(context.Background(), sandbox.Options{})
	files := newWorker(t, fake, nil).Files(info.ID)
	ctx := ctxT(t)

	if err := files.Put(ctx, "src/a b#?.go", strings.NewReader("package a\n"), 0o600); err != nil {
		t.Fatalf("Put: %v", err)
	}
	if err := files.Mkdir(ctx, "src/empty/"); err != nil {
		t.Fatalf("Mkdir: %v", err)
	}
	var got bytes.Buffer
	if err := files.Get(ctx, "/src/a b#?.go", &got); err != nil || got.String() != "package a\n" {
		t.Fatalf("Get: %q %v", got.String(), err)
	}
	list, err := files.List(ctx, "src")
	mtime := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	want := []client.FileInfo{
		{Name: "a b#?.go", Type: "file", Size: 10, Mode: 0o644, ModTime: mtime},
		{Name: "empty", Type: "directory", Mode: 0o755, ModTime: mtime},
	}
	if d := cmp.Diff(want, list); err != nil || d != "" {
		t.Fatalf("List: %v (-want +got):\n%s", err, d)
	}
	if top, err := files.List(ctx, ""); err != nil || len(top) != 1 || top[0].Name != "src" {
		t.Fatalf("List of the workspace: %+v %v", top, err)
	}

	var archive bytes.Buffer
	if err := files.GetArchive(ctx, "src", &archive); err != nil {
		t.Fatalf("GetArchive: %v", err)
	}
	if err := files.PutArchive(ctx, "copy", &archive); err != nil {
		t.Fatalf("PutArchive: %v", err)
	}
	if copied, err := files.List(ctx, "copy"); err != nil || !cmp.Equal(copied, want) {
		t.Fatalf("List of the copy: %+v %v", copied, err)
	}
	if err := files.Remove(ctx, "copy", true); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	if err := files.Get(ctx, "copy/a b#?.go", io.Discard); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("Get after Remove: %v", err)
	}
}

func TestFilesErrors(t *testing.T) {
	fake := apitest.NewFake(1)
	info, _ := fake.Create(context.Background(), sandbox.Options{})
	w := newWorker(t, fake, func(c *httpapi.Config) { c.MaxUpload = 4 << 10 })
	files := w.Files(info.ID)
	ctx := ctxT(t)
	_ = fake.PutFile(ctx, info.ID, "d/f", strings.NewReader("x"), 0)
	big := filepath.Join(t.TempDir(), "big")
	if err := os.WriteFile(big, make([]byte, 64<<10), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		call     func() error
		want     error
		wantCode string
	}{
		{"ErrGetDirectory", func() error { return files.Get(ctx, "d", io.Discard) }, client.ErrIsDirectory, "is_directory"},
		{"ErrPutDirectory", func() error { return files.Put(ctx, "d", strings.NewReader("x"), 0) }, client.ErrIsDirectory, "is_directory"},
		{"ErrListFile", func() error { _, err := files.List(ctx, "d/f"); return err }, client.ErrNotDirectory, "not_directory"},
		{"ErrListMissing", func() error { _, err := files.List(ctx, "nope"); return err }, client.ErrNotFound, "file_not_found"},
		{"ErrMkdirOnFile", func() error { return files.Mkdir(ctx, "d/f") }, client.ErrExists, "exists"},
		{"ErrRemoveNotEmpty", func() error { return files.Remove(ctx, "d", false) }, client.ErrNotEmpty, "not_empty"},
		{"ErrRemoveMissing", func() error { return files.Remove(ctx, "nope", false) }, client.ErrNotFound, "file_not_found"},
		{"ErrPutTooLarge", func() error { return files.Put(ctx, "big", bytes.NewReader(make([]byte, 8<<10)), 0) }, client.ErrTooLarge, "body_too_large"},
		{"ErrPutFileTooLarge", func() error {
			f, err := os.Open(big)
			if err != nil {
				return err
			}
			defer f.Close()
			return files.Put(ctx, "big", f, 0)
		}, client.ErrTooLarge, "body_too_large"},
		{"ErrPutArchiveRefused", func() error { return files.PutArchive(ctx, "", bytes.NewReader(tarBytes(t, "../x"))) }, client.ErrInvalidArchive, "invalid_archive"},
		{"ErrUnknownSandbox", func() error { _, err := w.Files("nope").List(ctx, ""); return err }, client.ErrNotFound, "sandbox_not_found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			var ae *client.APIError
			if !errors.Is(err, tc.want) || !errors.As(err, &ae) || ae.Code != tc.wantCode {
				t.Fatalf("%v, want %v with code %s", err, tc.want, tc.wantCode)
			}
		})
	}
}

// TestAPIErrorMatchesCodes: a sentinel matches its code whole, not a code
// that ends like it.
func TestAPIErrorMatchesCodes(t *testing.T) {
	for _, tc := range []struct {
		code string
		want error
		not  error
	}{
		{"process_not_found", client.ErrNotFound, client.ErrExists},
		{"process_exited", client.ErrProcessExited, client.ErrNotFound},
		{"exists", client.ErrExists, client.ErrNotEmpty},
		{"not_empty", client.ErrNotEmpty, client.ErrExists},
		{"file_exists", nil, client.ErrExists},
		{"dir_not_found", nil, client.ErrNotFound},
	} {
		t.Run(tc.code, func(t *testing.T) {
			e := &client.APIError{StatusCode: 200, Code: tc.code}
			if tc.want != nil && !errors.Is(e, tc.want) {
				t.Errorf("%s does not match %v", tc.code, tc.want)
			}
			if errors.Is(e, tc.not) {
				t.Errorf("%s matches %v", tc.code, tc.not)
			}
		})
	}
}
