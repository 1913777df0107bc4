package image

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"
	"time"

	"openvibe.network/agentsandbox/internal/atomicfile"
)

// record is one image the store holds (index.json keeps them).
type record struct {
	Digest string   `json:"digest"`
	Refs   []string `json:"refs"`
	// Layers are the diff IDs (hex) of its layers, lowest first.
	Layers   []string    `json:"layers"`
	Config   ImageConfig `json:"config"`
	Platform string      `json:"platform"`
	Pulled   time.Time   `json:"pulled"`
	LastUsed time.Time   `json:"last_used"`
	users    int         // sandboxes using it now (in memory only)
}

// layer is one unpacked layer; pins counts the pulls under way that need
// it (it is not removed while pinned, even by no image yet).
type layer struct {
	Size int64 `json:"size"`
	pins int
	// ready is set once it is unpacked (a pinned layer may be on its way).
	ready bool
}

// ImageConfig is what the runtime takes from an image's configuration.
type ImageConfig struct {
	// Env is the image's environment (KEY=VALUE).
	Env []string `json:"env,omitempty"`
	// WorkingDir is the image's working directory ("" for none).
	WorkingDir string `json:"working_dir,omitempty"`
	// User is the image's user as its configuration says it; UID and GID
	// what it resolves to in the image's own /etc/passwd and /etc/group.
	User string `json:"user,omitempty"`
	UID  int    `json:"uid"`
	GID  int    `json:"gid"`
}

// indexFile is index.json.
type indexFile struct {
	Images []*record         `json:"images"`
	Layers map[string]*layer `json:"layers"`
	Tags   map[string]string `json:"tags"`
}

// load reads index.json, keeps the images whose layers are all there, and
// removes every layer directory no image names and what tmp/ holds.
func (s *Store) load() error {
	var idx indexFile
	switch data, err := os.ReadFile(s.path("index.json")); {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return err
	default:
		if err := json.Unmarshal(data, &idx); err != nil {
			s.log.Warn("image store index unreadable; starting empty", "err", err.Error())
			idx = indexFile{}
		}
	}
	present := map[string]bool{}
	entries, err := os.ReadDir(s.path("layers"))
	if err != nil {
		return err
	}
	for _, e := range entries {
		present[e.Name()] = true
	}
	for hex, l := range idx.Layers {
		if present[hex] && l != nil && validHex(hex) {
			l.ready = true
			s.layers[hex] = l
			s.used += l.Size
		}
	}
	for _, r := range idx.Images {
		if r != nil && len(r.Layers) > 0 && !slices.ContainsFunc(r.Layers, func(h string) bool { return s.layers[h] == nil }) {
			s.images[r.Digest] = r
		}
	}
	for ref, d := range idx.Tags {
		if s.images[d] != nil {
			s.tags[ref] = d
		}
	}
	for hex := range s.layers {
		if !s.named(hex) {
			s.used -= s.layers[hex].Size
			delete(s.layers, hex)
		}
	}
	for name := range present {
		if s.layers[name] == nil {
			if err := os.RemoveAll(s.layerDir(name)); err != nil {
				return err
			}
		}
	}
	if err := clearDir(s.path("tmp")); err != nil {
		return err
	}
	var drop []string
	s.mu.Lock()
	for s.used > s.cfg.CacheBytes {
		d, ok := s.evictLRU()
		if !ok {
			break
		}
		drop = append(drop, d...)
	}
	err = s.saveLocked()
	s.mu.Unlock()
	s.removeLayers(drop)
	return err
}

// validHex reports whether s is a sha256 digest in hex.
func validHex(s string) bool {
	return len(s) == 64 && strings.Trim(s, "0123456789abcdef") == ""
}

func clearDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := os.RemoveAll(dir + "/" + e.Name()); err != nil {
			return err
		}
	}
	return nil
}

// named reports whether an image names layer hex (under mu, or alone).
func (s *Store) named(hex string) bool {
	for _, r := range s.images {
		if slices.Contains(r.Layers, hex) {
			return true
		}
	}
	return false
}

// saveLocked writes index.json (under mu).
func (s *Store) saveLocked() error {
	idx := indexFile{Layers: map[string]*layer{}, Tags: s.tags}
	for _, r := range s.images {
		idx.Images = append(idx.Images, r)
	}
	slices.SortFunc(idx.Images, func(a, b *record) int { return strings.Compare(a.Digest, b.Digest) })
	for hex, l := range s.layers {
		if l.ready {
			idx.Layers[hex] = l
		}
	}
	data, err := json.MarshalIndent(idx, "", " ")
	if err != nil {
		return err
	}
	if err := atomicfile.Write(s.path("index.json"), data, 0o600); err != nil {
		return fmt.Errorf("save image index: %w", err)
	}
	return nil
}

// reserve charges n more bytes of a pull, evicting unused images (least
// recently used first) to make room. Errors: ErrCacheFull.
func (s *Store) reserve(n int64) error {
	s.mu.Lock()
	var drop []string
	var err error
	for s.used+n > s.cfg.CacheBytes {
		d, ok := s.evictLRU()
		if !ok {
			err = fmt.Errorf("%w: the images sandboxes use and the pulls under way hold %d of its %d MiB", ErrCacheFull,
				s.used>>20, s.cfg.CacheBytes>>20)
			break
		}
		drop = append(drop, d...)
	}
	if err == nil {
		s.used += n
	}
	if len(drop) > 0 {
		if serr := s.saveLocked(); serr != nil {
			s.log.Error("image index not saved", "err", serr.Error())
		}
	}
	s.mu.Unlock()
	s.removeLayers(drop)
	return err
}

// unreserve gives back what a failed pull charged.
func (s *Store) unreserve(n int64) {
	s.mu.Lock()
	s.used -= n
	s.mu.Unlock()
}

// evictLRU forgets the least recently used image no sandbox uses and
// returns the layers no other image names (and no pull pins), whose
// directories the caller removes once it has let go of mu; false when
// nothing can be evicted. Under mu.
func (s *Store) evictLRU() ([]string, bool) {
	var victim *record
	for _, r := range s.images {
		if r.users == 0 && (victim == nil || r.LastUsed.Before(victim.LastUsed)) {
			victim = r
		}
	}
	if victim == nil {
		return nil, false
	}
	s.metrics.evicted()
	s.log.Info("image evicted", "digest", victim.Digest, "refs", victim.Refs, "last_used", victim.LastUsed)
	return s.forgetLocked(victim), true
}

// forgetLocked removes r from the store's records and returns the layers
// that nothing names any more (their bytes given back). Under mu.
func (s *Store) forgetLocked(r *record) []string {
	delete(s.images, r.Digest)
	for ref, d := range s.tags {
		if d == r.Digest {
			delete(s.tags, ref)
		}
	}
	var drop []string
	for _, hex := range r.Layers {
		l := s.layers[hex]
		if l == nil || l.pins > 0 || s.named(hex) {
			continue
		}
		s.used -= l.Size
		delete(s.layers, hex)
		drop = append(drop, hex)
	}
	return drop
}

// removeLayers removes the directories of layers the store forgot: each
// is first renamed into tmp/ (gone from layers/ at once, and removed at the
// next start if this removal is cut short).
func (s *Store) removeLayers(hexes []string) {
	for _, hex := range hexes {
		trash, err := os.MkdirTemp(s.path("tmp"), "gone-")
		if err == nil {
			if err = os.Rename(s.layerDir(hex), trash+"/l"); err == nil {
				err = os.RemoveAll(trash)
			}
		}
		if err != nil {
			s.log.Error("cannot remove an evicted layer; the next start removes it", "layer", hex, "err", err.Error())
		}
	}
}

// Info describes an image the store holds.
type Info struct {
	Digest string   `json:"digest"`
	Refs   []string `json:"refs"`
	// Size is what its layers take unpacked (layers it shares with other
	// images counted in each).
	Size     int64     `json:"size"`
	Layers   int       `json:"layers"`
	Platform string    `json:"platform"`
	Pulled   time.Time `json:"pulled"`
	LastUsed time.Time `json:"last_used"`
	// InUse is how many sandboxes use it now.
	InUse int `json:"in_use"`
}

func (s *Store) infoLocked(r *record) Info {
	in := Info{Digest: r.Digest, Refs: slices.Clone(r.Refs), Layers: len(r.Layers), Platform: r.Platform,
		Pulled: r.Pulled, LastUsed: r.LastUsed, InUse: r.users}
	for _, h := range r.Layers {
		if l := s.layers[h]; l != nil {
			in.Size += l.Size
		}
	}
	return in
}

// List describes the images the store holds, most recently used first.
func (s *Store) List() []Info {
	s.mu.Lock()
	out := make([]Info, 0, len(s.images))
	for _, r := range s.images {
		out = append(out, s.infoLocked(r))
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b Info) int { return b.LastUsed.Compare(a.LastUsed) })
	return out
}

// Used is how many bytes the store's layers take (and pulls under way
// reserved).
func (s *Store) Used() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.used
}

// Delete evicts the image ref (a reference it was pulled by, or its
// digest) and the layers no other image uses. Errors: ErrUnknown, ErrInUse.
func (s *Store) Delete(ref string) (Info, error) {
	s.mu.Lock()
	r := s.lookupLocked(ref)
	if r == nil {
		s.mu.Unlock()
		return Info{}, fmt.Errorf("delete image %s: %w", ref, ErrUnknown)
	}
	in := s.infoLocked(r)
	if r.users > 0 {
		s.mu.Unlock()
		return in, fmt.Errorf("delete image %s: %w by %d sandboxes", ref, ErrInUse, r.users)
	}
	drop := s.forgetLocked(r)
	s.metrics.evicted()
	err := s.saveLocked()
	s.mu.Unlock()
	s.removeLayers(drop)
	s.log.Info("image deleted", "digest", in.Digest, "refs", in.Refs)
	return in, err
}

// lookupLocked finds an image by digest, by a reference it was pulled by,
// or by that reference's canonical form. Under mu.
func (s *Store) lookupLocked(ref string) *record {
	if r := s.images[ref]; r != nil {
		return r
	}
	if d, ok := s.tags[ref]; ok {
		return s.images[d]
	}
	if c, err := canonical(ref); err == nil {
		if r := s.images[c]; r != nil {
			return r
		}
		if d, ok := s.tags[c]; ok {
			return s.images[d]
		}
	}
	return nil
}
