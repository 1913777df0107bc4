package agentsandbox

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"net"
)

// Egress modes of a sandbox: what its policy lets it reach through the
// worker's egress proxy.
const (
	// EgressNone: no way out at all (no proxy variables, no bridge).
	EgressNone = "none"
	// EgressPublic: any public address on the worker's ports (the default).
	EgressPublic = "public"
	// EgressAllow: only the names (and literals) the policy lists.
	EgressAllow = "allow"
)

// EgressModes returns every egress mode, in order. The slice is the
// caller's own.
func EgressModes() []string { return []string{EgressNone, EgressPublic, EgressAllow} }

// EgressPolicy is what one sandbox may reach, as the worker API takes and
// shows it. Allow and Deny hold patterns: an exact name ("pypi.org"), a
// wildcard matching one or more labels ("*.pythonhosted.org"), or a literal
// address ("192.0.2.7", "2001:db8::1"), each optionally with ":port" (IPv6
// then in brackets). An allow entry may also hold the HTTP methods and
// paths requests to its host are held to (see EgressEntry). Deny wins over
// Allow; Allow is for EgressAllow only. The egress package's policy
// subpackage validates and compiles it.
type EgressPolicy struct {
	Mode  string        `json:"mode"`
	Allow []EgressEntry `json:"allow,omitempty"`
	Deny  []string      `json:"deny,omitempty"`
}

// EgressEntry is one allow entry: a host pattern and, for a host name,
// optionally the rules its requests are held to. In JSON an entry without
// rules is the pattern alone ("pypi.org"), one with rules an object
// ({"host": "api.github.com", "methods": ["GET"], "paths":
// ["/repos/acme/"]}); both forms are read. A host with rules is
// intercepted (HTTPS terminated with the sandbox's CA, as for a secret's
// host) and a request whose method is not among Methods or whose path is
// under none of Paths is refused (rule-denied). Nil Methods or Paths: any;
// an empty list is refused.
type EgressEntry struct {
	// Host is the pattern (see EgressPolicy).
	Host string `json:"host"`
	// Methods are the HTTP methods allowed (nil: any).
	Methods []string `json:"methods,omitempty"`
	// Paths are the path prefixes allowed, each starting with '/', whole
	// segments, "*" standing for one segment (nil: any).
	Paths []string `json:"paths,omitempty"`
}

// EgressHosts returns an allow entry without rules per pattern.
func EgressHosts(patterns ...string) []EgressEntry {
	out := make([]EgressEntry, len(patterns))
	for i, p := range patterns {
		out[i] = EgressEntry{Host: p}
	}
	return out
}

// RuleHosts returns the host patterns of p's allow entries with methods or
// paths: the hosts the proxy intercepts whatever the secrets.
func (p EgressPolicy) RuleHosts() []string {
	var out []string
	for _, e := range p.Allow {
		if e.HasRules() {
			out = append(out, e.Host)
		}
	}
	return out
}

// HasRules reports whether e holds methods or paths.
func (e EgressEntry) HasRules() bool { return e.Methods != nil || e.Paths != nil }

// MarshalJSON writes an entry without rules as its pattern, one with rules
// as an object.
func (e EgressEntry) MarshalJSON() ([]byte, error) {
	if !e.HasRules() {
		return json.Marshal(e.Host)
	}
	type object EgressEntry
	return json.Marshal(object(e))
}

// UnmarshalJSON reads a pattern or an object with host, methods and paths
// (no other field).
func (e *EgressEntry) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		*e = EgressEntry{}
		return json.Unmarshal(b, &e.Host)
	}
	if len(b) == 0 || b[0] != '{' {
		return errors.New("an allow entry is a host pattern (\"pypi.org\") or an object {\"host\", \"methods\", \"paths\"}")
	}
	type object EgressEntry
	var o object
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&o); err != nil {
		return errors.New("an allow entry object has host, methods and paths only: " + err.Error())
	}
	*e = EgressEntry(o)
	return nil
}

// IsDefault reports whether p is public mode with no rules of its own (the
// zero value counts as that): the policy every pooled sandbox starts with.
func (p EgressPolicy) IsDefault() bool {
	return (p.Mode == "" || p.Mode == EgressPublic) && len(p.Allow) == 0 && len(p.Deny) == 0
}

// EgressAttachOptions are what the sandbox runtime tells the egress proxy
// when it attaches a sandbox (sandbox.EgressAttacher, implemented by
// egress.Proxy; both name it AttachOptions).
type EgressAttachOptions struct {
	// Policy is what the sandbox may reach (the zero value: public mode).
	Policy EgressPolicy
	// Secrets are the sandbox's credentials the proxy brokers (see
	// Secret); with any, CA must be set.
	Secrets []EgressSecret
	// CA is the sandbox's own CA (certificate and private key, in memory
	// only), which signs the certificates the proxy presents to the sandbox
	// for the hosts it intercepts.
	CA *tls.Certificate
	// Canary, when set, is the self-test's own upstream for its probe
	// sandbox (see EgressCanary); nil for every other sandbox.
	Canary *EgressCanary
}

// EgressCanary is the worker self-test's TLS canary: a server on the
// host's loopback that stands for Host, the probe secret's one host. The
// proxy reaches Host (port 443) through Dial only, never by the guard or
// DNS, and verifies its certificate against Roots only; it intercepts no
// other host for that sandbox. Only the self-test sets it, for its probe
// sandbox (sandbox.Options.EgressCanary needs SelfTest).
type EgressCanary struct {
	Host  string
	Dial  func(ctx context.Context) (net.Conn, error)
	Roots *x509.CertPool
}
