package image

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sys/unix"
	"openvibe.network/agentsandbox/egress"
	"openvibe.network/agentsandbox/image/registrytest"
	"openvibe.network/agentsandbox/internal/metrics"
	"openvibe.network/agentsandbox/internal/testenv"
)

// testTimeout bounds every pull of a test.
const testTimeout = 2 * time.Minute

// newStore opens a store in a temporary directory, closed at the end.
func newStore(tb testing.TB, cfg Config) *Store {
	tb.Helper()
	testenv.RequireRoot(tb) // whiteouts are devices, opaque markers trusted.* attributes
	if cfg.Dir == "" {
		cfg.Dir = filepath.Join(tb.TempDir(), "images")
	}
	s, err := Open(cfg)
	if err != nil {
		tb.Fatalf("Open: %v", err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Errorf("Close: %v", err)
		}
	})
	return s
}

// private lists r as a private registry.
func private(tb testing.TB, r *registrytest.Registry) []Registry {
	tb.Helper()
	reg, err := ParseRegistry(r.Name, true)
	if err != nil {
		tb.Fatal(err)
	}
	return []Registry{reg}
}

func acquire(tb testing.TB, s *Store, ref string) *Image {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	im, err := s.Acquire(ctx, ref)
	if err != nil {
		tb.Fatalf("Acquire %s: %v", ref, err)
	}
	return im
}

// counter reads one series of reg's text output ("" when absent).
func counter(reg *metrics.Registry, series string) string {
	var buf bytes.Buffer
	reg.WriteText(&buf)
	for _, line := range strings.Split(buf.String(), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			return v
		}
	}
	return ""
}

// layerDirs lists the store's layers/ and tmp/.
func layerDirs(tb testing.TB, s *Store) (layers, tmp []string) {
	tb.Helper()
	for dir, out := range map[string]*[]string{"layers": &layers, "tmp": &tmp} {
		entries, err := os.ReadDir(s.path(dir))
		if err != nil {
			tb.Fatal(err)
		}
		for _, e := range entries {
			*out = append(*out, e.Name())
		}
	}
	return layers, tmp
}

// TestPullAcquireRelease: an image pulled from a real registry is held as
// its unpacked layers with its configuration; a second acquire is a cache
// hit; it survives a restart of the store.
func TestPullAcquireRelease(t *testing.T) {
	reg := registrytest.Start(t, registrytest.Options{})
	digest := reg.Push(t, "tiny/busybox:1", registrytest.Busybox(t, v1.Config{Env: []string{"PATH=/bin", "A=1"}, WorkingDir: "/home/app", User: "app"}))
	m := metrics.NewRegistry()
	dir := filepath.Join(t.TempDir(), "images")
	s := newStore(t, Config{Dir: dir, Registries: private(t, reg), Metrics: m})
	im := acquire(t, s, reg.Ref("tiny/busybox:1"))
	if im.Digest != digest.String() || len(im.Layers) != 1 {
		t.Fatalf("image %s with %d layers, want %s and 1", im.Digest, len(im.Layers), digest)
	}
	want := ImageConfig{Env: []string{"PATH=/bin", "A=1"}, WorkingDir: "/home/app", User: "app", UID: 1000, GID: 1000}
	if !equalConfig(im.Config, want) {
		t.Errorf("config %+v, want %+v", im.Config, want)
	}
	if fi, err := os.Lstat(filepath.Join(im.Layers[0], "bin/busybox")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Fatalf("bin/busybox: %v, %v", fi, err)
	}
	again := acquire(t, s, reg.Ref("tiny/busybox:1"))
	byDigest := acquire(t, s, reg.Name+"/other/name@"+digest.String())
	if got := counter(m, MetricCacheHits); got != "2" {
		t.Errorf("cache hits %q, want 2", got)
	}
	if got := counter(m, MetricPulls+`{result="ok"}`); got != "1" {
		t.Errorf("pulls %q, want 1", got)
	}
	if l := s.List(); len(l) != 1 || l[0].InUse != 3 || l[0].Size <= 0 {
		t.Fatalf("List = %+v", l)
	}
	im.Release()
	im.Release() // a second release changes nothing
	again.Release()
	byDigest.Release()
	if l := s.List(); l[0].InUse != 0 {
		t.Fatalf("in use %d after every release", l[0].InUse)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(Config{Dir: dir, Registries: private(t, reg)})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if l := s2.List(); len(l) != 1 || l[0].Digest != digest.String() {
		t.Fatalf("after a restart: %+v", l)
	}
	im = acquire(t, s2, reg.Ref("tiny/busybox:1"))
	im.Release()
}

func equalConfig(a, b ImageConfig) bool {
	return slices.Equal(a.Env, b.Env) && a.WorkingDir == b.WorkingDir && a.User == b.User && a.UID == b.UID && a.GID == b.GID
}

// TestPullErrors: each way a pull fails is its own error, says what to
// fix, is bounded in time, and leaves nothing of itself in the store.
func TestPullErrors(t *testing.T) {
	reg := registrytest.Start(t, registrytest.Options{})
	authed := registrytest.Start(t, registrytest.Options{User: "worker", Password: "s3cret-pw"})
	busybox := registrytest.Busybox(t, v1.Config{})
	reg.Push(t, "tiny/busybox:1", busybox)
	authed.Push(t, "tiny/busybox:1", busybox)
	other := registrytest.ImageFor(t, "linux", "s390x", v1.Config{}, registrytest.Layer(t, registrytest.Tar(t, registrytest.File("f", "x", 0o644))))
	reg.Push(t, "tiny/s390x:1", other)
	reg.PushIndex(t, "tiny/index:1", registrytest.Index(t, other))
	lying := registrytest.RawLayer(registrytest.Gzip(t, registrytest.Tar(t, registrytest.File("f", "x", 0o644))),
		v1.Hash{Algorithm: "sha256", Hex: strings.Repeat("ab", 32)}, "application/vnd.docker.image.rootfs.diff.tar.gzip")
	reg.Push(t, "bad/diffid:1", registrytest.Image(t, v1.Config{}, lying))
	reg.Push(t, "bad/dotdot:1", registrytest.Image(t, v1.Config{}, registrytest.Layer(t, registrytest.Tar(t, registrytest.File("../escape", "x", 0o644)))))
	reg.Push(t, "bad/bomb:1", registrytest.Image(t, v1.Config{}, registrytest.Layer(t, registrytest.Tar(t,
		registrytest.File("zeros", strings.Repeat("\x00", 8<<20), 0o644)))))
	reg.Push(t, "bad/user:1", registrytest.Image(t, v1.Config{User: "nobody-here"}, registrytest.Layer(t, registrytest.Tar(t, registrytest.File("f", "x", 0o644)))))
	silent := silentRegistry(t)
	authFile := []byte(fmt.Sprintf(`{"auths":{%q:{"auth":%q}}}`, "http://"+authed.Name, base64.StdEncoding.EncodeToString([]byte("worker:s3cret-pw"))))
	goodAuth, err := ParseAuth(authFile)
	if err != nil {
		t.Fatal(err)
	}
	wrongAuth, _ := ParseAuth([]byte(fmt.Sprintf(`{"auths":{%q:{"username":"worker","password":"wrong"}}}`, authed.Name)))
	regs := slices.Concat(private(t, reg), private(t, authed), []Registry{{Host: silent, Private: true}})
	cases := []struct {
		name    string
		ref     string
		auth    Auth
		cap     int64
		wantErr error
		wantMsg string
	}{
		{"NotListed", "elsewhere.example/team/py:3", Auth{}, 0, ErrNotAllowed, reg.Name},
		{"OutsidePrefix", reg.Name + "/tiny/busybox:1", Auth{}, 0, ErrNotAllowed, "not in"},
		{"BadRef", reg.Name + "/UPPER:1", Auth{}, 0, ErrBadRef, ""},
		{"MissingTag", reg.Ref("tiny/busybox:nope"), Auth{}, 0, ErrNotFound, ""},
		{"MissingRepo", reg.Ref("tiny/none:1"), Auth{}, 0, ErrNotFound, ""},
		{"NoCredentials", authed.Ref("tiny/busybox:1"), Auth{}, 0, ErrUnauthorized, "--image-auth-file"},
		{"WrongCredentials", authed.Ref("tiny/busybox:1"), wrongAuth, 0, ErrUnauthorized, ""},
		{"Silent", silent + "/tiny/busybox:1", Auth{}, 0, ErrUnavailable, "did not answer"},
		{"WrongPlatform", reg.Ref("tiny/s390x:1"), Auth{}, 0, ErrPlatform, "s390x"},
		{"IndexWithoutPlatform", reg.Ref("tiny/index:1"), Auth{}, 0, ErrPlatform, "linux/s390x"},
		{"LyingDiffID", reg.Ref("bad/diffid:1"), Auth{}, 0, ErrBadImage, "diff ID"},
		{"UnsafeLayer", reg.Ref("bad/dotdot:1"), Auth{}, 0, ErrBadImage, `".." component`},
		{"Bomb", reg.Ref("bad/bomb:1"), Auth{}, 4 << 20, ErrCacheFull, ""},
		{"UnknownUser", reg.Ref("bad/user:1"), Auth{}, 0, ErrBadImage, "nobody-here"},
		{"WithCredentials", authed.Ref("tiny/busybox:1"), goodAuth, 0, nil, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			regs := regs
			if c.name == "OutsidePrefix" {
				regs = []Registry{{Host: reg.Name, Prefix: "team", Private: true}}
			}
			s := newStore(t, Config{Registries: regs, Auth: c.auth, CacheBytes: c.cap, StallTimeout: 500 * time.Millisecond, PullTimeout: 20 * time.Second})
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			start := time.Now()
			info, err := s.Pull(ctx, c.ref)
			if c.wantErr == nil {
				if err != nil || info.Digest == "" {
					t.Fatalf("Pull = %+v, %v", info, err)
				}
				return
			}
			if !errors.Is(err, c.wantErr) || !strings.Contains(err.Error(), c.wantMsg) {
				t.Fatalf("Pull = %v, want %v saying %q", err, c.wantErr, c.wantMsg)
			}
			if strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "wrong") {
				t.Errorf("the error quotes a password: %v", err)
			}
			if d := time.Since(start); d > 15*time.Second {
				t.Errorf("the pull failed after %v", d)
			}
			layers, tmp := layerDirs(t, s)
			if len(layers) > 0 || len(tmp) > 0 || len(s.List()) > 0 || s.Used() != 0 {
				t.Errorf("half-cached: layers %v, tmp %v, images %v, %d bytes", layers, tmp, s.List(), s.Used())
			}
		})
	}
}

// silentRegistry is a listener that accepts connections and never answers;
// it returns its address.
func silentRegistry(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	tb.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String()
}

// TestIndexResolvesPlatform: a multi-platform index gives this host's
// variant.
func TestIndexResolvesPlatform(t *testing.T) {
	reg := registrytest.Start(t, registrytest.Options{})
	mine := registrytest.Busybox(t, v1.Config{})
	other := registrytest.ImageFor(t, "linux", "s390x", v1.Config{}, registrytest.Layer(t, registrytest.Tar(t, registrytest.File("f", "x", 0o644))))
	reg.PushIndex(t, "multi/arch:1", registrytest.Index(t, other, mine))
	want, _ := mine.Digest()
	s := newStore(t, Config{Registries: private(t, reg)})
	im := acquire(t, s, reg.Ref("multi/arch:1"))
	defer im.Release()
	if im.Digest != want.String() {
		t.Fatalf("digest %s, want this platform's %s", im.Digest, want)
	}
}

// TestConcurrentAcquiresOnePull: many creates of one uncached image wait
// for one pull and one download of each layer.
func TestConcurrentAcquiresOnePull(t *testing.T) {
	reg := registrytest.Start(t, registrytest.Options{})
	img := registrytest.Busybox(t, v1.Config{})
	reg.Push(t, "tiny/busybox:1", img)
	size, _ := mustLayer(t, img).Size()
	m := metrics.NewRegistry()
	s := newStore(t, Config{Registries: private(t, reg), Metrics: m})
	const n = 50
	var wg sync.WaitGroup
	var failed atomic.Int32
	for range n {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			im, err := s.Acquire(ctx, reg.Ref("tiny/busybox:1"))
			if err != nil {
				failed.Add(1)
				t.Error(err)
				return
			}
			im.Release()
		})
	}
	wg.Wait()
	if failed.Load() > 0 {
		t.Fatalf("%d of %d acquires failed", failed.Load(), n)
	}
	if got := counter(m, MetricPulls+`{result="ok"}`); got != "1" {
		t.Errorf("pulls %q, want 1", got)
	}
	if got, _ := strconv.ParseFloat(counter(m, MetricPullBytes), 64); got != float64(size) {
		t.Errorf("downloaded %v bytes, want one layer's %d", got, size)
	}
}

func mustLayer(tb testing.TB, img v1.Image) v1.Layer {
	tb.Helper()
	ls, err := img.Layers()
	if err != nil || len(ls) == 0 {
		tb.Fatalf("layers: %v", err)
	}
	return ls[0]
}

// TestEviction: past the cap the least recently used image no sandbox uses
// goes, with the layers only it had; an image in use never goes, and a
// pull that cannot fit beside the images in use fails.
func TestEviction(t *testing.T) {
	reg := registrytest.Start(t, registrytest.Options{})
	mk := func(name string) string {
		reg.Push(t, "e/"+name+":1", registrytest.Image(t, v1.Config{}, registrytest.Layer(t, registrytest.Tar(t,
			registrytest.File(name, strings.Repeat(name, 1<<20), 0o644)))))
		return reg.Ref("e/" + name + ":1")
	}
	a, b, c := mk("a"), mk("b"), mk("c")
	m := metrics.NewRegistry()
	clock := time.Unix(1800000000, 0)
	s := newStore(t, Config{Registries: private(t, reg), CacheBytes: 2*(1<<20) + 64<<10, Metrics: m,
		Now: func() time.Time { clock = clock.Add(time.Second); return clock }})
	acquire(t, s, a).Release()
	acquire(t, s, b).Release()
	acquire(t, s, a).Release() // a is now the more recent
	acquire(t, s, c).Release() // evicts b
	refs := func() []string {
		var out []string
		for _, in := range s.List() {
			out = append(out, in.Refs...)
		}
		slices.Sort(out)
		return out
	}
	if got := refs(); !slices.Equal(got, []string{a, c}) {
		t.Fatalf("held %v, want %v", got, []string{a, c})
	}
	if got := counter(m, MetricEvictions); got != "1" {
		t.Errorf("evictions %q, want 1", got)
	}
	if layers, _ := layerDirs(t, s); len(layers) != 2 {
		t.Errorf("layer directories %v, want 2", layers)
	}
	held1, held2 := acquire(t, s, a), acquire(t, s, c)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if _, err := s.Acquire(ctx, b); !errors.Is(err, ErrCacheFull) {
		t.Fatalf("Acquire past the cap with both in use = %v, want ErrCacheFull", err)
	}
	if _, err := s.Delete(a); !errors.Is(err, ErrInUse) {
		t.Fatalf("Delete of an image in use = %v", err)
	}
	held1.Release()
	held2.Release()
	if _, err := s.Delete(a); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Delete(a); !errors.Is(err, ErrUnknown) {
		t.Fatalf("second Delete = %v", err)
	}
	if got := refs(); !slices.Equal(got, []string{c}) {
		t.Fatalf("after Delete: %v", got)
	}
}

// TestSharedLayerUnpackedOnce: two images on one base layer hold it once.
func TestSharedLayerUnpackedOnce(t *testing.T) {
	reg := registrytest.Start(t, registrytest.Options{})
	base := registrytest.Layer(t, registrytest.Tar(t, registrytest.BusyboxEntries(t)...))
	for i, f := range []string{"one", "two"} {
		reg.Push(t, fmt.Sprintf("s/%d:1", i), registrytest.Image(t, v1.Config{}, base,
			registrytest.Layer(t, registrytest.Tar(t, registrytest.File(f, f, 0o644)))))
	}
	s := newStore(t, Config{Registries: private(t, reg)})
	one, two := acquire(t, s, reg.Ref("s/0:1")), acquire(t, s, reg.Ref("s/1:1"))
	defer one.Release()
	defer two.Release()
	if one.Layers[0] != two.Layers[0] || one.Layers[1] == two.Layers[1] {
		t.Fatalf("layers %v and %v", one.Layers, two.Layers)
	}
	if layers, _ := layerDirs(t, s); len(layers) != 3 {
		t.Fatalf("layer directories %v, want 3", layers)
	}
}

// TestPublicRegistryThroughGuard: a registry that is not private is reached
// only at addresses the egress guard finds public (served here by a
// loopback TLS registry in place of the public address); one whose name
// resolves to a private address, or a loopback literal not listed as
// private, is refused before any connection.
func TestPublicRegistryThroughGuard(t *testing.T) {
	reg := registrytest.Start(t, registrytest.Options{TLSName: "registry.test"})
	reg.Push(t, "team/busybox:1", registrytest.Busybox(t, v1.Config{}))
	_, port, _ := net.SplitHostPort(reg.Addr)
	public := netip.MustParseAddr("93.184.215.14")
	var dialed []netip.AddrPort
	var mu sync.Mutex
	connect := func(ctx context.Context, ap netip.AddrPort) (net.Conn, error) {
		mu.Lock()
		dialed = append(dialed, ap)
		mu.Unlock()
		var d net.Dialer
		return d.DialContext(ctx, "tcp", reg.Addr) // the "public" registry is on loopback
	}
	pub, err := ParseRegistry(reg.Name, false)
	if err != nil {
		t.Fatal(err)
	}
	loop, _ := ParseRegistry("127.0.0.1:"+port, false)
	for _, c := range []struct {
		name    string
		answer  netip.Addr
		ref     string
		wantErr error
	}{
		{"Public", public, reg.Ref("team/busybox:1"), nil},
		{"ResolvesPrivate", netip.MustParseAddr("10.1.2.3"), reg.Ref("team/busybox:1"), ErrRefused},
		{"ResolvesMetadata", netip.MustParseAddr("169.254.169.254"), reg.Ref("team/busybox:1"), ErrRefused},
		{"LoopbackNotPrivate", public, "127.0.0.1:" + port + "/team/busybox:1", ErrRefused},
	} {
		t.Run(c.name, func(t *testing.T) {
			dialed = nil
			guard := egress.NewGuard(egress.GuardConfig{Ports: Ports([]Registry{pub, loop}), Resolver: fixedResolver{"registry.test": c.answer}})
			s := newStore(t, Config{Registries: []Registry{pub, loop}, Guard: guard, Connect: connect, RootCAs: reg.CertPool,
				StallTimeout: 5 * time.Second})
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			_, err := s.Pull(ctx, c.ref)
			if c.wantErr == nil {
				if err != nil {
					t.Fatal(err)
				}
				for _, ap := range dialed {
					if ap.Addr() != public {
						t.Errorf("connected to %v, not the checked address", ap)
					}
				}
				return
			}
			if !errors.Is(err, c.wantErr) {
				t.Fatalf("Pull = %v, want %v", err, c.wantErr)
			}
			if len(dialed) > 0 {
				t.Errorf("connected to %v although the guard refused", dialed)
			}
		})
	}
}

// fixedResolver answers names from a table.
type fixedResolver map[string]netip.Addr

func (f fixedResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := f[host]; ok {
		return []netip.Addr{a}, nil
	}
	return nil, fmt.Errorf("no such host %s", host)
}

// TestDebianImage: the Debian test image (about 200 MB unpacked, built with
// mmdebstrap) pulls and unpacks whole: programs, the local wheel, links,
// and nothing setuid.
func TestDebianImage(t *testing.T) {
	if testing.Short() {
		t.Skip("pulls a 200 MB image")
	}
	reg := registrytest.Start(t, registrytest.Options{})
	reg.Push(t, "debian/python:1", registrytest.Debian(t))
	s := newStore(t, Config{Registries: private(t, reg)})
	im := acquire(t, s, reg.Ref("debian/python:1"))
	defer im.Release()
	root := im.Layers[0]
	for _, p := range []string{"usr/bin/python3", "usr/bin/pip3", "opt/wheels/agentsandbox_hello-1.0-py3-none-any.whl", "opt/debs/agentsandbox-hello_1.0_all.deb", "etc/passwd"} {
		if _, err := os.Stat(filepath.Join(root, p)); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
	if fi, err := os.Lstat(filepath.Join(root, "bin")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("/bin is not the merged-/usr link: %v, %v", fi, err)
	}
	if fi, err := os.Stat(filepath.Join(root, "usr/bin/passwd")); err == nil && fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
		t.Errorf("passwd kept its setuid bit: %v", fi.Mode())
	}
	if im.Config.UID != 0 || im.Size < 100<<20 {
		t.Errorf("uid %d, size %d", im.Config.UID, im.Size)
	}
}

// TestPullDiskFull: a store whose disk fills up during a pull fails it
// with ErrNoSpace and keeps nothing of it (the store here is on a 4 MiB
// tmpfs, its cap far above that).
func TestPullDiskFull(t *testing.T) {
	testenv.RequireRoot(t)
	reg := registrytest.Start(t, registrytest.Options{})
	reg.Push(t, "big/zeros:1", registrytest.Image(t, v1.Config{}, registrytest.Layer(t, registrytest.Tar(t,
		registrytest.File("zeros", strings.Repeat("\x00", 8<<20), 0o644)))))
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=4m"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	s := newStore(t, Config{Dir: filepath.Join(dir, "images"), Registries: private(t, reg)})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if _, err := s.Pull(ctx, reg.Ref("big/zeros:1")); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("Pull = %v, want ErrNoSpace", err)
	}
	layers, tmp := layerDirs(t, s)
	if len(layers) > 0 || len(tmp) > 0 || len(s.List()) > 0 || s.Used() != 0 {
		t.Errorf("half-cached: layers %v, tmp %v, images %v, %d bytes", layers, tmp, s.List(), s.Used())
	}
}
