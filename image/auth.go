package image

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
)

// Auth holds the worker's registry credentials, from a docker-style config
// file (--image-auth-file): never from a tenant. The zero Auth has none.
type Auth struct {
	byHost map[string]authn.AuthConfig
}

// ParseAuth parses a docker config file's "auths": per registry, "auth"
// (base64 of USER:PASSWORD), or "username" and "password", or an
// "identitytoken" or "registrytoken". Keys may be a host, a host with a
// scheme, or Docker Hub's "https://index.docker.io/v1/". Credential helpers
// and stores are refused: the worker reads only this file. Errors never
// quote a secret.
func ParseAuth(data []byte) (Auth, error) {
	var f struct {
		Auths       map[string]fileAuth `json:"auths"`
		CredsStore  string              `json:"credsStore"`
		CredHelpers map[string]string   `json:"credHelpers"`
	}
	if err := json.Unmarshal(data, &f); err != nil {
		return Auth{}, errors.New("auth file: not a docker config file (JSON with \"auths\")")
	}
	if f.CredsStore != "" || len(f.CredHelpers) > 0 {
		return Auth{}, errors.New("auth file: credential helpers (credsStore, credHelpers) are not supported; put the credentials in \"auths\"")
	}
	a := Auth{byHost: map[string]authn.AuthConfig{}}
	for key, fa := range f.Auths {
		host := authHost(key)
		if host == "" {
			return Auth{}, fmt.Errorf("auth file: registry key %q is not a host", key)
		}
		cfg := authn.AuthConfig{Username: fa.Username, Password: fa.Password, IdentityToken: fa.IdentityToken, RegistryToken: fa.RegistryToken}
		if fa.Auth != "" {
			raw, err := base64.StdEncoding.DecodeString(fa.Auth)
			user, pass, ok := strings.Cut(string(raw), ":")
			if err != nil || !ok {
				return Auth{}, fmt.Errorf("auth file: the \"auth\" of %q is not base64 of USER:PASSWORD", key)
			}
			cfg.Username, cfg.Password = user, pass
		}
		if cfg == (authn.AuthConfig{}) {
			return Auth{}, fmt.Errorf("auth file: %q has no credentials", key)
		}
		a.byHost[host] = cfg
	}
	return a, nil
}

type fileAuth struct {
	Auth          string `json:"auth"`
	Username      string `json:"username"`
	Password      string `json:"password"`
	IdentityToken string `json:"identitytoken"`
	RegistryToken string `json:"registrytoken"`
}

// authHost normalises an auths key to the registry as references name it.
func authHost(key string) string {
	h := key
	if i := strings.Index(h, "://"); i >= 0 {
		h = h[i+3:]
	}
	h, _, _ = strings.Cut(h, "/")
	h = strings.ToLower(h)
	switch h {
	case "docker.io", "registry-1.docker.io":
		return "index.docker.io"
	}
	return h
}

// Hosts lists the registries it has credentials for.
func (a Auth) Hosts() []string {
	out := make([]string, 0, len(a.byHost))
	for h := range a.byHost {
		out = append(out, h)
	}
	return out
}

// Resolve implements authn.Keychain: the credentials for the registry of
// target, or anonymous.
func (a Auth) Resolve(target authn.Resource) (authn.Authenticator, error) {
	if cfg, ok := a.byHost[strings.ToLower(target.RegistryStr())]; ok {
		return authn.FromConfig(cfg), nil
	}
	return authn.Anonymous, nil
}

var _ authn.Keychain = Auth{}
