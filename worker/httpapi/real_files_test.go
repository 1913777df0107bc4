package httpapi

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"crypto/md5"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"openvibe.network/agentsandbox"
	"openvibe.network/agentsandbox/client"
	"openvibe.network/agentsandbox/internal/testenv"
	"openvibe.network/agentsandbox/sandbox"
)

// realFiles is a worker API on a real runtime with one sandbox in it.
type realFiles struct {
	w     *client.Worker
	files *client.Files
	id    string
	url   string // the API's base URL
}

// newRealFiles serves the API on a real runtime (one slot, a workspace of
// diskMB, uploads of at most maxUpload bytes) and creates a sandbox.
func newRealFiles(tb testing.TB, diskMB int, maxUpload int64) *realFiles {
	tb.Helper()
	testenv.RequireSandbox(tb)
	rt, err := sandbox.NewRuntime(sandbox.Config{Capacity: 1})
	if err != nil {
		tb.Fatalf("NewRuntime: %v", err)
	}
	tb.Cleanup(func() {
		if err := rt.Close(); err != nil {
			tb.Errorf("close runtime: %v", err)
		}
	})
	s, err := New(Config{Runtime: rt, Token: testToken, Limits: agentsandbox.Limits{DiskMB: diskMB}, MaxUpload: maxUpload})
	if err != nil {
		tb.Fatal(err)
	}
	srv := httptest.NewServer(s.Handler())
	tb.Cleanup(srv.Close)
	w := client.NewWorker(srv.URL, testToken, srv.Client())
	sb, err := w.Create(context.Background(), client.CreateOptions{})
	if err != nil {
		tb.Fatalf("Create: %v", err)
	}
	tb.Cleanup(func() { _, _ = w.Delete(context.Background(), sb.ID) })
	return &realFiles{w: w, files: w.Files(sb.ID), id: sb.ID, url: srv.URL}
}

// sh runs a script in the sandbox that must exit 0 and returns its stdout.
func (rf *realFiles) sh(tb testing.TB, script string) string {
	tb.Helper()
	var stdout, stderr bytes.Buffer
	res, err := rf.w.Exec(context.Background(), rf.id, client.ExecRequest{Argv: []string{"sh", "-c", script}}, &stdout, &stderr)
	if err != nil || res.ExitCode != 0 {
		tb.Fatalf("%q: %+v %v, stderr %s", script, res, err, stderr.String())
	}
	return stdout.String()
}

// tree lists the workspace: type, mode, size of files, path, link target.
func (rf *realFiles) tree(tb testing.TB) string {
	tb.Helper()
	return rf.sh(tb, `cd /workspace && find . -mindepth 1 \( -type f -printf '%y %m %s %p\n' \) -o \( ! -type f -printf '%y %m - %p %l\n' \) | sort -k4`)
}

// used is the workspace's used space in KiB.
func (rf *realFiles) used(tb testing.TB) string {
	tb.Helper()
	return strings.TrimSpace(rf.sh(tb, "df -k /workspace | awk 'NR==2 {print $3}'"))
}

// rawRequest sends head (a request line and headers, without the final
// empty line, the token added) and body on a connection of its own and
// returns the connection.
func (rf *realFiles) rawRequest(tb testing.TB, head string, body []byte) net.Conn {
	tb.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(rf.url, "http://"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	msg := head + "\r\nHost: worker\r\nAuthorization: Bearer " + testToken + "\r\n\r\n"
	if _, err := c.Write(append([]byte(msg), body...)); err != nil {
		tb.Fatal(err)
	}
	return c
}

// TestRealFileRoutes drives every file and archive route through the client
// against a real sandbox.
func TestRealFileRoutes(t *testing.T) {
	rf := newRealFiles(t, 64, DefaultMaxUpload)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	files := rf.files

	if err := files.Put(ctx, "src/main.go", strings.NewReader("package main\n"), 0o640); err != nil {
		t.Fatalf("Put: %v", err)
	}
	if err := files.Mkdir(ctx, "src/empty/deeper"); err != nil {
		t.Fatalf("Mkdir: %v", err)
	}
	rf.sh(t, "cd src && ln -s main.go link && mkfifo -m 600 pipe && chmod 700 empty")
	list, err := files.List(ctx, "src")
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	dirSize, _ := strconv.ParseInt(strings.TrimSpace(rf.sh(t, "stat -c %s src/empty")), 10, 64)
	want := []client.FileInfo{
		{Name: "empty", Type: "directory", Size: dirSize, Mode: 0o700},
		{Name: "link", Type: "symlink", Size: 7, Mode: 0o777},
		{Name: "main.go", Type: "file", Size: 13, Mode: 0o640},
		{Name: "pipe", Type: "other", Mode: 0o600},
	}
	if d := cmp.Diff(want, list, cmpopts.IgnoreFields(client.FileInfo{}, "ModTime")); d != "" {
		t.Fatalf("List (-want +got):\n%s", d)
	}
	if time.Since(list[2].ModTime) > time.Minute {
		t.Fatalf("mtime of main.go: %v", list[2].ModTime)
	}
	var got bytes.Buffer
	if err := files.Get(ctx, "src/link", &got); err != nil || got.String() != "package main\n" {
		t.Fatalf("Get through a link: %q %v", got.String(), err)
	}

	for _, tc := range []struct {
		name string
		call func() error
		want error
		code string
	}{
		{"ErrGetDirectory", func() error { return files.Get(ctx, "src", io.Discard) }, client.ErrIsDirectory, "is_directory"},
		{"ErrPutDirectory", func() error { return files.Put(ctx, "src/empty", strings.NewReader("x"), 0) }, client.ErrIsDirectory, "is_directory"},
		{"ErrListFile", func() error { _, err := files.List(ctx, "src/main.go"); return err }, client.ErrNotDirectory, "not_directory"},
		{"ErrPutUnderFile", func() error { return files.Put(ctx, "src/main.go/x", strings.NewReader("x"), 0) }, client.ErrNotDirectory, "not_directory"},
		{"ErrMkdirOnFile", func() error { return files.Mkdir(ctx, "src/main.go") }, client.ErrExists, "exists"},
		{"ErrRemoveNotEmpty", func() error { return files.Remove(ctx, "src", false) }, client.ErrNotEmpty, "not_empty"},
		{"ErrRemoveMissing", func() error { return files.Remove(ctx, "nope", true) }, client.ErrNotFound, "file_not_found"},
		{"ErrGetNotRegular", func() error { return files.Get(ctx, "src/pipe", io.Discard) }, nil, "invalid_request"},
		{"ErrArchiveFile", func() error { return files.GetArchive(ctx, "src/main.go", io.Discard) }, client.ErrNotDirectory, "not_directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			var ae *client.APIError
			if !errors.As(err, &ae) || ae.Code != tc.code || (tc.want != nil && !errors.Is(err, tc.want)) {
				t.Fatalf("%v, want code %s", err, tc.code)
			}
		})
	}

	t.Run("ArchiveRoundTrip", func(t *testing.T) {
		rf.sh(t, "cd src && head -c 200000 /dev/urandom > rand.bin && ln main.go hard && mkdir -p a/b/c && echo deep > a/b/c/f && touch -d @1600000000 a/b")
		listing := `cd /workspace/%s && find . -mindepth 1 \( -type d -printf '%%y %%m - %%Ts %%n %%p\n' \) -o \( ! -type p -printf '%%y %%m %%s %%Ts %%n %%p %%l\n' \) | sort -k6; cat rand.bin | md5sum`
		want := rf.sh(t, fmt.Sprintf(listing, "src"))
		var tarball bytes.Buffer
		if err := files.GetArchive(ctx, "src", &tarball); err != nil {
			t.Fatalf("GetArchive: %v", err)
		}
		if err := files.PutArchive(ctx, "elsewhere/copy", &tarball); err != nil {
			t.Fatalf("PutArchive: %v", err)
		}
		if d := cmp.Diff(want, rf.sh(t, fmt.Sprintf(listing, "elsewhere/copy"))); d != "" {
			t.Fatalf("the copy differs (-want +got):\n%s", d)
		}
	})
	t.Run("DownloadHasLength", func(t *testing.T) {
		rf.sh(t, "head -c 3000000 /dev/urandom > big.bin && : > empty.bin")
		for _, tc := range []struct {
			path string
			size int64
		}{{"big.bin", 3000000}, {"empty.bin", 0}} {
			req, err := http.NewRequestWithContext(ctx, "GET", rf.url+"/v1/sandboxes/"+rf.id+"/files/"+tc.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+testToken)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			type answer struct {
				Status        int
				ContentLength int64
				Chunked       bool
				Bytes         int64
				Type          string
			}
			got := answer{resp.StatusCode, resp.ContentLength, len(resp.TransferEncoding) > 0, int64(len(body)), resp.Header.Get("Content-Type")}
			if want := (answer{200, tc.size, false, tc.size, "application/octet-stream"}); err != nil || got != want {
				t.Errorf("GET %s: %+v %v, want %+v", tc.path, got, err, want)
			}
		}
		var buf bytes.Buffer
		if err := files.Get(ctx, "big.bin", &buf); err != nil {
			t.Fatal(err)
		}
		if got, want := fmt.Sprintf("%x  -\n", md5.Sum(buf.Bytes())), rf.sh(t, "md5sum < big.bin"); got != want {
			t.Errorf("the download's md5 %q, the file's %q", got, want)
		}
		rf.sh(t, "rm big.bin empty.bin")
	})
	t.Run("RemoveRecursive", func(t *testing.T) {
		if err := files.Remove(ctx, "elsewhere", true); err != nil {
			t.Fatalf("Remove: %v", err)
		}
		if err := files.Remove(ctx, "src/link", false); err != nil {
			t.Fatalf("Remove a link: %v", err)
		}
		if top, err := files.List(ctx, ""); err != nil || len(top) != 1 || top[0].Name != "src" {
			t.Fatalf("List after Remove: %+v %v", top, err)
		}
		if _, err := files.List(ctx, "src/link"); !errors.Is(err, client.ErrNotFound) {
			t.Fatalf("the link is still there: %v", err)
		}
	})
}

// TestRealUploadsLeaveNothing: an upload whose client goes away half-way,
// one over the cap by its Content-Length (answered before its body is
// sent), and a chunked one that passes the cap leave nothing in the
// workspace.
func TestRealUploadsLeaveNothing(t *testing.T) {
	const maxUpload = 4 << 20
	rf := newRealFiles(t, 16, maxUpload)
	rf.sh(t, "echo keep > keep.txt")
	before, usedBefore := rf.tree(t), rf.used(t)
	assertNothingLeft := func(t *testing.T) {
		t.Helper()
		if after := rf.tree(t); after != before {
			t.Fatalf("the upload left something:\nbefore\n%s\nafter\n%s", before, after)
		}
		deadline := time.Now().Add(10 * time.Second) // the worker sees the client go only when it reads
		for rf.used(t) != usedBefore {
			if time.Now().After(deadline) {
				t.Fatalf("the workspace uses %s KiB, %s before the upload", rf.used(t), usedBefore)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	t.Run("ClientGoesAway", func(t *testing.T) {
		c := rf.rawRequest(t, fmt.Sprintf("PUT /v1/sandboxes/%s/files/new/dir/half.bin HTTP/1.1\r\nContent-Length: %d", rf.id, 3<<20), make([]byte, 1<<20))
		time.Sleep(100 * time.Millisecond) // the first MiB reached the sandbox
		c.Close()
		assertNothingLeft(t)
	})
	t.Run("ContentLengthOverCap", func(t *testing.T) {
		start := time.Now()
		c := rf.rawRequest(t, fmt.Sprintf("PUT /v1/sandboxes/%s/files/huge.bin HTTP/1.1\r\nContent-Length: %d", rf.id, 1<<30), []byte("only a few bytes"))
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("no answer while the body was not sent: %v", err)
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(body), `"body_too_large"`) {
			t.Fatalf("answer %d %s, want 413 body_too_large", resp.StatusCode, body)
		}
		t.Logf("413 for a 1 GiB Content-Length after %v, with 16 bytes of the body sent", time.Since(start))
		assertNothingLeft(t)
	})
	t.Run("ChunkedOverCap", func(t *testing.T) {
		c := rf.rawRequest(t, fmt.Sprintf("PUT /v1/sandboxes/%s/files/new/chunked.bin HTTP/1.1\r\nTransfer-Encoding: chunked", rf.id), nil)
		chunk := append(append([]byte(fmt.Sprintf("%x\r\n", 64<<10)), make([]byte, 64<<10)...), "\r\n"...)
		for sent := 0; sent <= maxUpload+(64<<10); sent += 64 << 10 {
			if _, err := c.Write(chunk); err != nil {
				t.Fatalf("write chunk at %d: %v", sent, err)
			}
		}
		// The body has not ended (no last chunk): the answer comes because
		// the cap was passed.
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("no answer after the cap was passed: %v", err)
		}
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Fatalf("answer %d, want 413", resp.StatusCode)
		}
		assertNothingLeft(t)
	})
	t.Run("ArchiveOverCap", func(t *testing.T) {
		var big bytes.Buffer
		tw := tar.NewWriter(&big)
		_ = tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "big", Mode: 0o644, Size: 5 << 20})
		_, _ = tw.Write(make([]byte, 5<<20))
		_ = tw.Close()
		err := rf.files.PutArchive(context.Background(), "dest", &big)
		if !errors.Is(err, client.ErrTooLarge) {
			t.Fatalf("PutArchive: %v, want ErrTooLarge", err)
		}
		assertNothingLeft(t)
	})
}

// realTar is a tar of headers, each regular file's content its name.
func realTar(tb testing.TB, hdrs ...tar.Header) []byte {
	tb.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range hdrs {
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(h.Name))
		}
		if err := tw.WriteHeader(&h); err != nil {
			tb.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write([]byte(h.Name)); err != nil {
				tb.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

// TestRealArchiveRefused: archives with `../` entries, an absolute symlink,
// a symlink that climbs out and a hard link out are refused with
// invalid_archive naming the entry, and nothing of them is written.
func TestRealArchiveRefused(t *testing.T) {
	rf := newRealFiles(t, 16, DefaultMaxUpload)
	rf.sh(t, "mkdir -p dest && echo secret > secret.txt")
	good := []tar.Header{{Typeflag: tar.TypeDir, Name: "ok/", Mode: 0o755}, {Typeflag: tar.TypeReg, Name: "ok/file", Mode: 0o644}}
	for _, tc := range []struct {
		name   string
		bad    tar.Header
		reason string
	}{
		{"DotDot", tar.Header{Typeflag: tar.TypeReg, Name: "../../escape", Mode: 0o644}, "contains `..`"},
		{"AbsoluteSymlink", tar.Header{Typeflag: tar.TypeSymlink, Name: "etc", Linkname: "/etc"}, "absolute path"},
		{"ClimbingSymlink", tar.Header{Typeflag: tar.TypeSymlink, Name: "ok/up", Linkname: "../../../etc"}, "leads out of the workspace"},
		{"HardLinkOut", tar.Header{Typeflag: tar.TypeLink, Name: "stolen", Linkname: "../secret.txt"}, "hard link"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := rf.tree(t)
			err := rf.files.PutArchive(context.Background(), "dest", bytes.NewReader(realTar(t, append(good, tc.bad, tar.Header{Typeflag: tar.TypeReg, Name: "after", Mode: 0o644})...)))
			var ae *client.APIError
			if !errors.Is(err, client.ErrInvalidArchive) || !errors.As(err, &ae) || !strings.Contains(ae.Message, tc.reason) {
				t.Fatalf("PutArchive: %v, want invalid_archive saying %q", err, tc.reason)
			}
			if after := rf.tree(t); after != before {
				t.Fatalf("a refused archive wrote:\nbefore\n%s\nafter\n%s", before, after)
			}
		})
	}
}
