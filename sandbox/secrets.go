package sandbox

import (
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"openvibe.network/agentsandbox"
	"openvibe.network/agentsandbox/internal/brokerca"
)

// boxCABundle is the sandbox's trust bundle in its tmpfs (not in any
// directory the sandbox sees), bound read-only at
// agentsandbox.SandboxCABundle: the host's roots plus the sandbox's CA.
// The wipe's unmount of the tmpfs takes it.
const boxCABundle = "fs/ca-certificates.crt"

// hostCABundle is the host's system bundle, the base of a sandbox's.
const hostCABundle = "/etc/ssl/certs/ca-certificates.crt"

// otherCABundles are where images other than Debian's keep their system
// trust bundle (Alpine, and Red Hat's family), which a sandbox with secrets
// gets its own bundle bound over too, when the image has them.
var otherCABundles = []string{"/etc/ssl/cert.pem", "/etc/pki/tls/certs/ca-bundle.crt", "/etc/ssl/certs/ca-bundle.crt"}

// imageCABundles returns the paths, inside the image whose root is at
// root on the host, of the regular files otherCABundles name, each
// symlink followed inside the image (never out of it), without
// agentsandbox.SandboxCABundle and without repeats.
func imageCABundles(root string) []string {
	var out []string
	for _, p := range otherCABundles {
		if r, ok := resolveInRoot(root, p); ok && r != agentsandbox.SandboxCABundle && !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	return out
}

// maxLinks bounds the symlinks resolveInRoot follows.
const maxLinks = 16

// resolveInRoot resolves the absolute path p inside the tree at root as
// the image would see it (an absolute symlink is relative to root, ".."
// stops at root) and reports whether it names a regular file there.
func resolveInRoot(root, p string) (string, bool) {
	rest := strings.Split(strings.TrimPrefix(filepath.Clean(p), "/"), "/")
	cur := "/"
	for links := 0; len(rest) > 0; {
		name := rest[0]
		rest = rest[1:]
		next := filepath.Join(cur, name) // Join cleans: ".." never leaves "/"
		fi, err := os.Lstat(filepath.Join(root, next))
		if err != nil {
			return "", false
		}
		if fi.Mode()&os.ModeSymlink == 0 {
			cur = next
			continue
		}
		if links++; links > maxLinks {
			return "", false
		}
		target, err := os.Readlink(filepath.Join(root, next))
		if err != nil {
			return "", false
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(cur, target)
		}
		rest = append(strings.Split(strings.TrimPrefix(filepath.Clean(target), "/"), "/"), rest...)
		cur = "/"
	}
	fi, err := os.Lstat(filepath.Join(root, cur))
	return cur, err == nil && fi.Mode().IsRegular()
}

// checkSecrets validates o's secrets: they need egress; names as env names
// and not also in Env; a value with no NUL, CR or LF (it goes into header
// values); at least one host each. An egress canary needs SelfTest and
// secrets.
func checkSecrets(o Options) error {
	if o.EgressCanary != nil && (!o.SelfTest || len(o.Secrets) == 0) {
		return fmt.Errorf("an egress canary is the self-test's, for a probe sandbox with secrets")
	}
	if len(o.Secrets) == 0 {
		return nil
	}
	if !o.Egress {
		return fmt.Errorf("secrets need egress: a sandbox without egress has no way to use them")
	}
	for _, name := range slices.Sorted(maps.Keys(o.Secrets)) {
		s := o.Secrets[name]
		switch {
		case !agentsandbox.ValidEnvName(name):
			return fmt.Errorf("secret name %q is not a valid variable name (letters, digits and _, not starting with a digit)", name)
		case o.Env[name] != "":
			return fmt.Errorf("secret %s is also in env: give it in one of them", name)
		case slices.Contains(agentsandbox.SecretCAEnv, name):
			return fmt.Errorf("secret name %s is one of the variables that name the sandbox's trust bundle (%s): choose another name", name, strings.Join(agentsandbox.SecretCAEnv, ", "))
		case s.Value == "":
			return fmt.Errorf("secret %s has an empty value", name)
		case strings.ContainsAny(s.Value, "\x00\r\n"):
			return fmt.Errorf("secret %s's value contains a NUL, CR or LF byte, which no header value may hold", name)
		case len(s.Hosts) == 0:
			return fmt.Errorf("secret %s has no hosts: give the hosts it may be sent to", name)
		}
	}
	return nil
}

// secretSetup is what a sandbox with secrets gets at start: the variables
// added to its commands' environment (the placeholders and the CA
// variables) and what the egress proxy is told.
type secretSetup struct {
	env     map[string]string
	secrets []agentsandbox.EgressSecret
	ca      *tls.Certificate
}

// setupSecrets makes b's CA (for the hosts of its secrets and those whose
// allow entry has methods or paths: the proxy intercepts both), a
// placeholder per secret, and its trust bundle (base: the host's bundle,
// plus the CA), written into b's tmpfs; b.caBundle is set to its host
// path. Nothing of a secret's value or of the CA's key is written
// anywhere.
func (r *Runtime) setupSecrets(b *sandboxState) (*secretSetup, error) {
	names := slices.Sorted(maps.Keys(b.opts.Secrets))
	patterns := b.opts.EgressPolicy.RuleHosts()
	for _, n := range names {
		patterns = append(patterns, b.opts.Secrets[n].Hosts...)
	}
	ca, err := brokerca.New(b.id, patterns, r.cfg.Now())
	if err != nil {
		return nil, fmt.Errorf("start sandbox: %w", err)
	}
	st := &secretSetup{env: map[string]string{}, ca: &ca}
	for _, n := range names {
		s := b.opts.Secrets[n]
		ph := placeholder()
		st.env[n] = ph
		st.secrets = append(st.secrets, agentsandbox.EgressSecret{Name: n, Placeholder: ph, Value: s.Value, Hosts: slices.Clone(s.Hosts)})
	}
	for _, k := range agentsandbox.SecretCAEnv {
		st.env[k] = agentsandbox.SandboxCABundle
	}
	bundle, err := os.ReadFile(hostCABundle)
	if err != nil && !os.IsNotExist(err) {
		return nil, fmt.Errorf("start sandbox: read the host's CA bundle: %w", err)
	}
	if len(bundle) > 0 && bundle[len(bundle)-1] != '\n' {
		bundle = append(bundle, '\n')
	}
	bundle = append(bundle, brokerca.CertPEM(ca)...)
	path := filepath.Join(b.dir, boxCABundle)
	if err := os.WriteFile(path, bundle, 0o644); err != nil {
		return nil, fmt.Errorf("start sandbox: write its CA bundle: %w", err)
	}
	b.caBundle = path
	return st, nil
}

// placeholder returns a new random placeholder: the prefix and 128 bits in
// hex.
func placeholder() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return agentsandbox.SecretPlaceholderPrefix + hex.EncodeToString(b[:])
}

// secretHosts is what Info shows of secrets: names and hosts.
func secretHosts(s map[string]agentsandbox.Secret) map[string][]string {
	if len(s) == 0 {
		return nil
	}
	out := make(map[string][]string, len(s))
	for k, v := range s {
		out[k] = slices.Clone(v.Hosts)
	}
	return out
}

// UpdateSecrets adds or rotates secrets of sandbox id, which must have a
// CA (it was created with secrets, or with an egress allow entry with
// methods or paths): a name it has keeps its placeholder and gets the new
// value and hosts, a new name gets a new placeholder. The proxy uses the
// new values from its next request on; the placeholder of a new secret is
// in the environment of every command started after (not of those
// running: an environment cannot change), and is returned, by name, with
// those of the rotated ones. Each secret's hosts must lie within the names
// the sandbox's CA was made for (the hosts of its secrets and rules at
// create): its trust bundle cannot change once it started. Errors:
// ErrNotFound; ErrInvalid saying what to fix (never quoting a value); the
// proxy's refusal.
func (r *Runtime) UpdateSecrets(id string, secrets map[string]agentsandbox.Secret) (Info, map[string]string, error) {
	b, err := r.get(id)
	if err != nil {
		return Info{}, nil, err
	}
	up, ok := r.cfg.Egress.(SecretsUpdater)
	if !ok || !b.opts.Egress {
		return Info{}, nil, fmt.Errorf("secrets need egress: this sandbox has none: %w", ErrInvalid)
	}
	if err := checkSecrets(Options{Egress: true, Env: b.opts.Env, Secrets: secrets}); err != nil {
		return Info{}, nil, fmt.Errorf("%w: %w", err, ErrInvalid)
	}
	b.secretsMu.Lock()
	defer b.secretsMu.Unlock()
	if len(b.caDomains) == 0 {
		return Info{}, nil, fmt.Errorf("the sandbox was created without secrets and without egress methods or paths, so it has no CA its programs trust: create it with a secret for these hosts: %w", ErrInvalid)
	}
	list := slices.Clone(b.secrets)
	placeholders := map[string]string{}
	added := map[string]string{}
	for _, name := range slices.Sorted(maps.Keys(secrets)) {
		s := secrets[name]
		for _, h := range s.Hosts {
			if !withinDomains(h, b.caDomains) {
				return Info{}, nil, fmt.Errorf("secret %s's host %q is outside the names this sandbox's CA was made for (%s): a sandbox's trust bundle cannot change once it started, so give only hosts of its secrets or rules at create: %w",
					name, clipHost(h), strings.Join(b.caDomains, ", "), ErrInvalid)
			}
		}
		i := slices.IndexFunc(list, func(e agentsandbox.EgressSecret) bool { return e.Name == name })
		if i < 0 {
			list = append(list, agentsandbox.EgressSecret{Name: name, Placeholder: placeholder()})
			i = len(list) - 1
			added[name] = list[i].Placeholder
		}
		list[i].Value, list[i].Hosts = s.Value, slices.Clone(s.Hosts)
		placeholders[name] = list[i].Placeholder
	}
	if err := up.UpdateSecrets(id, list); err != nil {
		return Info{}, nil, fmt.Errorf("update secrets: %w", err)
	}
	b.secrets = list
	if len(added) > 0 {
		if b.addedEnv == nil {
			b.addedEnv = map[string]string{}
		}
		maps.Copy(b.addedEnv, added)
	}
	r.mu.Lock()
	hosts := map[string][]string{}
	for _, s := range list {
		hosts[s.Name] = slices.Clone(s.Hosts)
	}
	b.info.Secrets = hosts
	info := b.info
	r.mu.Unlock()
	r.log.Info("sandbox secrets updated", "sandbox", id, "secrets", slices.Sorted(maps.Keys(secrets)), "added", slices.Sorted(maps.Keys(added)))
	return info, placeholders, nil
}

// withAddedEnv returns env plus the placeholders of the secrets added
// after b started (env's own variables win); env itself when there are
// none.
func (b *sandboxState) withAddedEnv(env map[string]string) map[string]string {
	b.secretsMu.Lock()
	defer b.secretsMu.Unlock()
	if len(b.addedEnv) == 0 {
		return env
	}
	out := maps.Clone(b.addedEnv)
	maps.Copy(out, env)
	return out
}

// withinDomains reports whether host pattern h (a name or "*." wildcard,
// optional port) lies within one of a CA's permitted domains.
func withinDomains(h string, domains []string) bool {
	if i := strings.LastIndexByte(h, ':'); i >= 0 {
		h = h[:i]
	}
	h = strings.ToLower(strings.TrimPrefix(h, "*."))
	for _, d := range domains {
		if h == d || strings.HasSuffix(h, "."+d) {
			return true
		}
	}
	return false
}

// clipHost bounds a host quoted in an error.
func clipHost(h string) string {
	if len(h) > 80 {
		return h[:80] + "…"
	}
	return h
}
