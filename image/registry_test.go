package image

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
)

func TestParseRegistry(t *testing.T) {
	for _, c := range []struct {
		in      string
		private bool
		want    Registry
		wantErr string
	}{
		{in: "registry.example", want: Registry{Host: "registry.example"}},
		{in: "registry.example:5000/team", want: Registry{Host: "registry.example:5000", Prefix: "team"}},
		{in: "docker.io/library", want: Registry{Host: "index.docker.io", Prefix: "library"}},
		{in: "127.0.0.1:5000", private: true, want: Registry{Host: "127.0.0.1:5000", Private: true}},
		{in: "ghcr.io/org/sub/", want: Registry{Host: "ghcr.io", Prefix: "org/sub"}},
		{in: "https://registry.example", wantErr: "without a scheme"},
		{in: "registry.example/UPPER", wantErr: "prefix"},
		{in: "", wantErr: "registry"},
	} {
		got, err := ParseRegistry(c.in, c.private)
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("ParseRegistry(%q) = %+v, %v; want an error saying %q", c.in, got, err, c.wantErr)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("ParseRegistry(%q) = %+v, %v; want %+v", c.in, got, err, c.want)
		}
	}
}

func TestParseRefAllowList(t *testing.T) {
	regs := []Registry{{Host: "registry.example", Prefix: "team"}, {Host: "index.docker.io", Prefix: "library"}}
	for _, c := range []struct {
		ref     string
		wantErr error
	}{
		{"registry.example/team/py:3.12", nil},
		{"registry.example/team/sub/py@sha256:" + strings.Repeat("a", 64), nil},
		{"python:3.12-slim", nil}, // Docker Hub's library
		{"docker.io/library/python:3", nil},
		{"registry.example/teamster/py:1", ErrNotAllowed}, // a prefix is a path boundary
		{"registry.example/other/py:1", ErrNotAllowed},
		{"registry.example:443/team/py:1", ErrNotAllowed}, // another host:port
		{"someone/python:3", ErrNotAllowed},
		{"evil.example/team/py:1", ErrNotAllowed},
		{"registry.example/team/Py:1", ErrBadRef},
		{strings.Repeat("a", 600), ErrBadRef},
	} {
		_, _, err := parseRef(c.ref, regs)
		if !errors.Is(err, c.wantErr) && (err != nil || c.wantErr != nil) {
			t.Errorf("parseRef(%q) = %v, want %v", c.ref, err, c.wantErr)
		}
		if errors.Is(err, ErrNotAllowed) && !strings.Contains(err.Error(), "registry.example/team") {
			t.Errorf("the refusal does not name the list: %v", err)
		}
	}
	if _, _, err := parseRef("python:3", nil); !errors.Is(err, ErrNotAllowed) || !strings.Contains(err.Error(), "--image-registry") {
		t.Errorf("with no registries: %v", err)
	}
}

func TestParseAuth(t *testing.T) {
	a, err := ParseAuth([]byte(`{"auths": {
		"https://index.docker.io/v1/": {"auth": "dXNlcjpwYXNz"},
		"registry.example:5000": {"username": "u2", "password": "p2"},
		"https://ghcr.io": {"identitytoken": "tok"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	for host, want := range map[string]authn.AuthConfig{
		"index.docker.io":       {Username: "user", Password: "pass"},
		"registry.example:5000": {Username: "u2", Password: "p2"},
		"ghcr.io":               {IdentityToken: "tok"},
		"other.example":         {},
	} {
		reg, err := name.NewRegistry(host)
		if err != nil {
			t.Fatal(err)
		}
		au, err := a.Resolve(reg)
		if err != nil {
			t.Fatal(err)
		}
		got, err := au.Authorization()
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, *got); diff != "" {
			t.Errorf("%s: (-want +got)\n%s", host, diff)
		}
	}
	for _, bad := range []string{`not json`, `{"credsStore": "desktop"}`, `{"auths": {"r.example": {"auth": "!!"}}}`, `{"auths": {"r.example": {}}}`} {
		if _, err := ParseAuth([]byte(bad)); err == nil {
			t.Errorf("ParseAuth(%s) took it", bad)
		} else if strings.Contains(err.Error(), "!!") {
			t.Errorf("the error quotes the credential: %v", err)
		}
	}
}

func TestResolveUser(t *testing.T) {
	files := map[string]string{
		"etc/passwd": "root:x:0:0::/root:/bin/sh\napp:x:1000:1001::/home/app:/bin/sh\nbroken:x:zz:1\n",
		"etc/group":  "root:x:0:\nstaff:x:50:\n",
	}
	read := func(rel string) ([]byte, error) {
		if s, ok := files[rel]; ok {
			return []byte(s), nil
		}
		return nil, os.ErrNotExist
	}
	for _, c := range []struct {
		spec     string
		uid, gid int
		wantErr  bool
	}{
		{"", 0, 0, false}, {"root", 0, 0, false}, {"app", 1000, 1001, false}, {"1000", 1000, 1001, false},
		{"2000", 2000, 0, false}, {"app:staff", 1000, 50, false}, {"app:7", 1000, 7, false}, {"0:0", 0, 0, false},
		{"ghost", 0, 0, true}, {"app:ghosts", 0, 0, true}, {"broken", 0, 0, true},
	} {
		uid, gid, err := resolveUser(c.spec, read)
		if (err != nil) != c.wantErr || !c.wantErr && (uid != c.uid || gid != c.gid) {
			t.Errorf("resolveUser(%q) = %d:%d, %v; want %d:%d (error %v)", c.spec, uid, gid, err, c.uid, c.gid, c.wantErr)
		}
	}
}
