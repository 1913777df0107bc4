// Package image is the worker's image store: it pulls OCI and Docker images
// from the registries the operator allows, verifies every blob against its
// digest, unpacks each layer once (package image/unpack, which treats every
// layer as hostile) into a content-addressed directory under the state dir,
// and hands the layers to the sandbox runtime, which stacks them read-only
// under each sandbox's own writable layer.
//
// The registry protocol and the manifests are go-containerregistry's
// (remote, v1): a library kept by the people who run gcr.io and used by
// ko, crane and Tekton, that fetches, verifies and parses what a registry
// serves behind small interfaces (v1.Image, v1.Layer) and leaves the
// transport to the caller. The store gives it one: connections to a
// registry the operator did not list as private go only to addresses the
// egress guard found public, every wait is bounded, and no proxy setting
// of the environment applies.
//
// Concurrent requests for one image wait for one pull, and concurrent pulls
// of one layer for one download. The store holds at most Config.CacheBytes
// of unpacked layers: to make room it evicts the images no sandbox uses,
// least recently used first.
package image

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"golang.org/x/sys/unix"
	"openvibe.network/agentsandbox/egress"
	"openvibe.network/agentsandbox/internal/metrics"
)

// Defaults of Config.
const (
	DefaultCacheBytes   = 10 << 30
	DefaultPullTimeout  = 10 * time.Minute
	DefaultStallTimeout = time.Minute
	// maxLayers bounds an image's layers (Docker's own bound is 127).
	maxLayers = 128
	// layerJobs is how many layers of one image download at once.
	layerJobs = 3
)

// Config of a Store. Zero fields take the defaults.
type Config struct {
	// Dir holds the store (made 0700 when missing): layers/ (one directory
	// per unpacked layer, named by its diff ID), tmp/ and index.json.
	Dir string
	// Registries are the registries images may come from; none: every
	// reference is refused with ErrNotAllowed.
	Registries []Registry
	// Auth holds the credentials for the registries (ParseAuth).
	Auth Auth
	// CacheBytes caps the unpacked layers (default 10 GiB).
	CacheBytes int64
	// Guard checks the addresses of every registry that is not private (and
	// of the hosts they redirect to) before any connection; it must allow
	// Ports(Registries). Nil: only private registries are reachable.
	Guard *egress.Guard
	// Resolver resolves private registries' names (default: the system's).
	Resolver egress.Resolver
	// Connect connects to an address that was checked (tests: a loopback
	// server in place of a public registry). Nil: the guard's dialer, which
	// checks the address again at connect time (a private registry's:
	// a plain dialer).
	Connect egress.DialFunc
	// RootCAs verify registries' certificates (default: the system's).
	RootCAs *x509.CertPool
	// Platform is what an index is resolved to (default: linux and this
	// program's architecture).
	Platform v1.Platform
	// PullTimeout bounds one pull (default 10 min); StallTimeout a
	// connection, a TLS handshake, a response's headers and any pause
	// within a body (default 1 min).
	PullTimeout, StallTimeout time.Duration
	// MaxLayerEntries bounds each layer's entries (default
	// unpack.DefaultMaxEntries).
	MaxLayerEntries int64
	// UserAgent is sent to registries.
	UserAgent string
	// Metrics, when set, gets the store's families (see metrics.go).
	Metrics *metrics.Registry
	// Logger gets one line per pull and eviction (default: discard).
	Logger *slog.Logger
	// Now is the clock of last use (default time.Now).
	Now func() time.Time
}

// Errors of the Store (wrapped; their messages say what to fix).
var (
	// ErrNotFound: the registry has no such repository, tag or digest.
	ErrNotFound = errors.New("image not found in the registry")
	// ErrUnauthorized: the registry refused the worker's credentials, or
	// wants some and the auth file has none for it.
	ErrUnauthorized = errors.New("the registry refused the pull (unauthorised)")
	// ErrUnavailable: the registry did not answer in time, or failed.
	ErrUnavailable = errors.New("the registry is unavailable")
	// ErrPlatform: the image has no variant for this worker's platform.
	ErrPlatform = errors.New("image has no variant for this worker's platform")
	// ErrBadImage: the image breaks the rules (a blob that does not match
	// its digest, an unsafe layer, an unsupported format).
	ErrBadImage = errors.New("image refused")
	// ErrCacheFull: the image does not fit the cache cap beside the images
	// sandboxes use now.
	ErrCacheFull = errors.New("the image cache is full")
	// ErrNoSpace: the disk under the store is full.
	ErrNoSpace = errors.New("the image store's disk is full")
	// ErrInUse: Delete of an image a sandbox uses.
	ErrInUse = errors.New("image is in use")
	// ErrUnknown: Delete of an image the store does not hold.
	ErrUnknown = errors.New("image is not in the store")
)

// Store is the image store. It is safe for concurrent use.
type Store struct {
	cfg     Config
	lock    *os.File
	opts    []remote.Option
	log     *slog.Logger
	metrics *storeMetrics

	mu      sync.Mutex
	images  map[string]*record // by manifest digest
	tags    map[string]string  // reference (canonical) -> manifest digest
	layers  map[string]*layer  // by diff ID (hex)
	used    int64              // layers' bytes, plus what pulls reserved
	flights map[string]*flight // pulls and layer downloads under way
	closed  bool
}

// Open validates cfg, takes the store's directory (one worker at a time),
// reads what it holds and removes what a worker that stopped mid-pull left.
// Errors: the directory cannot be made or is another worker's.
func Open(cfg Config) (*Store, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	s := &Store{cfg: cfg, log: cfg.Logger, images: map[string]*record{}, tags: map[string]string{},
		layers: map[string]*layer{}, flights: map[string]*flight{}}
	for _, d := range []string{cfg.Dir, s.path("layers"), s.path("tmp")} {
		if err := os.Mkdir(d, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
			return nil, fmt.Errorf("open image store: %w", err)
		}
	}
	lock, err := os.OpenFile(s.path("lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open image store: %w", err)
	}
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		lock.Close()
		return nil, fmt.Errorf("open image store: %s is used by another worker (%w)", cfg.Dir, err)
	}
	s.lock = lock
	if err := s.load(); err != nil {
		lock.Close()
		return nil, fmt.Errorf("open image store: %w", err)
	}
	s.opts = s.remoteOptions()
	s.metrics = newStoreMetrics(cfg.Metrics, s)
	return s, nil
}

func (c *Config) defaults() error {
	if c.Dir == "" {
		return errors.New("open image store: no directory")
	}
	if c.CacheBytes == 0 {
		c.CacheBytes = DefaultCacheBytes
	}
	if c.CacheBytes < 0 {
		return fmt.Errorf("open image store: cache cap %d is negative", c.CacheBytes)
	}
	if c.PullTimeout == 0 {
		c.PullTimeout = DefaultPullTimeout
	}
	if c.StallTimeout == 0 {
		c.StallTimeout = DefaultStallTimeout
	}
	if c.Platform.OS == "" {
		c.Platform = HostPlatform()
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return nil
}

// HostPlatform is linux on this program's architecture (arm64 as v8).
func HostPlatform() v1.Platform {
	p := v1.Platform{OS: "linux", Architecture: runtime.GOARCH}
	if p.Architecture == "arm64" {
		p.Variant = "v8"
	}
	return p
}

// remoteOptions are go-containerregistry's options for every request: the
// store's transport and credentials, the platform, a short retry that
// does not wait again for a registry that already did not answer.
func (s *Store) remoteOptions() []remote.Option {
	d := &dialer{private: map[string]bool{}, guard: s.cfg.Guard, resolver: s.cfg.Resolver,
		connect: s.cfg.Connect, connectPrivate: s.cfg.Connect, stall: s.cfg.StallTimeout}
	if d.connectPrivate == nil {
		d.connectPrivate = plainConnect
	}
	for _, r := range s.cfg.Registries {
		if r.Private {
			h, p := r.hostPort()
			d.private[h+":"+p] = true
		}
	}
	tr := newTransport(d, &tls.Config{RootCAs: s.cfg.RootCAs, MinVersion: tls.VersionTLS12}, s.cfg.StallTimeout)
	opts := []remote.Option{
		remote.WithTransport(tr),
		remote.WithAuthFromKeychain(authn.NewMultiKeychain(s.cfg.Auth)),
		remote.WithPlatform(s.cfg.Platform),
		remote.WithRetryBackoff(remote.Backoff{Duration: 500 * time.Millisecond, Factor: 2, Jitter: 0.1, Steps: 3}),
		remote.WithRetryPredicate(retryable),
	}
	if s.cfg.UserAgent != "" {
		opts = append(opts, remote.WithUserAgent(s.cfg.UserAgent))
	}
	return opts
}

// path is a path in the store's directory.
func (s *Store) path(elem ...string) string {
	return filepath.Join(append([]string{s.cfg.Dir}, elem...)...)
}

// layerDir is where the layer with diff ID hex is unpacked.
func (s *Store) layerDir(hex string) string { return s.path("layers", hex) }

// Close releases the store's directory; pulls still under way fail.
// Calling it again does nothing.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	return s.lock.Close()
}

// CacheBytes is the cache's cap.
func (s *Store) CacheBytes() int64 { return s.cfg.CacheBytes }

// Registries are the registries images may come from.
func (s *Store) Registries() []Registry { return append([]Registry(nil), s.cfg.Registries...) }

// flight is one pull or layer download under way; waiters block on done.
type flight struct {
	done   chan struct{}
	digest string // a pull's image
	err    error
}

// join runs f once for key while it is under way: the first caller starts
// it (on a context of its own, bounded by the pull timeout, so that a
// caller that leaves does not fail the others), every caller waits for it
// or for its own ctx.
func (s *Store) join(ctx context.Context, key string, f func(ctx context.Context) (string, error)) (string, error) {
	s.mu.Lock()
	fl, ok := s.flights[key]
	if !ok {
		fl = &flight{done: make(chan struct{})}
		s.flights[key] = fl
		go func() {
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.PullTimeout)
			defer cancel()
			d, err := f(fctx)
			s.mu.Lock()
			fl.digest, fl.err = d, err
			delete(s.flights, key)
			s.mu.Unlock()
			close(fl.done)
		}()
	}
	s.mu.Unlock()
	select {
	case <-fl.done:
		return fl.digest, fl.err
	case <-ctx.Done():
		return "", ctx.Err()
	}
}
