package image

import (
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
)

// Registry is one registry the operator allows images from:
// HOST[:PORT][/PREFIX]. Only repositories at or below PREFIX (on a path
// boundary) are allowed; no prefix allows the whole registry.
type Registry struct {
	// Host is the registry as references name it, normalised
	// ("docker.io" is "index.docker.io").
	Host string
	// Prefix is the repository path prefix, "" for every repository.
	Prefix string
	// Private makes the worker reach the registry over plain HTTP and at
	// whatever address its name resolves to, a loopback or LAN address
	// included (--image-registry-insecure): the operator vouches for it.
	// Other registries are reached over TLS, at public addresses only.
	Private bool
}

// ParseRegistry parses HOST[:PORT][/PREFIX]. Errors say what is wrong.
func ParseRegistry(s string, private bool) (Registry, error) {
	host, prefix, _ := strings.Cut(strings.TrimSuffix(s, "/"), "/")
	if strings.Contains(host, "://") || strings.HasPrefix(s, "http") && strings.Contains(s, ":/") {
		return Registry{}, fmt.Errorf("registry %q: give HOST[:PORT][/PREFIX], without a scheme", s)
	}
	reg, err := name.NewRegistry(host, name.StrictValidation)
	if err != nil {
		return Registry{}, fmt.Errorf("registry %q: %w", s, err)
	}
	if prefix != "" {
		if _, err := name.NewRepository("registry.invalid/" + prefix); err != nil {
			return Registry{}, fmt.Errorf("registry %q: prefix %q: %w", s, prefix, err)
		}
	}
	return Registry{Host: reg.RegistryStr(), Prefix: prefix, Private: private}, nil
}

// String is the registry as the operator gives it.
func (r Registry) String() string {
	s := r.Host
	if r.Prefix != "" {
		s += "/" + r.Prefix
	}
	if r.Private {
		s += " (private)"
	}
	return s
}

// allows reports whether repo (registry and repository path) is r's.
func (r Registry) allows(reg, repo string) bool {
	if reg != r.Host {
		return false
	}
	return r.Prefix == "" || repo == r.Prefix || strings.HasPrefix(repo, r.Prefix+"/")
}

// hostPort is the address the registry is reached at: its host and port,
// the scheme's default port when it names none.
func (r Registry) hostPort() (string, string) {
	if h, p, err := net.SplitHostPort(r.Host); err == nil {
		return strings.ToLower(h), p
	}
	if r.Private {
		return strings.ToLower(r.Host), "80"
	}
	return strings.ToLower(r.Host), "443"
}

// ErrNotAllowed is returned for a reference outside the operator's
// registries (its message lists them), or when images are off.
var ErrNotAllowed = errors.New("image is not from a registry this worker allows")

// parseRef parses ref and finds the registry that allows it. A reference
// without a registry names Docker Hub (python:3.12 is
// index.docker.io/library/python:3.12), as docker does.
func parseRef(ref string, regs []Registry) (name.Reference, Registry, error) {
	if len(regs) == 0 {
		return nil, Registry{}, fmt.Errorf("%w: images are off on this worker (no --image-registry)", ErrNotAllowed)
	}
	if len(ref) > maxRefLen {
		return nil, Registry{}, fmt.Errorf("%w: image reference longer than %d bytes", ErrBadRef, maxRefLen)
	}
	r, err := name.ParseReference(ref)
	if err != nil {
		return nil, Registry{}, fmt.Errorf("%w: %q: %w", ErrBadRef, ref, err)
	}
	reg, repo := r.Context().RegistryStr(), r.Context().RepositoryStr()
	for _, g := range regs {
		if g.allows(reg, repo) {
			if g.Private {
				opts := []name.Option{name.Insecure}
				if r, err = name.ParseReference(ref, opts...); err != nil {
					return nil, Registry{}, fmt.Errorf("%w: %q: %w", ErrBadRef, ref, err)
				}
			}
			return r, g, nil
		}
	}
	names := make([]string, len(regs))
	for i, g := range regs {
		names[i] = g.String()
	}
	return nil, Registry{}, fmt.Errorf("%w: %s/%s is not in %s", ErrNotAllowed, reg, repo, strings.Join(names, ", "))
}

// maxRefLen bounds a reference (the distribution spec's own bound on a name
// is 255 bytes, plus a tag or a digest).
const maxRefLen = 512

// ErrBadRef is returned for a reference that does not parse.
var ErrBadRef = errors.New("bad image reference")
