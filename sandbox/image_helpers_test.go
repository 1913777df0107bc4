package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"openvibe.network/agentsandbox/internal/imagetest"
)

// removeTestImages removes what the image tests made (at the end of
// TestMain).
func removeTestImages() { imagetest.Cleanup() }

// busyboxImage is the busybox test image (root, PATH=/bin) with cfg's
// changes.
func busyboxImage(tb testing.TB, change func(*RootImage)) *RootImage {
	tb.Helper()
	l := imagetest.BusyboxLayer(tb)
	img := &RootImage{Ref: "registry.test/tiny/busybox:1", Digest: "sha256:" + fakeDigest, Layers: []string{l}, Env: []string{"PATH=/bin"}}
	if change != nil {
		change(img)
	}
	return img
}

// debianImage is the Debian test image (python3, pip, bash; root).
func debianImage(tb testing.TB) *RootImage {
	tb.Helper()
	return &RootImage{Ref: "registry.test/debian/python:1", Digest: "sha256:" + fakeDigest, Layers: []string{imagetest.DebianLayer(tb)},
		Env: imagetest.DebianEnv()}
}

const fakeDigest = "0000000000000000000000000000000000000000000000000000000000000001"

// imageRuntime is a runtime whose init is static, so that it can start
// image sandboxes.
func imageRuntime(tb testing.TB, cfg Config) *Runtime {
	tb.Helper()
	cfg.InitBinary = imagetest.StaticInit(tb)
	return newRuntime(tb, cfg)
}

// view is what a parametrised suite runs its sandboxes on: the host's
// view, or the Debian test image (bash, python3 and coreutils, as the
// suites' scripts need).
type view struct {
	name  string
	image func(testing.TB) *RootImage // nil: the host's view
}

// viewsEnv, set to "host", runs the parametrised suites in the host's view
// only: the cgroup-v2 guest (vmtest/) does, whose image has no registry,
// mmdebstrap or Go toolchain; image sandboxes are proved on the host.
const viewsEnv = "AGENTSANDBOX_TEST_VIEWS"

// views are the views every parametrised suite runs in.
func views() []view {
	if os.Getenv(viewsEnv) == "host" {
		return []view{{name: "host"}}
	}
	return []view{{name: "host"}, {name: "image", image: debianImage}}
}

// runtime is a runtime that can start the view's sandboxes.
func (v view) runtime(tb testing.TB, cfg Config) *Runtime {
	tb.Helper()
	if v.image != nil {
		return imageRuntime(tb, cfg)
	}
	return newRuntime(tb, cfg)
}

// options are o on the view.
func (v view) options(tb testing.TB, o Options) Options {
	tb.Helper()
	if v.image != nil {
		o.Image = v.image(tb)
	}
	return o
}

// root is the host directory the view's /usr is read from.
func (v view) root(tb testing.TB) string {
	tb.Helper()
	if v.image == nil {
		return "/"
	}
	return v.image(tb).Layers[0]
}

// topLevel lists the image's top-level entries.
func (v view) topLevel(tb testing.TB) []string {
	tb.Helper()
	entries, err := os.ReadDir(v.image(tb).Layers[0])
	if err != nil {
		tb.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// digest is treeDigest of the image's /usr/bin, /etc and top level.
func (v view) digest(tb testing.TB) string {
	tb.Helper()
	l := v.image(tb).Layers[0]
	return treeDigest(tb, filepath.Join(l, "etc")) + treeDigest(tb, filepath.Join(l, "usr/bin")) + strings.Join(v.topLevel(tb), ",")
}
