package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"openvibe.network/agentsandbox/egress"
	"openvibe.network/agentsandbox/image"
	"openvibe.network/agentsandbox/internal/buildinfo"
	"openvibe.network/agentsandbox/internal/metrics"
	"openvibe.network/agentsandbox/internal/runcmd"
	"openvibe.network/agentsandbox/sandbox"
	"openvibe.network/agentsandbox/worker/httpapi"
)

// imageFlags are the image store's flags (serve, selftest, checkin).
type imageFlags struct {
	registries, private, pools listFlag
	authFile, selfTestImage    string
	dir                        string
	cacheMB                    int
}

func (f *imageFlags) register(fs *flag.FlagSet) {
	fs.Var(&f.registries, "image-registry", "`HOST[:PORT][/PREFIX]` sandboxes' images may come from, over TLS at public addresses only (repeatable; default: none, images off)")
	fs.Var(&f.private, "image-registry-insecure", "`HOST[:PORT][/PREFIX]` of a private registry reached over plain HTTP at whatever address it has, loopback and LAN included (repeatable)")
	fs.StringVar(&f.authFile, "image-auth-file", "", "docker-style config `FILE` (its \"auths\") with the worker's registry credentials")
	fs.StringVar(&f.dir, "image-dir", "", "`DIR` of the image store (default: STATE_DIR/images; give one on disk when the state dir is a tmpfs, as /run is)")
	fs.IntVar(&f.cacheMB, "image-cache-mb", int(image.DefaultCacheBytes>>20), "most MB the unpacked images take (least recently used images no sandbox uses are evicted)")
	fs.Var(&f.pools, "pool-image", "`REF=N`: keep N sandboxes of image REF started ahead (repeatable; counted in the capacity with --pool)")
	fs.StringVar(&f.selfTestImage, "selftest-image", "", "`REF` of the image the self-test proves image sandboxes in (it needs bash; default: the first --pool-image)")
}

// imageConfig is what the stack needs of the image flags.
type imageConfig struct {
	registries []image.Registry
	auth       image.Auth
	dir        string // "": STATE_DIR/images
	cacheBytes int64
	pools      []poolImage
	selfTest   string
}

type poolImage struct {
	ref string
	n   int
}

// config checks the flags (and the config file's fields); errors name the
// flag.
func (f *imageFlags) config(fc fileConfig) (imageConfig, error) {
	var c imageConfig
	for _, l := range []struct {
		flag    string
		values  []string
		private bool
	}{{"--image-registry", append(fc.ImageRegistries, f.registries...), false}, {"--image-registry-insecure", append(fc.ImageRegistriesInsecure, f.private...), true}} {
		for _, v := range l.values {
			r, err := image.ParseRegistry(v, l.private)
			if err != nil {
				return c, fmt.Errorf("%s: %w", l.flag, err)
			}
			c.registries = append(c.registries, r)
		}
	}
	if file := cmp.Or(f.authFile, fc.ImageAuthFile); file != "" {
		data, err := os.ReadFile(file)
		if err != nil {
			return c, fmt.Errorf("--image-auth-file: %w", err)
		}
		if c.auth, err = image.ParseAuth(data); err != nil {
			return c, fmt.Errorf("--image-auth-file %s: %w", file, err)
		}
	}
	mb := f.cacheMB
	if fc.ImageCacheMB > 0 && mb == int(image.DefaultCacheBytes>>20) {
		mb = fc.ImageCacheMB
	}
	if mb < 64 {
		return c, fmt.Errorf("--image-cache-mb is %d; give at least 64", mb)
	}
	c.cacheBytes = int64(mb) << 20
	for _, p := range append(fc.PoolImages, f.pools...) {
		ref, n, ok := strings.Cut(p, "=")
		count, err := strconv.Atoi(n)
		if !ok || ref == "" || err != nil || count < 1 {
			return c, fmt.Errorf("--pool-image %q: give REF=N with N at least 1", p)
		}
		c.pools = append(c.pools, poolImage{ref: ref, n: count})
	}
	c.selfTest = cmp.Or(f.selfTestImage, fc.SelfTestImage)
	c.dir = cmp.Or(f.dir, fc.ImageDir)
	if c.selfTest == "" && len(c.pools) > 0 {
		c.selfTest = c.pools[0].ref
	}
	if len(c.registries) == 0 && (len(c.pools) > 0 || c.selfTest != "") {
		return c, errors.New("--pool-image and --selftest-image need a registry: give --image-registry or --image-registry-insecure")
	}
	return c, nil
}

// poolTotal is how many sandboxes the image pools keep.
func (c imageConfig) poolTotal() int {
	n := 0
	for _, p := range c.pools {
		n += p.n
	}
	return n
}

// openImages opens the image store under stateDir when images are on (nil
// otherwise): its own guard (the egress guard's rules, with the
// registries' ports) checks every registry that is not private.
func openImages(c imageConfig, stateDir string, sc stackConfig, host *egress.HostAddrs, reg *metrics.Registry, log *slog.Logger) (*image.Store, error) {
	if len(c.registries) == 0 {
		return nil, nil
	}
	resolver, err := egressResolver(sc.egressResolver)
	if err != nil {
		return nil, err
	}
	guard := egress.NewGuard(egress.GuardConfig{Ports: image.Ports(c.registries), Resolver: resolver, Self: sc.listeners, Host: host})
	s, err := image.Open(image.Config{Dir: cmp.Or(c.dir, filepath.Join(stateDir, "images")), Registries: c.registries, Auth: c.auth,
		CacheBytes: c.cacheBytes, Guard: guard, Resolver: resolver, Metrics: reg, Logger: log,
		UserAgent: "codes-sandbox/" + buildinfo.Read().Version})
	if err != nil {
		return nil, err
	}
	for _, r := range c.registries {
		if r.Private {
			log.Warn("image registry listed as private: reached over plain HTTP at whatever address it has", "registry", r.String())
		}
	}
	log.Info("images on", "registries", len(c.registries), "cache_mb", c.cacheBytes>>20, "pools", len(c.pools), "selftest_image", c.selfTest)
	return s, nil
}

// acquirer holds ref in s for one sandbox.
func acquirer(s *image.Store, ref string) func(ctx context.Context) (*sandbox.RootImage, error) {
	return func(ctx context.Context) (*sandbox.RootImage, error) {
		im, err := s.Acquire(ctx, ref)
		if err != nil {
			return nil, err
		}
		return httpapi.RootImage(im), nil
	}
}

// poolImages are the runtime's image pools.
func (c imageConfig) poolImages(s *image.Store) []sandbox.PoolImage {
	var out []sandbox.PoolImage
	for _, p := range c.pools {
		out = append(out, sandbox.PoolImage{Ref: p.ref, N: p.n, Acquire: acquirer(s, p.ref)})
	}
	return out
}

// runImages is `run --image`'s image store: its own, under the state dir,
// reached as serve's is.
type runImages struct {
	flags    imageFlags
	stateDir string
}

// runCmd is `codes-sandbox run`, with images.
func runCmd(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return runcmd.RunWith(ctx, args, stdin, stdout, stderr, &runImages{})
}

func (r *runImages) Register(fs *flag.FlagSet) {
	fs.Var(&r.flags.registries, "image-registry", "with --image: `HOST[:PORT][/PREFIX]` images may come from, over TLS at public addresses only (repeatable)")
	fs.Var(&r.flags.private, "image-registry-insecure", "with --image: `HOST[:PORT][/PREFIX]` of a private registry, over plain HTTP at any address (repeatable)")
	fs.StringVar(&r.flags.authFile, "image-auth-file", "", "with --image: docker-style config `FILE` with the registries' credentials")
	fs.IntVar(&r.flags.cacheMB, "image-cache-mb", int(image.DefaultCacheBytes>>20), "with --image: most MB the unpacked images take")
	fs.StringVar(&r.stateDir, "state-dir", sandbox.DefaultStateDir, "with --image: the image store is DIR/images (not while a worker uses it)")
}

func (r *runImages) Acquire(ctx context.Context, ref string) (*sandbox.RootImage, func(), error) {
	c, err := r.flags.config(fileConfig{})
	if err != nil {
		return nil, nil, err
	}
	if len(c.registries) == 0 {
		return nil, nil, errors.New("--image needs a registry: give --image-registry or --image-registry-insecure")
	}
	host, err := egress.NewHostAddrs(egress.HostAddrsConfig{})
	if err != nil {
		return nil, nil, err
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	s, err := openImages(c, r.stateDir, stackConfig{}, host, nil, log)
	if err != nil {
		host.Close()
		return nil, nil, err
	}
	done := func() { s.Close(); host.Close() }
	img, err := acquirer(s, ref)(ctx)
	if err != nil {
		done()
		return nil, nil, err
	}
	return img, done, nil
}
