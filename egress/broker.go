package egress

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"

	"openvibe.network/agentsandbox"
	"openvibe.network/agentsandbox/egress/policy"
	"openvibe.network/agentsandbox/internal/brokerca"
	"openvibe.network/agentsandbox/internal/metrics"
)

// Reasons of the credential broker (see broker).
const (
	// ReasonSecretHost: a request carries a secret's placeholder to a host
	// the secret is not for (or over plain HTTP, where nothing is ever
	// substituted).
	ReasonSecretHost = "secret-host-mismatch"
	// ReasonUpstreamCert: an intercepted host's certificate did not verify
	// against the worker's trust store (plus --egress-upstream-ca-file).
	ReasonUpstreamCert = "upstream-certificate"
)

// brokerPort is the one port the broker intercepts: secrets are only ever
// sent over TLS.
const brokerPort = policy.SecretPort

// MetricSecrets counts the broker's decisions on requests that carry a
// placeholder.
const MetricSecrets = "codes_sandbox_egress_secret_requests_total"

func newSecretsCounter(reg *metrics.Registry) *metrics.CounterVec {
	return reg.NewCounterVec(MetricSecrets,
		"Requests carrying a secret's placeholder, by outcome: substituted (sent to one of the secret's hosts with the value) or refused (secret-host-mismatch).",
		"outcome")
}

// broker is the credential broker of one sandbox: its secrets, and the
// CA that signs the certificates the proxy presents to the sandbox for the
// hosts it intercepts (on port 443: those of its secrets, and those whose
// allow entry has methods or paths, see policy.Policy.CheckRequest).
// Every other destination stays a blind tunnel.
type broker struct {
	// secrets are replaced whole by UpdateSecrets (a rotation takes effect
	// at the next request); each list is never changed once stored.
	secrets atomic.Pointer[[]brokerSecret]
	minter  *brokerca.Minter
	// canary is the self-test's upstream (AttachOptions.Canary; nil for
	// every other sandbox): its host is reached through its dial hook and
	// verified against its roots only.
	canary *agentsandbox.EgressCanary
	pol    *policy.Policy
}

// brokerSecret is one secret, its hosts compiled.
type brokerSecret struct {
	name, placeholder, value string
	hosts                    policy.Rules
}

// newBroker compiles opts' secrets for a sandbox under pol (its compiled
// policy); nil when it has no secrets and pol no methods or paths.
func newBroker(opts AttachOptions, pol *policy.Policy) (*broker, error) {
	if len(opts.Secrets) == 0 && !pol.HasHTTPRules() {
		return nil, nil
	}
	if opts.CA == nil {
		return nil, errors.New("secrets or methods and paths without a CA")
	}
	m, err := brokerca.NewMinter(*opts.CA, nil)
	if err != nil {
		return nil, err
	}
	if c := opts.Canary; c != nil && (c.Host == "" || c.Dial == nil || c.Roots == nil) {
		return nil, errors.New("a canary without its host, dial hook or roots")
	}
	b := &broker{minter: m, canary: opts.Canary, pol: pol}
	secrets, err := compileSecrets(opts.Secrets)
	if err != nil {
		return nil, err
	}
	b.secrets.Store(&secrets)
	return b, nil
}

// compileSecrets compiles secrets' hosts and checks their placeholders.
func compileSecrets(secrets []agentsandbox.EgressSecret) ([]brokerSecret, error) {
	var out []brokerSecret
	for _, s := range secrets {
		r, err := policy.SecretHosts(s.Name, s.Hosts)
		if err != nil {
			return nil, err
		}
		if !strings.HasPrefix(s.Placeholder, agentsandbox.SecretPlaceholderPrefix) || s.Value == "" {
			return nil, fmt.Errorf("secret %s: no placeholder or no value", s.Name)
		}
		out = append(out, brokerSecret{name: s.Name, placeholder: s.Placeholder, value: s.Value, hosts: r})
	}
	return out, nil
}

// UpdateSecrets replaces the secrets the proxy brokers for sandbox id
// with secrets (every one of them: those kept, rotated and added): from
// the next request on, a placeholder is replaced by its secret's value
// in secrets. Errors: no such sandbox attached; a sandbox attached
// without a CA (it had no secrets and no methods or paths: nothing of it
// is intercepted); a secret without placeholder or value, or with bad
// hosts. Nothing of a value is in an error.
func (p *Proxy) UpdateSecrets(id string, secrets []agentsandbox.EgressSecret) error {
	p.mu.Lock()
	var a *attachment
	for x := range p.attached {
		if x.id == id {
			a = x
		}
	}
	p.mu.Unlock()
	var br *broker
	if a != nil {
		a.mu.Lock()
		br = a.broker
		a.mu.Unlock()
	}
	switch {
	case a == nil || a.ctx.Err() != nil:
		return fmt.Errorf("update secrets of %s: not attached", id)
	case br == nil:
		return fmt.Errorf("update secrets of %s: the sandbox was attached without secrets or methods and paths, so it has no CA", id)
	}
	compiled, err := compileSecrets(secrets)
	if err != nil {
		return fmt.Errorf("update secrets of %s: %w", id, err)
	}
	br.secrets.Store(&compiled)
	return nil
}

// isCanary reports whether host is the self-test's canary.
func (b *broker) isCanary(host string) bool {
	return b != nil && b.canary != nil && host == strings.ToLower(b.canary.Host)
}

// intercepts reports whether a CONNECT to host:port is intercepted: some
// secret is for it, or its requests are held to methods and paths.
func (b *broker) intercepts(host string, port uint16) bool {
	if b == nil || port != brokerPort {
		return false
	}
	if b.pol.HTTPRulesFor(host, port) {
		return true
	}
	for _, s := range *b.secrets.Load() {
		if _, ok := s.hosts.Match(host, port); ok {
			return true
		}
	}
	return false
}

// substitute decides on a request to host:port (port 443 over TLS
// intercepted by the proxy; any other is plain HTTP or a tunnel the proxy
// reads) whose header is h and whose request target is target, and puts
// each secret's value in place of its placeholder in h's values (and in
// the user and password of Basic credentials) when host:port is one of
// the secret's. It returns the name of a secret whose placeholder the
// request carries to a host the secret is not for (looked for in every
// header value and the target, in any case, percent-decoded, and in
// decoded Basic credentials): the request must then be refused, and h is
// left as it was. used lists the secrets substituted. Nothing is
// substituted in the target or a body.
func (b *broker) substitute(host string, port uint16, tls bool, h http.Header, target string) (refused string, used []string) {
	if b == nil {
		return "", nil
	}
	var mine []*brokerSecret
	secrets := *b.secrets.Load()
	for i := range secrets {
		s := &secrets[i]
		_, ok := s.hosts.Match(host, port)
		ok = ok && tls && port == brokerPort
		if !carries(s.placeholder, h, target) {
			continue
		}
		if !ok {
			return s.name, nil
		}
		mine = append(mine, s)
	}
	for _, s := range mine {
		for _, k := range slices.Sorted(maps.Keys(h)) {
			vs := h[k]
			for i, v := range vs {
				if k == "Authorization" {
					v = replaceBasic(v, s.placeholder, s.value)
				}
				vs[i] = strings.ReplaceAll(v, s.placeholder, s.value)
			}
		}
		used = append(used, s.name)
	}
	return "", used
}

// carries reports whether a request with header h and target carries ph:
// in a value, in any case, percent-decoded or in decoded Basic
// credentials.
func carries(ph string, h http.Header, target string) bool {
	if containsFold(target, ph) {
		return true
	}
	for k, vs := range h {
		if containsFold(k, ph) {
			return true
		}
		for _, v := range vs {
			if containsFold(v, ph) {
				return true
			}
			if user, pass, ok := basicCredentials(v); ok && (containsFold(user, ph) || containsFold(pass, ph)) {
				return true
			}
		}
	}
	return false
}

// containsFold reports whether s holds ph in any case, as it is or
// percent-decoded (once or twice).
func containsFold(s, ph string) bool {
	for range 3 {
		if strings.Contains(strings.ToLower(s), ph) {
			return true
		}
		d, err := url.PathUnescape(s)
		if err != nil || d == s {
			return false
		}
		s = d
	}
	return false
}

// basicCredentials decodes the credentials of a Basic authorization value.
func basicCredentials(v string) (user, pass string, ok bool) {
	scheme, enc, found := strings.Cut(strings.TrimSpace(v), " ")
	if !found || !strings.EqualFold(scheme, "Basic") {
		return "", "", false
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(enc))
	if err != nil {
		return "", "", false
	}
	user, pass, ok = strings.Cut(string(raw), ":")
	return user, pass, ok
}

// replaceBasic puts value in place of ph in the user and password of a
// Basic authorization value v; any other v is returned as it is.
func replaceBasic(v, ph, value string) string {
	user, pass, ok := basicCredentials(v)
	if !ok || !strings.Contains(user+":"+pass, ph) {
		return v
	}
	cred := strings.ReplaceAll(user, ph, value) + ":" + strings.ReplaceAll(pass, ph, value)
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(cred))
}

// certProblem says, for an error of the TLS client toward an intercepted
// host, what is wrong with its certificate ("" when the error is not
// about the certificate).
func certProblem(err error) string {
	var (
		unknown   x509.UnknownAuthorityError
		hostname  x509.HostnameError
		invalid   x509.CertificateInvalidError
		verifyErr *tls.CertificateVerificationError
	)
	switch {
	case errors.As(err, &hostname):
		return "the certificate is not for this name: " + hostname.Error()
	case errors.As(err, &unknown):
		return "the certificate is signed by an authority the worker does not trust (add it with --egress-upstream-ca-file if it is yours): " + unknown.Error()
	case errors.As(err, &invalid):
		return "the certificate is not valid: " + invalid.Error()
	case errors.As(err, &verifyErr):
		return "the certificate did not verify: " + verifyErr.Error()
	}
	return ""
}

// rulesOK refuses (answering the client, and false) a plain HTTP request
// to target whose method or path is outside the methods and paths of its
// host's allow entry (see policy.Policy.CheckRequest).
func (p *Proxy) rulesOK(a *attachment, c net.Conn, req *http.Request, target string, rec *record) bool {
	if !a.policy.HasHTTPRules() {
		return true
	}
	h, port, v := splitHostPort(target)
	if v.Reason != "" {
		return true // refused later, for its own reason
	}
	path := req.URL.EscapedPath()
	if path == "" {
		path = "/"
	}
	host := strings.ToLower(h)
	if ok, detail := a.policy.CheckRequest(host, port, req.Method, path); !ok {
		rec.host, rec.port = host, port
		p.answer(c, rec, ReasonRuleDenied, detail)
		return false
	}
	return true
}

// plainSecretsOK refuses (answering the client, and false) a plain HTTP
// request to target that carries a placeholder of the sandbox's secrets:
// a value is only ever put in over TLS to the secret's hosts, and the
// placeholder goes nowhere else.
func (p *Proxy) plainSecretsOK(a *attachment, c net.Conn, req *http.Request, target string, rec *record) bool {
	if a.broker == nil {
		return true
	}
	h, port, v := splitHostPort(target)
	if v.Reason != "" {
		return true // refused later, for its own reason
	}
	name, _ := a.broker.substitute(strings.ToLower(h), port, false, req.Header, req.RequestURI)
	if name == "" {
		return true
	}
	p.secrets.With("refused").Inc()
	rec.host, rec.port = strings.ToLower(h), port
	p.answer(c, rec, ReasonSecretHost, fmt.Sprintf("the placeholder of secret %s sent to %s:%d over plain HTTP (a secret is only ever sent over HTTPS to its hosts)", name, rec.host, port))
	return false
}
