// Package egress is the worker's side of the way out of the sandboxes: a
// guard that allows only public addresses on ports 80 and 443, a dialer that
// connects to exactly the address the guard checked (and re-checks it at
// connect time), and a proxy (HTTP absolute-form and CONNECT) served on one
// unix socket per sandbox. The in-sandbox half, which exposes that socket
// inside, is package inside/bridge.
//
// Every decision is a Verdict: a value with a short, stable reason.
package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"openvibe.network/agentsandbox"
	"openvibe.network/agentsandbox/egress/policy"
)

// Reasons of a Verdict, and of the proxy's answers. They are stable: logs,
// metrics and the X-Egress-Refused header carry them.
const (
	ReasonOK           = "ok"                 // allowed
	ReasonPort         = "port-not-allowed"   // port outside the allow-list
	ReasonBadPort      = "bad-port"           // missing or non-canonical port
	ReasonNotCanonical = "not-canonical-host" // host is not in canonical form
	ReasonPrivate      = "private-address"    // an address is not public
	ReasonSelf         = "proxy-self"         // an address is the proxy's own
	ReasonHostSelf     = "host-self"          // an address is the host's own
	ReasonPolicy       = "policy-denied"      // the sandbox's policy refuses the name
	ReasonSNI          = "sni-mismatch"       // the TLS SNI is absent or not the checked name
	ReasonHostHeader   = "host-mismatch"      // the Host header is not the checked name
	ReasonResolve      = "resolve-failed"     // the name did not resolve
	ReasonDialFailed   = "dial-failed"        // the checked address refused
	ReasonDialTimeout  = "dial-timeout"       // the checked address did not answer
	ReasonBadRequest   = "bad-request"        // not a proxy request
	ReasonConnLimit    = "conn-limit"         // sandbox has too many connections
	ReasonUpstream     = "upstream-failed"    // the upstream answer was broken
	ReasonRuleDenied   = "rule-denied"        // outside the methods and paths of the host's allow entry
	// ReasonHeaderTooLarge: a request's line and header are over
	// MaxHeaderBytes (answered 431).
	ReasonHeaderTooLarge = "header-too-large"
)

// ReasonRefused is what the sandbox is told instead of the reasons that
// would say what a destination's addresses are (ReasonPrivate,
// ReasonHostSelf, ReasonSelf by address, ReasonResolve): a name that
// exists but is private and one that does not exist get the same answer,
// so the proxy is no oracle on the host's DNS. Logs and metrics keep the
// precise reason.
const ReasonRefused = "refused"

// Resolver resolves a name to addresses; *net.Resolver implements it.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// GuardConfig configures a Guard.
type GuardConfig struct {
	// Ports are the allowed destination ports (default agentsandbox.EgressPorts:
	// exactly 80 and 443).
	Ports []uint16
	// Resolver resolves names, once per check. Nil: names are refused with
	// ReasonResolve (only literals pass); production passes net.DefaultResolver.
	Resolver Resolver
	// Self are the proxy's own addresses (the worker's listeners); a
	// destination inside them is refused with ReasonSelf.
	Self []netip.Prefix
	// Host holds the host's own addresses (every interface's, refreshed as
	// they change, and those of the Live URLs the worker checks in with); a
	// destination among them is refused with ReasonHostSelf. Nil: none
	// (production passes one, see NewHostAddrs).
	Host *HostAddrs
	// Deny is the operator's deny list, which every sandbox inherits
	// whatever its own policy (see policy.ParseRules); a match is refused
	// with ReasonPolicy before any lookup.
	Deny policy.Rules
}

// Guard decides whether a destination may be reached. It is immutable and
// safe for concurrent use.
type Guard struct {
	ports    []uint16
	resolver Resolver
	self     []netip.Prefix
	host     *HostAddrs
	deny     policy.Rules
}

// Verdict is the guard's decision on one destination.
type Verdict struct {
	Allowed bool `json:"allowed"`
	// Reason is one of the Reason constants.
	Reason string `json:"reason"`
	// Detail says which part of the destination decided, for logs.
	Detail string `json:"detail,omitempty"`
	// Addresses are the checked addresses (a literal, or every answer of the
	// one resolution); the dialer connects only to these.
	Addresses []netip.Addr `json:"addresses"`
	// Host and Port are the destination as parsed.
	Host string `json:"-"`
	Port uint16 `json:"-"`
}

// NewGuard returns a Guard for cfg.
func NewGuard(cfg GuardConfig) *Guard {
	ports := slices.Clone(cfg.Ports)
	if len(ports) == 0 {
		ports = agentsandbox.EgressPorts()
	}
	return &Guard{ports: ports, resolver: cfg.Resolver, self: slices.Clone(cfg.Self), host: cfg.Host, deny: cfg.Deny}
}

// Ports are the allowed destination ports. The slice is the caller's own.
func (g *Guard) Ports() []uint16 { return slices.Clone(g.ports) }

// Named reports whether destinations of a sandbox with policy pol (nil:
// public) are decided by name: its policy names some, or the operator's
// deny list does. Then what a client says it reaches must be the checked
// name (see MatchSNI and the proxy's Host check).
func (g *Guard) Named(pol *policy.Policy) bool {
	return g.deny.Len() > 0 || pol != nil && pol.Named()
}

func refuse(reason, format string, args ...any) Verdict {
	return Verdict{Reason: reason, Detail: fmt.Sprintf(format, args...)}
}

// Check decides on hostport ("host:port", "[v6]:port") for a sandbox in
// public mode: see CheckPolicy.
func (g *Guard) Check(ctx context.Context, hostport string) Verdict {
	return g.CheckPolicy(ctx, hostport, nil)
}

// CheckPolicy decides on hostport for a sandbox whose policy is pol (nil:
// public mode). In order: the host must be canonical and the port allowed;
// the operator's deny list and pol must let the name (or literal) through,
// asked before any lookup, so a refused name never reaches a resolver;
// then the name is resolved once, every answer must be outside the deny
// entries that are addresses or ranges (the operator's and pol's), and
// every address (the literal, or every answer) must be public and neither
// the proxy's nor the host's own. It never connects.
func (g *Guard) CheckPolicy(ctx context.Context, hostport string, pol *policy.Policy) Verdict {
	host, port, v := splitHostPort(hostport)
	if v.Reason != "" {
		return v
	}
	return g.CheckHost(ctx, host, port, pol)
}

// CheckHost is CheckPolicy for a host and a port given apart (host without
// brackets). Names are compared and resolved in lower case.
func (g *Guard) CheckHost(ctx context.Context, host string, port uint16, pol *policy.Policy) Verdict {
	host = strings.ToLower(host)
	v := g.checkHost(ctx, host, port, pol)
	v.Host, v.Port = host, port
	return v
}

func (g *Guard) checkHost(ctx context.Context, host string, port uint16, pol *policy.Policy) Verdict {
	literal, isLiteral, v := parseHost(host)
	if v.Reason != "" {
		return v
	}
	if !slices.Contains(g.ports, port) {
		return refuse(ReasonPort, "port %d is not in %v", port, g.ports)
	}
	if pat, denied := g.deny.Match(host, port); denied {
		return refuse(ReasonPolicy, "%s:%d matches the worker's deny entry %q", host, port, pat)
	}
	if pol != nil {
		if ok, detail := pol.Decide(host, port); !ok {
			return refuse(ReasonPolicy, "%s", detail)
		}
	}
	addrs := []netip.Addr{literal}
	if !isLiteral {
		var err error
		if addrs, err = g.resolve(ctx, host); err != nil {
			return refuse(ReasonResolve, "%s: %v", host, err)
		}
	}
	if !isLiteral {
		if v := g.checkAnswers(host, addrs, port, pol); v.Reason != "" {
			return v
		}
	}
	for _, a := range addrs {
		if v := g.CheckAddr(a); !v.Allowed {
			v.Addresses = addrs
			return v
		}
	}
	return Verdict{Allowed: true, Reason: ReasonOK, Addresses: addrs}
}

// checkAnswers holds every address host resolved to against the deny
// entries that are addresses or ranges, the operator's and pol's: a denied
// address is refused under every name, with ReasonPolicy and the address
// in Detail. It returns the zero Verdict when none matches.
func (g *Guard) checkAnswers(host string, addrs []netip.Addr, port uint16, pol *policy.Policy) Verdict {
	for _, a := range addrs {
		if pat, denied := g.deny.MatchAddr(a, port); denied {
			v := refuse(ReasonPolicy, "%s resolves to %s, which matches the worker's deny entry %q", host, a, pat)
			v.Addresses = addrs
			return v
		}
		if pol == nil {
			continue
		}
		if ok, detail := pol.DecideAddr(host, a, port); !ok {
			v := refuse(ReasonPolicy, "%s", detail)
			v.Addresses = addrs
			return v
		}
	}
	return Verdict{}
}

// CheckAddr classifies one address: refused when it is the proxy's own
// (ReasonSelf), the host's own (ReasonHostSelf) or not public
// (ReasonPrivate, the class in Detail).
func (g *Guard) CheckAddr(a netip.Addr) Verdict {
	for _, p := range g.self {
		if p.Contains(a) || p.Contains(a.Unmap()) {
			return Verdict{Reason: ReasonSelf, Detail: a.String() + " is the proxy's own address",
				Addresses: []netip.Addr{a}}
		}
	}
	if g.host.Contains(a) || g.host.Contains(a.Unmap()) {
		return Verdict{Reason: ReasonHostSelf, Detail: a.String() + " is the host's own address",
			Addresses: []netip.Addr{a}}
	}
	if class := classify(a); class != "" {
		return Verdict{Reason: ReasonPrivate, Detail: a.String() + " is " + class, Addresses: []netip.Addr{a}}
	}
	return Verdict{Allowed: true, Reason: ReasonOK, Addresses: []netip.Addr{a}}
}

// resolve looks host up once. Answers are unmapped: Go's resolver reports A
// records as IPv4-mapped IPv6 addresses, and what is dialed is the IPv4
// address either way.
func (g *Guard) resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	if g.resolver == nil {
		return nil, errors.New("no resolver configured")
	}
	addrs, err := g.resolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, err
	}
	if len(addrs) == 0 {
		return nil, errors.New("no addresses")
	}
	out := make([]netip.Addr, len(addrs))
	for i, a := range addrs {
		out[i] = a.Unmap()
	}
	return out, nil
}

// splitHostPort splits a strict "host:port"; on failure the Verdict says why.
func splitHostPort(hostport string) (string, uint16, Verdict) {
	host, ps, err := net.SplitHostPort(hostport)
	if err != nil {
		return "", 0, refuse(ReasonBadPort, "%q: %v", hostport, err)
	}
	port, v := parsePort(ps)
	if v.Reason != "" {
		return "", 0, v
	}
	if strings.HasPrefix(hostport, "[") && !strings.Contains(host, ":") {
		return "", 0, refuse(ReasonNotCanonical, "%q: brackets around a non-IPv6 host", hostport)
	}
	return host, port, Verdict{}
}

// parsePort accepts only 1-65535 in plain decimal without leading zeros.
func parsePort(s string) (uint16, Verdict) {
	n, err := strconv.ParseUint(s, 10, 16)
	if err != nil || n == 0 || strconv.FormatUint(n, 10) != s {
		return 0, refuse(ReasonBadPort, "port %q is not canonical decimal 1-65535", s)
	}
	return uint16(n), Verdict{}
}
