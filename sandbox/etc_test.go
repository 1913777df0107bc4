package sandbox

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestBuildEtc(t *testing.T) {
	host := t.TempDir()
	state := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		p := filepath.Join(host, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("shadow", "root:secret")
	write("ssh/ssh_host_key", "key")
	write("ssl/private/key.pem", "key")
	write("ssl/certs/ca-certificates.crt", "certs")
	write("gitconfig", "[credential]")
	write("environment", "HTTPS_PROXY=http://user:secret@proxy.internal:3128")
	write("mime.types", "text/plain txt")
	if err := os.MkdirAll(filepath.Join(host, "alternatives"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/usr/bin/mawk", filepath.Join(host, "alternatives", "awk")); err != nil {
		t.Fatal(err)
	}
	dir, err := buildEtc(state, host)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		present bool
	}{
		{"passwd", true}, {"group", true}, {"hosts", true}, {"resolv.conf", true}, {"mtab", true},
		{"ssl/certs/ca-certificates.crt", true}, {"mime.types", true}, {"alternatives/awk", true},
		{"shadow", false}, {"ssh", false}, {"ssl/private", false}, {"gitconfig", false},
		{"environment", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := os.Lstat(filepath.Join(dir, tc.name))
			if tc.present && err != nil {
				t.Fatalf("missing: %v", err)
			}
			if !tc.present && !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("copied into the sandbox's /etc (%v)", err)
			}
		})
	}
	if l, _ := os.Readlink(filepath.Join(dir, "alternatives", "awk")); l != "/usr/bin/mawk" {
		t.Fatalf("symlink target %q", l)
	}
	again, err := buildEtc(state, host)
	if err != nil || again != dir {
		t.Fatalf("second build: %q %v, want the shared %q", again, err, dir)
	}
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(filepath.Join(host, "mime.types"), later, later); err != nil {
		t.Fatal(err)
	}
	if changed, err := buildEtc(state, host); err != nil || changed == dir {
		t.Fatalf("after a host change: %q %v, want a new copy", changed, err)
	}
}
