package httpapi

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"openvibe.network/agentsandbox/worker/httpapi/apitest"
)

// tarOf is a tar of regular files (their content is their name) and, for
// names ending in "/", directories. It panics on the writer's errors, which
// these headers cannot cause.
func tarOf(names ...string) string {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, n := range names {
		hdr := &tar.Header{Name: n, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(n))}
		if strings.HasSuffix(n, "/") {
			hdr.Typeflag, hdr.Size = tar.TypeDir, 0
		}
		if err := tw.WriteHeader(hdr); err != nil {
			panic(err)
		}
		if _, err := tw.Write([]byte(n)[:hdr.Size]); err != nil {
			panic(err)
		}
	}
	if err := tw.Close(); err != nil {
		panic(err)
	}
	return buf.String()
}

// withFiles puts files (their content is their name) into sandbox sb-1.
func withFiles(names ...string) func(*apitest.Fake) {
	return func(f *apitest.Fake) {
		for _, n := range names {
			_ = f.PutFile(context.Background(), "sb-1", n, strings.NewReader(n), 0o644)
		}
	}
}

// tarNames checks that an answer is a tar of exactly these names.
func tarNames(want ...string) func(*testing.T, *testServer, answer) {
	return func(t *testing.T, _ *testServer, a answer) {
		if ct := a.header.Get("Content-Type"); ct != "application/x-tar" {
			t.Fatalf("Content-Type %q", ct)
		}
		var got []string
		tr := tar.NewReader(bytes.NewReader(a.body))
		for {
			hdr, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("tar: %v", err)
			}
			got = append(got, hdr.Name)
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Fatalf("archive (-want +got):\n%s", d)
		}
	}
}

// then asks another request after the case's and checks its answer.
func then(method, path, body string, wantStatus int, check func(*testing.T, *testServer, answer)) func(*testing.T, *testServer, answer) {
	return func(t *testing.T, ts *testServer, _ answer) {
		a := ts.do(t, method, path, body, nil)
		if a.status != wantStatus {
			t.Fatalf("then %s %s: %d %s, want %d", method, path, a.status, a.body, wantStatus)
		}
		if check != nil {
			check(t, ts, a)
		}
	}
}

// fileRouteCases are the route cases of the files and archive routes.
func fileRouteCases() []routeCase {
	const (
		files   = "/v1/sandboxes/{id}/files/"
		archive = "/v1/sandboxes/{id}/archive/"
		mtime   = `"mtime":"2026-01-02T03:04:05Z"`
	)
	dirHdr := map[string]string{"X-File-Type": "directory"}
	return []routeCase{
		{name: "PutFile", method: "PUT", path: files + "src/main.go", body: "package main\n", hdr: map[string]string{"X-File-Mode": "0755"},
			wantStatus: 204, check: func(t *testing.T, ts *testServer, a answer) {
				got := ts.do(t, "GET", "/v1/sandboxes/sb-1/files/src/main.go", "", nil)
				if got.status != 200 || string(got.body) != "package main\n" || got.header.Get("Content-Type") != "application/octet-stream" {
					t.Fatalf("get after put: %d %q %v", got.status, got.body, got.header)
				}
			}},
		{name: "GetEmptyFile", method: "GET", path: files + "empty", setup: func(f *apitest.Fake) {
			_ = f.PutFile(context.Background(), "sb-1", "empty", strings.NewReader(""), 0o644)
		}, wantStatus: 200, check: func(t *testing.T, _ *testServer, a answer) {
			if len(a.body) != 0 || a.header.Get("Content-Type") != "application/octet-stream" {
				t.Fatalf("empty file: %q %v", a.body, a.header)
			}
		}},
		{name: "ErrPutDotDot", method: "PUT", path: files + "../../sb-2/files/x", body: "x",
			wantStatus: 400, wantCode: "invalid_request", wantMsg: "contains `.`, `..` or an empty segment"},
		{name: "ErrGetDoubleSlash", method: "GET", path: files + "/etc/passwd",
			wantStatus: 400, wantCode: "invalid_request", wantMsg: "empty segment"},
		{name: "ErrPutMode", method: "PUT", path: files + "a", hdr: map[string]string{"X-File-Mode": "4755"},
			wantStatus: 400, wantCode: "invalid_request", wantMsg: "X-File-Mode"},
		{name: "ErrPutEscape", method: "PUT", path: files + "..%2F..%2Fetc%2Fpasswd", body: "x",
			wantStatus: 400, wantCode: "invalid_request", wantMsg: "contains `.`, `..`"},
		{name: "ErrPutUnknown", method: "PUT", path: "/v1/sandboxes/sb-404/files/a", body: "x", wantStatus: 404, wantCode: "sandbox_not_found"},
		{name: "ErrPutTooLarge", method: "PUT", path: files + "a", body: strings.Repeat("x", 100),
			mod: func(c *Config) { c.MaxUpload = 10 }, wantStatus: 413, wantCode: "body_too_large", wantMsg: "limit of 10 bytes",
			check: then("GET", "/v1/sandboxes/sb-1/files/a", "", 404, nil)},
		{name: "PutFileOverMaxBody", method: "PUT", path: files + "a", body: strings.Repeat("x", 100),
			mod: func(c *Config) { c.MaxBody = 10 }, wantStatus: 204},
		{name: "ErrPutDirectory", method: "PUT", path: files + "d", body: "x", setup: withFiles("d/f"),
			wantStatus: 400, wantCode: "is_directory", wantMsg: `"d" is a directory`},
		{name: "ErrPutTrailingSlash", method: "PUT", path: files + "d/", body: "x",
			wantStatus: 400, wantCode: "invalid_request", wantMsg: "X-File-Type: directory"},
		{name: "ErrPutFileType", method: "PUT", path: files + "d", hdr: map[string]string{"X-File-Type": "fifo"},
			wantStatus: 400, wantCode: "invalid_request", wantMsg: "X-File-Type"},
		{name: "ErrGetMissing", method: "GET", path: files + "nope.txt", wantStatus: 404, wantCode: "file_not_found"},
		{name: "ErrGetUnknown", method: "GET", path: "/v1/sandboxes/sb-404/files/a", wantStatus: 404, wantCode: "sandbox_not_found"},
		{name: "ErrGetEscape", method: "GET", path: files + "a%2F..%2F..%2Fx", wantStatus: 400, wantCode: "invalid_request", wantMsg: "contains `.`, `..`"},
		{name: "ErrGetAbsolute", method: "GET", path: files + "%2Fetc%2Fpasswd", wantStatus: 400, wantCode: "invalid_request", wantMsg: "empty segment"},
		{name: "ErrGetDirectory", method: "GET", path: files + "d", setup: withFiles("d/f"),
			wantStatus: 400, wantCode: "is_directory", wantMsg: "list it with GET …/files/d/"},

		{name: "ListDir", method: "GET", path: files + "d/", setup: withFiles("d/f.txt", "d/sub/x", "other"), wantStatus: 200,
			check: checkJSON(`{"items":[{"name":"f.txt","type":"file","size":7,"mode":"0644",` + mtime + `},{"name":"sub","type":"directory","size":0,"mode":"0755",` + mtime + `}]}`)},
		{name: "ListWorkspace", method: "GET", path: files, setup: withFiles("d/f.txt", "top"), wantStatus: 200,
			check: checkJSON(`{"items":[{"name":"d","type":"directory","size":0,"mode":"0755",` + mtime + `},{"name":"top","type":"file","size":3,"mode":"0644",` + mtime + `}]}`)},
		{name: "ListEmpty", method: "GET", path: files + "e/", setup: func(f *apitest.Fake) { _ = f.Mkdir(context.Background(), "sb-1", "e", 0) },
			wantStatus: 200, check: checkJSON(`{"items":[]}`)},
		{name: "ErrListFile", method: "GET", path: files + "f/", setup: withFiles("f"), wantStatus: 400, wantCode: "not_directory"},
		{name: "ErrListMissing", method: "GET", path: files + "nope/", wantStatus: 404, wantCode: "file_not_found"},
		{name: "ErrListUnknown", method: "GET", path: "/v1/sandboxes/sb-404/files/", wantStatus: 404, wantCode: "sandbox_not_found"},

		{name: "Mkdir", method: "PUT", path: files + "m/n/", hdr: dirHdr, wantStatus: 204,
			check: then("GET", "/v1/sandboxes/sb-1/files/m/", "", 200, checkJSON(`{"items":[{"name":"n","type":"directory","size":0,"mode":"0755",`+mtime+`}]}`))},
		{name: "MkdirNoSlash", method: "PUT", path: files + "m", hdr: dirHdr, wantStatus: 204},
		{name: "ErrMkdirOnFile", method: "PUT", path: files + "f/", hdr: dirHdr, setup: withFiles("f"), wantStatus: 409, wantCode: "exists"},
		{name: "ErrMkdirMode", method: "PUT", path: files + "m/", hdr: map[string]string{"X-File-Type": "directory", "X-File-Mode": "8"},
			wantStatus: 400, wantCode: "invalid_request", wantMsg: "X-File-Mode"},

		{name: "DeleteFile", method: "DELETE", path: files + "d/f", setup: withFiles("d/f", "d/g"), wantStatus: 204,
			check: then("GET", "/v1/sandboxes/sb-1/files/d/f", "", 404, nil)},
		{name: "DeleteRecursive", method: "DELETE", path: files + "d?recursive=1", setup: withFiles("d/f", "d/e/g"), wantStatus: 204,
			check: then("GET", "/v1/sandboxes/sb-1/files/", "", 200, checkJSON(`{"items":[]}`))},
		{name: "ErrDeleteNotEmpty", method: "DELETE", path: files + "d/", setup: withFiles("d/f"), wantStatus: 409, wantCode: "not_empty", wantMsg: "?recursive=1"},
		{name: "ErrDeleteMissing", method: "DELETE", path: files + "nope", wantStatus: 404, wantCode: "file_not_found"},
		{name: "ErrDeleteWorkspace", method: "DELETE", path: files + "?recursive=1", wantStatus: 400, wantCode: "invalid_request", wantMsg: "workspace itself"},
		{name: "ErrDeleteRecursiveValue", method: "DELETE", path: files + "d?recursive=yes", wantStatus: 400, wantCode: "invalid_request", wantMsg: "recursive"},
		{name: "ErrDeleteFileUnknown", method: "DELETE", path: "/v1/sandboxes/sb-404/files/a", wantStatus: 404, wantCode: "sandbox_not_found"},
		{name: "ErrDeleteEscape", method: "DELETE", path: files + "a/..%2F..%2Fb", wantStatus: 400, wantCode: "invalid_request"},

		{name: "GetArchive", method: "GET", path: archive + "d", setup: withFiles("d/a", "d/e/b", "other"), wantStatus: 200, check: tarNames("a", "e/b")},
		{name: "GetArchiveWorkspace", method: "GET", path: archive, setup: withFiles("d/a", "top"), wantStatus: 200, check: tarNames("d/a", "top")},
		{name: "ErrGetArchiveFile", method: "GET", path: archive + "f", setup: withFiles("f"), wantStatus: 400, wantCode: "not_directory"},
		{name: "ErrGetArchiveMissing", method: "GET", path: archive + "nope", wantStatus: 404, wantCode: "file_not_found"},
		{name: "ErrGetArchiveUnknown", method: "GET", path: "/v1/sandboxes/sb-404/archive/", wantStatus: 404, wantCode: "sandbox_not_found"},
		{name: "PutArchive", method: "PUT", path: archive + "p", body: tarOf("x/", "x/y", "z"), wantStatus: 204,
			check: then("GET", "/v1/sandboxes/sb-1/archive/p", "", 200, tarNames("x/", "x/y", "z"))},
		{name: "ErrPutArchiveRefused", method: "PUT", path: archive + "p", body: tarOf("ok", "../escape"),
			wantStatus: 400, wantCode: "invalid_archive", wantMsg: `entry "../escape" leaves the directory`,
			check: then("GET", "/v1/sandboxes/sb-1/files/", "", 200, checkJSON(`{"items":[]}`))},
		{name: "ErrPutArchiveTooLarge", method: "PUT", path: archive + "p", body: tarOf("x"),
			mod: func(c *Config) { c.MaxUpload = 100 }, wantStatus: 413, wantCode: "body_too_large"},
		{name: "ErrPutArchiveOnFile", method: "PUT", path: archive + "f", body: tarOf("x"), setup: withFiles("f"),
			wantStatus: 400, wantCode: "not_directory"},
		{name: "ErrPutArchiveUnknown", method: "PUT", path: "/v1/sandboxes/sb-404/archive/", body: "x", wantStatus: 404, wantCode: "sandbox_not_found"},
		{name: "ErrPutArchiveEscape", method: "PUT", path: archive + "a/..%2F..%2Fb", body: "x", wantStatus: 400, wantCode: "invalid_request"},
		{name: "ErrPutArchiveZip", method: "PUT", path: archive + "p", body: zipOf("x"), wantStatus: 400, wantCode: "invalid_archive",
			wantMsg: "the body is a zip archive, and zip is not supported: send a tar or a gzipped tar",
			check:   then("GET", "/v1/sandboxes/sb-1/files/", "", 200, checkJSON(`{"items":[]}`))},
		{name: "ErrPutArchiveEmptyZip", method: "PUT", path: archive + "p", body: zipOf(), wantStatus: 400, wantCode: "invalid_archive",
			wantMsg: "zip is not supported"},
		// The workspace's routes without their trailing slash are the
		// workspace's, not a redirect.
		{name: "GetArchiveNoSlash", method: "GET", path: "/v1/sandboxes/{id}/archive", setup: withFiles("d/a", "top"), wantStatus: 200, check: tarNames("d/a", "top")},
		{name: "PutArchiveNoSlash", method: "PUT", path: "/v1/sandboxes/{id}/archive", body: tarOf("x/", "x/y"), wantStatus: 204,
			check: then("GET", "/v1/sandboxes/sb-1/archive/x", "", 200, tarNames("y"))},
		{name: "ListWorkspaceNoSlash", method: "GET", path: "/v1/sandboxes/{id}/files", setup: withFiles("top"), wantStatus: 200,
			check: checkJSON(`{"items":[{"name":"top","type":"file","size":3,"mode":"0644",` + mtime + `}]}`)},
	}
}

// zipOf is a zip archive of empty files with names. It panics on the
// writer's errors, which these names cannot cause.
func zipOf(names ...string) string {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, n := range names {
		if _, err := zw.Create(n); err != nil {
			panic(err)
		}
	}
	if err := zw.Close(); err != nil {
		panic(err)
	}
	return buf.String()
}
