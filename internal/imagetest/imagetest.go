// Package imagetest makes what tests of image sandboxes need, once per test
// binary, in a directory Cleanup removes (call it at the end of TestMain):
// a static init (an image has none of the host's libraries for a test
// binary's dynamic one) and the unpacked layers of the test images
// (image/registrytest's busybox image and Debian image).
package imagetest

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"openvibe.network/agentsandbox/image/registrytest"
	"openvibe.network/agentsandbox/image/unpack"
	"openvibe.network/agentsandbox/internal/testenv"
)

// made is what this test binary made.
var made struct {
	mu      sync.Mutex
	dir     string
	init    string
	layers  map[string]string
	failure map[string]string
}

// Cleanup removes what the package made.
func Cleanup() {
	made.mu.Lock()
	defer made.mu.Unlock()
	if made.dir != "" {
		_ = os.RemoveAll(made.dir)
		made.dir, made.init, made.layers, made.failure = "", "", nil, nil
	}
}

// dir is the package's directory, made on first use (under mu).
func dir(tb testing.TB) string {
	tb.Helper()
	if made.dir == "" {
		d, err := os.MkdirTemp("", "agentsandbox-test-images-")
		if err != nil {
			tb.Fatal(err)
		}
		if err := os.Chmod(d, 0o755); err != nil { // the sandboxes' uids read the init
			tb.Fatal(err)
		}
		made.dir, made.layers, made.failure = d, map[string]string{}, map[string]string{}
	}
	return made.dir
}

// StaticInit builds codes-sandbox-init without cgo, once.
func StaticInit(tb testing.TB) string {
	tb.Helper()
	made.mu.Lock()
	defer made.mu.Unlock()
	if made.init != "" {
		return made.init
	}
	goBin := testenv.RequireBinary(tb, "go", "install Go (make deps)")
	out := filepath.Join(dir(tb), "codes-sandbox-init")
	cmd := exec.Command(goBin, "build", "-o", out, "openvibe.network/agentsandbox/cmd/codes-sandbox-init")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("build a static init: %v\n%s", err, b)
	}
	made.init = out
	return out
}

// layer unpacks the tar stream mk opens as the layer name, once.
func layer(tb testing.TB, name string, mk func() (io.Reader, error)) string {
	tb.Helper()
	testenv.RequireRoot(tb) // whiteouts and opaque markers
	made.mu.Lock()
	defer made.mu.Unlock()
	d := dir(tb)
	if why := made.failure[name]; why != "" {
		tb.Fatal(why)
	}
	if l := made.layers[name]; l != "" {
		return l
	}
	l := filepath.Join(d, name)
	if err := os.Mkdir(l, 0o755); err != nil {
		tb.Fatal(err)
	}
	r, err := mk()
	if err == nil {
		_, err = unpack.Layer(context.Background(), l, r, unpack.Limits{})
	}
	if err != nil {
		made.failure[name] = "unpack " + name + ": " + err.Error()
		tb.Fatal(made.failure[name])
	}
	made.layers[name] = l
	return l
}

// BusyboxLayer is the unpacked busybox image (registrytest.BusyboxEntries).
func BusyboxLayer(tb testing.TB) string {
	tb.Helper()
	entries := registrytest.BusyboxEntries(tb)
	return layer(tb, "busybox", func() (io.Reader, error) { return bytes.NewReader(registrytest.Tar(tb, entries...)), nil })
}

// DebianLayer is the unpacked Debian test image (python3, pip, bash).
func DebianLayer(tb testing.TB) string {
	tb.Helper()
	l := registrytest.DebianLayer(tb)
	return layer(tb, "debian", func() (io.Reader, error) {
		rc, err := l.Compressed()
		if err != nil {
			return nil, err
		}
		return gzip.NewReader(rc)
	})
}

// DebianEnv is the Debian test image's environment.
func DebianEnv() []string {
	return []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"}
}
