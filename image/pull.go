package image

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"golang.org/x/sync/errgroup"
)

// Image is an image held for a sandbox: the store keeps it (and never
// evicts it) until Release.
type Image struct {
	// Ref is the reference it was asked by; Digest its manifest's digest
	// (for an index, the digest of the variant for this platform).
	Ref    string
	Digest string
	// Layers are the host directories of its unpacked layers, lowest
	// first: read-only, shared by every sandbox of the image.
	Layers []string
	Config ImageConfig
	// Size is what its layers take unpacked.
	Size int64

	s        *Store
	released atomic.Bool
}

// Release lets the store evict the image again (it counts as used now).
// Calling it again does nothing.
func (im *Image) Release() {
	if im.released.Swap(true) || im.s == nil {
		return
	}
	s := im.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.images[im.Digest]; r != nil {
		r.users--
		r.LastUsed = s.cfg.Now()
	}
}

// canonical is a reference in the form the store keys tags by.
func canonical(ref string) (string, error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return "", err
	}
	return r.Name(), nil
}

// Acquire returns the image ref, held until Release: from the store when it
// holds it (a tag as the store last resolved it: use Pull to look again),
// else pulled first (concurrent callers for one image wait for one pull).
// Errors: ErrNotAllowed, ErrBadRef, and those of Pull.
func (s *Store) Acquire(ctx context.Context, ref string) (*Image, error) {
	r, _, err := parseRef(ref, s.cfg.Registries)
	if err != nil {
		return nil, err
	}
	keys := []string{r.Name()} // a tag (or digest) it was pulled by
	if d, ok := r.(name.Digest); ok {
		keys = append(keys, d.DigestStr()) // the same bytes, by any name
	}
	for _, k := range keys {
		if im := s.hold(ref, k); im != nil {
			s.metrics.hit()
			return im, nil
		}
	}
	digest, err := s.pull(ctx, ref)
	if err != nil {
		return nil, err
	}
	if im := s.hold(ref, digest); im != nil {
		return im, nil
	}
	return nil, fmt.Errorf("pull %s: %w: it was evicted as soon as it was pulled (the cap is too small for the images in use)", ref, ErrCacheFull)
}

// hold takes a use of the image key (a canonical reference or a digest)
// when the store has it.
func (s *Store) hold(ref, key string) *Image {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.lookupLocked(key)
	if r == nil || s.closed {
		return nil
	}
	r.users++
	r.LastUsed = s.cfg.Now()
	im := &Image{Ref: ref, Digest: r.Digest, Config: r.Config, s: s}
	for _, h := range r.Layers {
		im.Layers = append(im.Layers, s.layerDir(h))
		im.Size += s.layers[h].Size
	}
	return im
}

// Pull fetches ref from its registry (a tag is resolved again) and unpacks
// what the store does not hold yet; concurrent pulls of one reference are
// one. Errors (wrapped, saying what to fix): ErrNotAllowed, ErrBadRef,
// ErrNotFound, ErrUnauthorized, ErrUnavailable (bounded by the stall and
// pull timeouts), ErrRefused, ErrPlatform, ErrBadImage, ErrCacheFull,
// ErrNoSpace, ctx's. A failed pull leaves nothing of itself in the store.
func (s *Store) Pull(ctx context.Context, ref string) (Info, error) {
	if _, _, err := parseRef(ref, s.cfg.Registries); err != nil {
		return Info{}, err
	}
	digest, err := s.pull(ctx, ref)
	if err != nil {
		return Info{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.images[digest]; r != nil {
		return s.infoLocked(r), nil
	}
	return Info{}, fmt.Errorf("pull %s: %w: it was evicted as soon as it was pulled", ref, ErrCacheFull)
}

// pull runs (or joins) the pull of ref and returns the image's digest.
func (s *Store) pull(ctx context.Context, ref string) (string, error) {
	r, reg, err := parseRef(ref, s.cfg.Registries)
	if err != nil {
		return "", err
	}
	start := time.Now()
	digest, err := s.join(ctx, "pull "+r.Name(), func(ctx context.Context) (string, error) {
		d, err := s.fetch(ctx, r, reg)
		if err != nil {
			err = fmt.Errorf("pull %s: %w", r.Name(), classify(err, reg))
		}
		s.metrics.pulled(err, time.Since(start))
		if err != nil {
			s.log.Warn("image pull failed", "ref", r.Name(), "registry", reg.String(), "err", err.Error(),
				"duration_ms", time.Since(start).Milliseconds())
			return "", err
		}
		s.log.Info("image pulled", "ref", r.Name(), "digest", d, "registry", reg.String(),
			"duration_ms", time.Since(start).Milliseconds())
		return d, nil
	})
	return digest, err
}

// fetch resolves r to this platform's image, unpacks the layers the store
// lacks and records the image.
func (s *Store) fetch(ctx context.Context, r name.Reference, reg Registry) (string, error) {
	opts := append(slices.Clone(s.opts), remote.WithContext(ctx))
	desc, err := remote.Get(r, opts...)
	if err != nil {
		return "", err
	}
	img, err := s.platformImage(desc, opts)
	if err != nil {
		return "", err
	}
	d, err := img.Digest()
	if err != nil {
		return "", err
	}
	digest := d.String()
	if s.tag(r, digest) {
		return digest, nil // held already: the tag now names it
	}
	m, err := img.Manifest()
	if err != nil {
		return "", err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return "", err
	}
	if err := s.check(m, cf); err != nil {
		return "", err
	}
	hexes := make([]string, len(m.Layers))
	for i := range m.Layers {
		hexes[i] = cf.RootFS.DiffIDs[i].Hex
	}
	s.pin(hexes)
	defer s.unpin(hexes)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(layerJobs)
	for i, l := range m.Layers {
		g.Go(func() error { return s.ensureLayer(gctx, img, l, cf.RootFS.DiffIDs[i]) })
	}
	if err := g.Wait(); err != nil {
		return "", err
	}
	conf, err := s.imageConfig(cf, hexes)
	if err != nil {
		return "", err
	}
	now := s.cfg.Now()
	rec := &record{Digest: digest, Refs: []string{r.Name()}, Layers: hexes, Config: conf, Platform: platformOf(cf),
		Pulled: now, LastUsed: now}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return "", errors.New("the store is closed")
	}
	if old := s.images[digest]; old != nil { // pulled meanwhile by another reference
		rec = old
		if !slices.Contains(rec.Refs, r.Name()) {
			rec.Refs = append(rec.Refs, r.Name())
		}
	}
	s.images[digest] = rec
	s.tags[r.Name()] = digest
	return digest, s.saveLocked()
}

// tag records that r names digest when the store holds that image.
func (s *Store) tag(r name.Reference, digest string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec := s.images[digest]
	if rec == nil {
		return false
	}
	if !slices.Contains(rec.Refs, r.Name()) {
		rec.Refs = append(rec.Refs, r.Name())
	}
	s.tags[r.Name()] = digest
	if err := s.saveLocked(); err != nil {
		s.log.Error("image index not saved", "err", err.Error())
	}
	return true
}

// platformImage is desc's image: itself, or for an index the variant for
// the store's platform.
func (s *Store) platformImage(desc *remote.Descriptor, opts []remote.Option) (v1.Image, error) {
	switch {
	case desc.MediaType.IsImage():
		return desc.Image()
	case desc.MediaType.IsIndex():
		idx, err := desc.ImageIndex()
		if err != nil {
			return nil, err
		}
		im, err := idx.IndexManifest()
		if err != nil {
			return nil, err
		}
		var have []string
		for _, c := range im.Manifests {
			if c.Platform == nil || !c.MediaType.IsImage() {
				continue
			}
			if c.Platform.Satisfies(s.cfg.Platform) {
				return idx.Image(c.Digest)
			}
			have = append(have, c.Platform.String())
		}
		return nil, fmt.Errorf("%w: the index has %v, not %s", ErrPlatform, have, s.cfg.Platform.String())
	case desc.MediaType == types.DockerManifestSchema1 || desc.MediaType == types.DockerManifestSchema1Signed:
		return nil, fmt.Errorf("%w: Docker schema 1 manifests are not supported (push the image again with a current tool)", ErrBadImage)
	}
	return nil, fmt.Errorf("%w: media type %s is not an image", ErrBadImage, desc.MediaType)
}

// check refuses an image the store cannot hold before any layer is
// fetched: no layers or too many, diff IDs that do not match the layers,
// another platform, a compressed size past the cap.
func (s *Store) check(m *v1.Manifest, cf *v1.ConfigFile) error {
	switch {
	case len(m.Layers) == 0:
		return fmt.Errorf("%w: the image has no layers", ErrBadImage)
	case len(m.Layers) > maxLayers:
		return fmt.Errorf("%w: %d layers, more than %d", ErrBadImage, len(m.Layers), maxLayers)
	case len(cf.RootFS.DiffIDs) != len(m.Layers):
		return fmt.Errorf("%w: %d layers but %d diff IDs in its configuration", ErrBadImage, len(m.Layers), len(cf.RootFS.DiffIDs))
	}
	if cf.OS != "" && cf.OS != s.cfg.Platform.OS || cf.Architecture != "" && cf.Architecture != s.cfg.Platform.Architecture {
		return fmt.Errorf("%w: the image is %s, not %s", ErrPlatform, platformOf(cf), s.cfg.Platform.String())
	}
	var total int64
	for i, l := range m.Layers {
		if l.Size < 0 || cf.RootFS.DiffIDs[i].Algorithm != "sha256" || !validHex(cf.RootFS.DiffIDs[i].Hex) {
			return fmt.Errorf("%w: layer %d has a bad size or diff ID", ErrBadImage, i)
		}
		total += l.Size
	}
	if total > s.cfg.CacheBytes {
		return fmt.Errorf("%w: its layers are %d MiB compressed, more than the cap of %d MiB", ErrCacheFull, total>>20, s.cfg.CacheBytes>>20)
	}
	return nil
}

func platformOf(cf *v1.ConfigFile) string {
	p := cf.OS + "/" + cf.Architecture
	if cf.Variant != "" {
		p += "/" + cf.Variant
	}
	return p
}

// pin keeps layers from eviction while a pull needs them.
func (s *Store) pin(hexes []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, h := range hexes {
		l := s.layers[h]
		if l == nil {
			l = &layer{}
			s.layers[h] = l
		}
		l.pins++
	}
}

// unpin lets them go; a layer that never became ready, or that no image
// names, is forgotten (and its directory removed).
func (s *Store) unpin(hexes []string) {
	s.mu.Lock()
	var drop []string
	for _, h := range hexes {
		l := s.layers[h]
		if l == nil {
			continue
		}
		l.pins--
		if l.pins > 0 || s.named(h) {
			continue
		}
		delete(s.layers, h)
		if l.ready {
			s.used -= l.Size
			drop = append(drop, h)
		}
	}
	s.mu.Unlock()
	s.removeLayers(drop)
}

// retryable says which failed requests go-containerregistry tries again:
// temporary failures, but not a registry that already did not answer for
// the stall timeout, nor a refused address.
func retryable(err error) bool {
	var ne net.Error
	switch {
	case err == nil, errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, ErrRefused), errors.As(err, &ne) && ne.Timeout():
		return false
	}
	var te *transport.Error
	if errors.As(err, &te) {
		return te.Temporary()
	}
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE)
}

// classify wraps a pull's failure with the store's error that says what it
// was.
func classify(err error, reg Registry) error {
	for _, known := range []error{ErrNotAllowed, ErrBadRef, ErrPlatform, ErrBadImage, ErrCacheFull, ErrNoSpace, ErrRefused} {
		if errors.Is(err, known) {
			return err
		}
	}
	var te *transport.Error
	if errors.As(err, &te) {
		codes := make([]string, 0, len(te.Errors))
		for _, d := range te.Errors {
			codes = append(codes, string(d.Code))
		}
		switch {
		case te.StatusCode == http.StatusUnauthorized || te.StatusCode == http.StatusForbidden ||
			slices.Contains(codes, string(transport.UnauthorizedErrorCode)) || slices.Contains(codes, string(transport.DeniedErrorCode)):
			return fmt.Errorf("%w: the worker's credentials for %s (--image-auth-file) are missing or refused: %v", ErrUnauthorized, reg.Host, codes)
		case te.StatusCode == http.StatusNotFound || slices.Contains(codes, string(transport.ManifestUnknownErrorCode)) ||
			slices.Contains(codes, string(transport.NameUnknownErrorCode)):
			return fmt.Errorf("%w: no such repository, tag or digest (%v)", ErrNotFound, codes)
		case te.StatusCode == http.StatusTooManyRequests || te.StatusCode >= 500:
			return fmt.Errorf("%w: it answered %d %v; try again later", ErrUnavailable, te.StatusCode, codes)
		}
		return fmt.Errorf("%w: it answered %d %v", ErrBadImage, te.StatusCode, codes)
	}
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ENOSPC):
		return fmt.Errorf("%w: %w", ErrNoSpace, err)
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return fmt.Errorf("%w: %s did not answer in time: %w", ErrUnavailable, reg.Host, err)
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.As(err, new(*net.OpError)):
		return fmt.Errorf("%w: %s: %w", ErrUnavailable, reg.Host, err)
	case errors.Is(err, context.Canceled):
		return err
	}
	return fmt.Errorf("%w: %w", ErrBadImage, err)
}
