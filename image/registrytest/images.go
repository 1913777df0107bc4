package registrytest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"openvibe.network/agentsandbox/internal/testenv"
)

func newGzip(w io.Writer) *gzip.Writer { return gzip.NewWriter(w) }

// Entry is one member of a layer built by Tar.
type Entry struct {
	Header tar.Header
	Data   string
}

// File, Dir, Symlink and Hardlink are entries of the usual kinds.
func File(name, data string, mode int64) Entry {
	return Entry{tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(data))}, data}
}

// Dir is a directory entry.
func Dir(name string, mode int64) Entry {
	return Entry{Header: tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: mode}}
}

// Symlink is a symbolic link entry.
func Symlink(name, target string) Entry {
	return Entry{Header: tar.Header{Typeflag: tar.TypeSymlink, Name: name, Linkname: target, Mode: 0o777}}
}

// Tar is the tar stream of entries.
func Tar(tb testing.TB, entries ...Entry) []byte {
	tb.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := e.Header
		if h.ModTime.IsZero() {
			h.ModTime = time.Unix(1700000000, 0)
		}
		if err := tw.WriteHeader(&h); err != nil {
			tb.Fatalf("write header %q: %v", h.Name, err)
		}
		if _, err := io.WriteString(tw, e.Data); err != nil {
			tb.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

// Layer is a gzip layer of the tar stream data, byte for byte as given
// (trailing data, bombs and all): its diff ID is data's digest.
func Layer(tb testing.TB, data []byte) v1.Layer {
	tb.Helper()
	sum := sha256.Sum256(data)
	return RawLayer(Gzip(tb, data), v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(sum[:])}, types.DockerLayer)
}

// RawLayer is a layer whose blob is compressed exactly and whose
// configuration claims diffID (a lie, for the tests that want one).
func RawLayer(compressed []byte, diffID v1.Hash, mt types.MediaType) v1.Layer {
	sum := sha256.Sum256(compressed)
	return &rawLayer{blob: compressed, diffID: diffID, mt: mt,
		digest: v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(sum[:])}}
}

type rawLayer struct {
	blob           []byte
	digest, diffID v1.Hash
	mt             types.MediaType
}

func (l *rawLayer) Digest() (v1.Hash, error)            { return l.digest, nil }
func (l *rawLayer) DiffID() (v1.Hash, error)            { return l.diffID, nil }
func (l *rawLayer) Size() (int64, error)                { return int64(len(l.blob)), nil }
func (l *rawLayer) MediaType() (types.MediaType, error) { return l.mt, nil }
func (l *rawLayer) Compressed() (io.ReadCloser, error) {
	return io.NopCloser(bytes.NewReader(l.blob)), nil
}
func (l *rawLayer) Uncompressed() (io.ReadCloser, error) {
	return gzip.NewReader(bytes.NewReader(l.blob))
}

// Image is an image of layers (lowest first) with cfg as its configuration
// (for linux on this program's architecture).
func Image(tb testing.TB, cfg v1.Config, layers ...v1.Layer) v1.Image {
	tb.Helper()
	return ImageFor(tb, "linux", hostArch(), cfg, layers...)
}

// ImageFor is Image for another platform.
func ImageFor(tb testing.TB, os, arch string, cfg v1.Config, layers ...v1.Layer) v1.Image {
	tb.Helper()
	img, err := mutate.AppendLayers(empty.Image, layers...)
	if err != nil {
		tb.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		tb.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Config = os, arch, cfg
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		tb.Fatal(err)
	}
	return img
}

// Index is an image index of imgs, each with its configuration's
// platform.
func Index(tb testing.TB, imgs ...v1.Image) v1.ImageIndex {
	tb.Helper()
	var adds []mutate.IndexAddendum
	for _, img := range imgs {
		cf, err := img.ConfigFile()
		if err != nil {
			tb.Fatal(err)
		}
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{
			Platform: &v1.Platform{OS: cf.OS, Architecture: cf.Architecture}}})
	}
	return mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex), adds...)
}

// busyboxApplets are the commands the busybox image links.
var busyboxApplets = []string{
	"sh", "ash", "cat", "echo", "id", "env", "ls", "mkdir", "rm", "rmdir", "touch", "sleep", "grep", "head", "tail",
	"wc", "tr", "cut", "dd", "true", "false", "test", "[", "printf", "stat", "readlink", "basename", "dirname",
	"chmod", "cp", "mv", "ln", "find", "sort", "uniq", "awk", "sed", "nc", "ps", "kill", "whoami", "hostname",
	"unshare", "mount", "umount", "uname", "seq", "xargs", "sha256sum", "du", "df", "pwd", "expr", "timeout",
}

// BusyboxEntries are the entries of a tiny root: busybox-static at
// /bin/busybox with its applets as links, /bin/sh among them, an /etc with
// root and an unprivileged user (app, 1000:1000), /tmp and /root.
func BusyboxEntries(tb testing.TB) []Entry {
	tb.Helper()
	bin := testenv.RequireBinary(tb, "busybox", "apt-get install busybox-static (scripts/install-deps.sh)")
	data, err := os.ReadFile(bin)
	if err != nil {
		tb.Fatal(err)
	}
	if f, err := elf.Open(bin); err == nil {
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				testenv.Missing(tb, bin+" is not static: apt-get install busybox-static")
			}
		}
		f.Close()
	}
	entries := []Entry{
		Dir("bin/", 0o755), Dir("etc/", 0o755), Dir("tmp/", 0o1777), Dir("root/", 0o700), Dir("home/app/", 0o755),
		File("bin/busybox", string(data), 0o755),
		File("etc/passwd", "root:x:0:0:root:/root:/bin/sh\napp:x:1000:1000:app:/home/app:/bin/sh\n", 0o644),
		File("etc/group", "root:x:0:\napp:x:1000:\n", 0o644),
	}
	entries[4].Header.Uid, entries[4].Header.Gid = 1000, 1000
	for _, a := range busyboxApplets {
		entries = append(entries, Symlink("bin/"+a, "busybox"))
	}
	return entries
}

// Busybox is the busybox image, running as root, with cfg's Env and
// WorkingDir.
func Busybox(tb testing.TB, cfg v1.Config) v1.Image {
	tb.Helper()
	if len(cfg.Env) == 0 {
		cfg.Env = []string{"PATH=/bin"}
	}
	return Image(tb, cfg, Layer(tb, Tar(tb, BusyboxEntries(tb)...)))
}

// hostArch is the architecture images are built for: this program's.
func hostArch() string { return runtime.GOARCH }

// DebianLayer is the Debian test image's root as a gzip layer (python3,
// pip, a local wheel and .deb: see scripts/build-test-image.sh), built once
// and cached. It skips, or fails in CI, when it cannot be built.
func DebianLayer(tb testing.TB) v1.Layer {
	tb.Helper()
	_, file, _, _ := runtime.Caller(0)
	script := filepath.Join(filepath.Dir(file), "..", "..", "scripts", "build-test-image.sh")
	var stderr strings.Builder
	cmd := exec.Command(script)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		testenv.Missing(tb, fmt.Sprintf("the Debian test image could not be built (%v): %s", err, lastLines(stderr.String(), 5)))
	}
	path := strings.TrimSpace(string(out))
	diff, err := os.ReadFile(strings.TrimSuffix(path, ".tar.gz") + ".diffid")
	if err != nil {
		tb.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	size, err := io.Copy(h, f)
	if err != nil {
		tb.Fatal(err)
	}
	return &fileLayer{path: path, size: size, digest: v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(h.Sum(nil))},
		diffID: v1.Hash{Algorithm: "sha256", Hex: strings.TrimSpace(string(diff))}}
}

// fileLayer is a gzip layer read from a file.
type fileLayer struct {
	path           string
	size           int64
	digest, diffID v1.Hash
}

func (l *fileLayer) Digest() (v1.Hash, error)            { return l.digest, nil }
func (l *fileLayer) DiffID() (v1.Hash, error)            { return l.diffID, nil }
func (l *fileLayer) Size() (int64, error)                { return l.size, nil }
func (l *fileLayer) MediaType() (types.MediaType, error) { return types.DockerLayer, nil }
func (l *fileLayer) Compressed() (io.ReadCloser, error)  { return os.Open(l.path) }
func (l *fileLayer) Uncompressed() (io.ReadCloser, error) {
	f, err := os.Open(l.path)
	if err != nil {
		return nil, err
	}
	z, err := gzip.NewReader(f)
	if err != nil {
		f.Close()
		return nil, err
	}
	return struct {
		io.Reader
		io.Closer
	}{z, f}, nil
}

// Debian is the Debian test image: its root as one layer, running as
// root.
func Debian(tb testing.TB) v1.Image {
	tb.Helper()
	return Image(tb, v1.Config{Env: []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"}}, DebianLayer(tb))
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
