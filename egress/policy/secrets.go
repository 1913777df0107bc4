package policy

import (
	"fmt"
	"net/netip"
	"strings"
)

// SecretPort is the one port a secret is ever sent to: secrets are
// brokered over TLS only.
const SecretPort = 443

// SecretHosts compiles the host patterns of secret name: patterns as a
// policy's (see ParseRules) naming hosts, not addresses, on port 443 only.
// Errors: *Error naming secrets.NAME.hosts[i] and what to fix.
func SecretHosts(name string, hosts []string) (Rules, error) {
	field := "secrets." + name + ".hosts"
	if len(hosts) == 0 {
		return Rules{}, fail(field, "give the hosts the secret may be sent to, e.g. [\"api.example.com\"]")
	}
	for i, h := range hosts {
		host := h
		if strings.HasPrefix(host, "[") {
			host = strings.TrimPrefix(strings.SplitN(host, "]", 2)[0], "[")
		} else if j := strings.LastIndexByte(host, ':'); j >= 0 {
			host = host[:j]
		}
		if _, err := netip.ParseAddr(host); err == nil {
			return Rules{}, fail(fmt.Sprintf("%s[%d]", field, i),
				"%q is an address: a secret is for host names, whose certificates the proxy can check", clip(h))
		}
	}
	return ParseRules(field, hosts, Limits{Ports: []uint16{SecretPort}})
}

// AllowsSecretHosts checks that p lets a sandbox reach every host pattern
// of secret name on port 443 (a wildcard is checked with a name under it):
// a secret never widens a policy. Errors: *Error naming the host and what
// to fix.
func (p *Policy) AllowsSecretHosts(name string, hosts []string) error {
	for i, h := range hosts {
		host := h
		if j := strings.LastIndexByte(host, ':'); j >= 0 {
			host = host[:j]
		}
		host = strings.ToLower(host)
		if rest, ok := strings.CutPrefix(host, "*."); ok {
			host = "any." + rest
		}
		if ok, detail := p.Decide(host, SecretPort); !ok {
			return fail(fmt.Sprintf("secrets.%s.hosts[%d]", name, i),
				"%q is not allowed by the sandbox's egress policy (%s): allow it in egress, or remove it from the secret's hosts", clip(h), detail)
		}
	}
	return nil
}
