package sibling

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

func TestUsable(t *testing.T) {
	self := build("go1.26.0", "abc", "false", map[string]string{"golang.org/x/sys": "v0.1.0", "github.com/santhosh-tekuri/jsonschema/v6": "v6.0.1"})
	same := build("go1.26.0", "abc", "false", map[string]string{"golang.org/x/sys": "v0.1.0"})
	for _, tc := range []struct {
		name    string
		missing bool
		mode    os.FileMode
		dirMode os.FileMode // of their directory; 0 for 0o755
		chown   bool        // owned by another uid than self
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
		{name: "ErrDirWritableByOthers", mode: 0o755, dirMode: 0o777, info: same, wantErr: "writable by others (mode -rwxrwxrwx): install"},
		{name: "ErrDirGroupWritable", mode: 0o755, dirMode: 0o775, info: same, wantErr: "writable by others (mode -rwxrwxr-x): install"},
		{name: "ErrOtherOwner", mode: 0o755, chown: true, info: same, wantErr: "not owned by the owner"},
		{name: "ErrNotGo", mode: 0o755, readErr: errors.New("not a Go executable"), wantErr: "read build info"},
		{name: "ErrOtherGo", mode: 0o755, info: build("go1.25.0", "abc", "false", nil), wantErr: "Go go1.25.0"},
		{name: "ErrOtherRevision", mode: 0o755, info: build("go1.26.0", "def", "false", nil), wantErr: "vcs.revision"},
		{name: "ErrModified", mode: 0o755, info: build("go1.26.0", "abc", "true", nil), wantErr: "vcs.modified"},
		{name: "ErrOtherDependency", mode: 0o755, info: build("go1.26.0", "abc", "false", map[string]string{"golang.org/x/sys": "v0.2.0"}), wantErr: "dependency golang.org/x/sys"},
		{name: "OKOnlyOtherLinks", mode: 0o755, info: build("go1.26.0", "abc", "false", map[string]string{"golang.org/x/sys": "v0.1.0", "github.com/miekg/dns": "v1.0.0"})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			dirMode := tc.dirMode
			if dirMode == 0 {
				dirMode = 0o755
			}
			if err := os.Chmod(dir, dirMode); err != nil {
				t.Fatal(err)
			}
			selfPath := filepath.Join(dir, "codes-sandbox")
			writeFile(t, selfPath, 0o755)
			p := filepath.Join(dir, "codes-sandbox-init")
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
			err := Usable(selfPath, self, p, read)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("Usable: %v, want usable", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("Usable: %v, want an error with %q", err, tc.wantErr)
			case tc.missing && !errors.Is(err, fs.ErrNotExist):
				t.Fatalf("Usable: %v, want fs.ErrNotExist", err)
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

// TestCheckCaller: a program started by Exec accepts a caller of its own
// build, refuses one of another with what differs, and takes the caller's
// build information out of its environment either way; a program started
// otherwise has nothing to check.
func TestCheckCaller(t *testing.T) {
	self, ok := debug.ReadBuildInfo()
	if !ok {
		t.Fatal("the test binary has no build information")
	}
	other := *self
	other.GoVersion = "go1.0"
	for _, tc := range []struct {
		name    string
		env     *string
		wantErr string // substring; "" for nil
	}{
		{name: "NotStartedByExec"},
		{name: "SameBuild", env: ptrTo(self.String())},
		{name: "ErrOtherBuild", env: ptrTo(other.String()), wantErr: "from another build (Go go1.0, not " + self.GoVersion + ")"},
		{name: "ErrGarbled", env: ptrTo("not build info"), wantErr: "from another build"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.env != nil {
				t.Setenv(callerBuildEnv, *tc.env)
			}
			err := CheckCaller()
			if (tc.wantErr == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("CheckCaller = %v, want an error with %q", err, tc.wantErr)
			}
			if _, ok := os.LookupEnv(callerBuildEnv); ok {
				t.Fatalf("%s is still in the environment", callerBuildEnv)
			}
		})
	}
}

func ptrTo(s string) *string { return &s }
