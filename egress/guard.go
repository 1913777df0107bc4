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
	ReasonResolve      = "resolve-failed"     // the name did not resolve
	ReasonDialFailed   = "dial-failed"        // the checked address refused
	ReasonDialTimeout  = "dial-timeout"       // the checked address did not answer
	ReasonBadRequest   = "bad-request"        // not a proxy request
	ReasonConnLimit    = "conn-limit"         // sandbox has too many connections
	ReasonUpstream     = "upstream-failed"    // the upstream answer was broken
)

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
	// Self are the proxy's own addresses (the worker's interfaces, see
	// InterfacePrefixes); a destination inside them is refused with ReasonSelf.
	Self []netip.Prefix
}

// Guard decides whether a destination may be reached. It is immutable and
// safe for concurrent use.
type Guard struct {
	ports    []uint16
	resolver Resolver
	self     []netip.Prefix
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
	return &Guard{ports: ports, resolver: cfg.Resolver, self: slices.Clone(cfg.Self)}
}

func refuse(reason, format string, args ...any) Verdict {
	return Verdict{Reason: reason, Detail: fmt.Sprintf(format, args...)}
}

// Check decides on hostport ("host:port", "[v6]:port"): the port must be
// allowed, the host canonical, and every address of the host (the literal,
// or every answer of one resolution) public and not the proxy's own. It never
// connects; it resolves at most once, and only after the port passed.
func (g *Guard) Check(ctx context.Context, hostport string) Verdict {
	host, port, v := splitHostPort(hostport)
	if v.Reason != "" {
		return v
	}
	return g.CheckHost(ctx, host, port)
}

// CheckHost is Check for a host and a port given apart (host without
// brackets). Names are compared and resolved in lower case.
func (g *Guard) CheckHost(ctx context.Context, host string, port uint16) Verdict {
	host = strings.ToLower(host)
	if !slices.Contains(g.ports, port) {
		v := refuse(ReasonPort, "port %d is not in %v", port, g.ports)
		v.Host, v.Port = host, port
		return v
	}
	v := g.checkHost(ctx, host)
	v.Host, v.Port = host, port
	return v
}

func (g *Guard) checkHost(ctx context.Context, host string) Verdict {
	literal, isLiteral, v := parseHost(host)
	if v.Reason != "" {
		return v
	}
	addrs := []netip.Addr{literal}
	if !isLiteral {
		var err error
		if addrs, err = g.resolve(ctx, host); err != nil {
			return refuse(ReasonResolve, "%s: %v", host, err)
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

// CheckAddr classifies one address: refused when it is the proxy's own
// (ReasonSelf) or not public (ReasonPrivate, the class in Detail).
func (g *Guard) CheckAddr(a netip.Addr) Verdict {
	for _, p := range g.self {
		if p.Contains(a) || p.Contains(a.Unmap()) {
			return Verdict{Reason: ReasonSelf, Detail: a.String() + " is the proxy's own address",
				Addresses: []netip.Addr{a}}
		}
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

// InterfacePrefixes returns every address of this machine's interfaces as a
// single-address prefix, for GuardConfig.Self. Errors: the interface
// addresses cannot be listed.
func InterfacePrefixes() ([]netip.Prefix, error) {
	as, err := net.InterfaceAddrs()
	if err != nil {
		return nil, fmt.Errorf("interface addresses: %w", err)
	}
	var out []netip.Prefix
	for _, a := range as {
		ipn, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		if addr, ok := netip.AddrFromSlice(ipn.IP); ok {
			addr = addr.Unmap()
			out = append(out, netip.PrefixFrom(addr, addr.BitLen()))
		}
	}
	return out, nil
}
