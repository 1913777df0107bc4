package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"time"

	"openvibe.network/agentsandbox"
	"openvibe.network/agentsandbox/egress"
)

// listFlag is a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// egressResolver is the resolver the guard asks: addr's DNS server (a
// literal host:port, e.g. a public recursive resolver instead of the
// host's internal one), or the system's when addr is empty. A lookup's
// error names the server asked (Go's would name the system's). Errors:
// addr is not a literal address and port (the caller names its flag).
func egressResolver(addr string) (egress.Resolver, error) {
	if addr == "" {
		return net.DefaultResolver, nil
	}
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return nil, fmt.Errorf("%q: want an IP address and port, e.g. 9.9.9.9:53 or [2620:fe::fe]:53", addr)
	}
	server := ap.String()
	return askedResolver{server: server, r: &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, server)
	}}}, nil
}

// askedResolver resolves with r, which asks server alone, and makes a
// failed lookup's error name server: net.Resolver's names the system's
// nameserver it meant to dial, not the one its Dial really asked.
type askedResolver struct {
	r      *net.Resolver
	server string
}

// LookupNetIP implements egress.Resolver.
func (a askedResolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	addrs, err := a.r.LookupNetIP(ctx, network, host)
	if dnsErr, ok := err.(*net.DNSError); ok {
		named := *dnsErr
		named.Server = a.server
		return addrs, &named
	}
	return addrs, err
}

// egressDefault parses --egress-default. Errors: neither none nor public.
func egressDefault(mode string) (agentsandbox.EgressPolicy, error) {
	switch mode {
	case "", agentsandbox.EgressPublic:
		return agentsandbox.EgressPolicy{Mode: agentsandbox.EgressPublic}, nil
	case agentsandbox.EgressNone:
		return agentsandbox.EgressPolicy{Mode: agentsandbox.EgressNone}, nil
	}
	return agentsandbox.EgressPolicy{}, fmt.Errorf("--egress-default %q: give none or public (an allow list is per sandbox)", mode)
}

// listenerPrefixes are the addresses the worker listens on, for the guard's
// proxy-self set; an unspecified address (0.0.0.0, ::) adds nothing of its
// own (every interface address is refused as the host's).
func listenerPrefixes(addrs ...net.Addr) []netip.Prefix {
	var out []netip.Prefix
	for _, a := range addrs {
		ta, ok := a.(*net.TCPAddr)
		if !ok {
			continue
		}
		ip := ta.AddrPort().Addr().Unmap()
		if ip.IsValid() && !ip.IsUnspecified() {
			out = append(out, netip.PrefixFrom(ip, ip.BitLen()))
		}
	}
	return out
}

// liveRefresh is how often the addresses of the Live URLs are looked up
// again for the guard's host set.
const liveRefresh = time.Minute

// liveAddrs keeps the addresses of the Live URLs the worker checks in with,
// for egress.HostAddrsConfig.Extra: a sandbox must not reach them through
// the proxy (they are the worker's own infrastructure). Names are looked up
// with the system resolver (the one the check-in uses), in the background
// so that a refresh never waits on DNS. Safe for concurrent use.
type liveAddrs struct {
	hosts    []string
	resolver egress.Resolver
	log      *slog.Logger

	mu         sync.Mutex
	cache      map[string][]netip.Prefix // by host
	last       time.Time
	refreshing bool
}

// newLiveAddrs returns the addresses of urls' hosts (literals at once,
// names once looked up).
func newLiveAddrs(urls []string, r egress.Resolver, log *slog.Logger) *liveAddrs {
	l := &liveAddrs{resolver: r, log: log, cache: map[string][]netip.Prefix{}}
	seen := map[string]bool{}
	for _, u := range urls {
		p, err := url.Parse(u)
		if err != nil || p.Hostname() == "" || seen[p.Hostname()] {
			continue
		}
		seen[p.Hostname()] = true
		if a, err := netip.ParseAddr(p.Hostname()); err == nil {
			a = a.Unmap()
			l.cache[p.Hostname()] = []netip.Prefix{netip.PrefixFrom(a, a.BitLen())}
			continue
		}
		l.hosts = append(l.hosts, p.Hostname())
	}
	return l
}

// prefixes returns the known addresses and starts a lookup of the names
// when the last is older than liveRefresh.
func (l *liveAddrs) prefixes(context.Context) []netip.Prefix {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.hosts) > 0 && !l.refreshing && time.Since(l.last) >= liveRefresh {
		l.refreshing = true
		go l.refresh()
	}
	var out []netip.Prefix
	for _, ps := range l.cache {
		out = append(out, ps...)
	}
	return out
}

// refresh looks every name up once; a failed lookup keeps what it had.
func (l *liveAddrs) refresh() {
	got := map[string][]netip.Prefix{}
	for _, h := range l.hosts {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		as, err := l.resolver.LookupNetIP(ctx, "ip", h)
		cancel()
		if err != nil {
			l.log.Warn("look up a Live URL's addresses for the egress guard", "host", h, "err", err)
			continue
		}
		for _, a := range as {
			a = a.Unmap()
			got[h] = append(got[h], netip.PrefixFrom(a, a.BitLen()))
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for h, ps := range got {
		l.cache[h] = ps
	}
	l.last, l.refreshing = time.Now(), false
}
