package main

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"

	"openvibe.network/agentsandbox/internal/testenv"
)

// build returns build information with the given Go version, VCS
// settings and dependency versions.
func build(goVersion, revision, modified string, deps map[string]string) *debug.BuildInfo {
	info := &debug.BuildInfo{
		GoVersion: goVersion,
		Main:      debug.Module{Path: "openvibe.network/agentsandbox", Version: "(devel)"},
		Settings: []debug.BuildSetting{
			{Key: "GOOS", Value: "linux"}, {Key: "GOARCH", Value: "amd64"},
			{Key: "vcs.revision", Value: revision}, {Key: "vcs.time", Value: "2026-11-30T00:00:00Z"},
			{Key: "vcs.modified", Value: modified},
		},
	}
	for p, v := range deps {
		info.Deps = append(info.Deps, &debug.Module{Path: p, Version: v, Sum: "h1:" + v})
	}
	return info
}

func TestUsableInit(t *testing.T) {
	self := build("go1.26.0", "abc", "false", map[string]string{"golang.org/x/sys": "v0.1.0", "github.com/santhosh-tekuri/jsonschema/v6": "v6.0.1"})
	same := build("go1.26.0", "abc", "false", map[string]string{"golang.org/x/sys": "v0.1.0"})
	for _, tc := range []struct {
		name    string
		missing bool
		mode    os.FileMode
		chown   bool // owned by another uid than self
		info    *debug.BuildInfo
		readErr error
		wantErr string // substring; "" for usable
	}{
		{name: "OK", mode: 0o755, info: same},
		{name: "OKOwnerOnly", mode: 0o700, info: same},
		{name: "ErrMissing", missing: true, wantErr: "no such file"},
		{name: "ErrNotExecutable", mode: 0o644, info: same, wantErr: "not an executable"},
		{name: "ErrWritableByOthers", mode: 0o777, info: same, wantErr: "writable by others"},
		{name: "ErrGroupWritable", mode: 0o775, info: same, wantErr: "writable by others"},
		{name: "ErrOtherOwner", mode: 0o755, chown: true, info: same, wantErr: "not owned by the owner"},
		{name: "ErrNotGo", mode: 0o755, readErr: errors.New("not a Go executable"), wantErr: "read build info"},
		{name: "ErrOtherGo", mode: 0o755, info: build("go1.25.0", "abc", "false", nil), wantErr: "Go go1.25.0"},
		{name: "ErrOtherRevision", mode: 0o755, info: build("go1.26.0", "def", "false", nil), wantErr: "vcs.revision"},
		{name: "ErrModified", mode: 0o755, info: build("go1.26.0", "abc", "true", nil), wantErr: "vcs.modified"},
		{name: "ErrOtherDependency", mode: 0o755, info: build("go1.26.0", "abc", "false", map[string]string{"golang.org/x/sys": "v0.2.0"}), wantErr: "dependency golang.org/x/sys"},
		{name: "ErrExtraDependency", mode: 0o755, info: build("go1.26.0", "abc", "false", map[string]string{"github.com/miekg/dns": "v1.0.0"}), wantErr: "dependency github.com/miekg/dns"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			selfPath := filepath.Join(dir, "codes-sandbox")
			writeFile(t, selfPath, 0o755)
			p := filepath.Join(dir, leanInitName)
			if !tc.missing {
				writeFile(t, p, tc.mode)
			}
			if tc.chown {
				testenv.RequireRoot(t) // to change the file's owner
				if err := os.Chown(p, 65534, 65534); err != nil {
					t.Fatal(err)
				}
			}
			read := func(path string) (*debug.BuildInfo, error) {
				if path != p {
					t.Errorf("read build info of %s, want %s", path, p)
				}
				return tc.info, tc.readErr
			}
			err := usableInit(selfPath, self, p, read)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("usableInit: %v, want usable", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("usableInit: %v, want an error with %q", err, tc.wantErr)
			case tc.missing && !errors.Is(err, fs.ErrNotExist):
				t.Fatalf("usableInit: %v, want fs.ErrNotExist", err)
			}
		})
	}
}

func writeFile(tb testing.TB, path string, mode os.FileMode) {
	tb.Helper()
	if err := os.WriteFile(path, []byte("#!/bin/true\n"), mode); err != nil {
		tb.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil { // not masked by the umask
		tb.Fatal(err)
	}
}
