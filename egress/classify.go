package egress

import (
	"net/netip"

	"code.dny.dev/ssrf"
)

// special is one special-purpose range and the class it reports.
type special struct {
	prefix netip.Prefix
	class  string
}

// specials are the IANA special-purpose ranges named explicitly, most
// specific first, so that the verdict says why an address is refused.
// code.dny.dev/ssrf (generated from the same registries) is the second
// layer: an address passes only when neither refuses it.
var specials = func() []special {
	table := []struct{ prefix, class string }{
		// IPv4 (iana-ipv4-special-registry).
		{"0.0.0.0/8", "this-network"},
		{"10.0.0.0/8", "private"},
		{"100.64.0.0/10", "cgnat"},
		{"127.0.0.0/8", "loopback"},
		{"169.254.0.0/16", "link-local"}, // cloud metadata lives here
		{"172.16.0.0/12", "private"},
		{"192.0.0.0/24", "ietf-protocol"},
		{"192.0.2.0/24", "documentation"},
		{"192.31.196.0/24", "as112"},
		{"192.52.193.0/24", "amt"},
		{"192.88.99.0/24", "6to4-relay"},
		{"192.168.0.0/16", "private"},
		{"192.175.48.0/24", "as112"},
		{"198.18.0.0/15", "benchmarking"},
		{"198.51.100.0/24", "documentation"},
		{"203.0.113.0/24", "documentation"},
		{"224.0.0.0/4", "multicast"},
		{"240.0.0.0/4", "reserved"}, // 255.255.255.255 included
		// IPv6 (iana-ipv6-special-registry).
		{"::/128", "unspecified"},
		{"::1/128", "loopback"},
		{"::ffff:0:0/96", "ipv4-mapped"},
		{"::/96", "ipv4-compatible"},
		{"64:ff9b::/96", "nat64"},
		{"64:ff9b:1::/48", "nat64-local"},
		{"100::/64", "discard"},
		{"2001::/32", "teredo"},
		{"2001:2::/48", "benchmarking"},
		{"2001:db8::/32", "documentation"},
		{"2001::/23", "ietf-protocol"},
		{"2002::/16", "6to4"},
		{"2620:4f:8000::/48", "as112"},
		{"3fff::/20", "documentation"},
		{"5f00::/16", "srv6"},
		{"fc00::/7", "ula"},
		{"fe80::/10", "link-local"},
		{"fec0::/10", "site-local"},
		{"ff00::/8", "multicast"},
	}
	out := make([]special, len(table))
	for i, s := range table {
		out[i] = special{netip.MustParsePrefix(s.prefix), s.class}
	}
	return out
}()

// globalUnicast is the only IPv6 range handed out for the internet.
var globalUnicast = netip.MustParsePrefix("2000::/3")

// library is the ssrf guardian used as the second layer of classification;
// it is immutable and safe for concurrent use.
var library = ssrf.New(ssrf.WithAnyPort())

// classify returns the class of a non-public address, or "" when a is a
// public unicast address. It never unmaps: an IPv4-mapped address is refused
// as such (callers unmap resolver answers first, see Guard.resolve).
func classify(a netip.Addr) string {
	if !a.IsValid() {
		return "invalid"
	}
	if a.Zone() != "" {
		return "zoned"
	}
	for _, s := range specials {
		if s.prefix.Contains(a) {
			return s.class
		}
	}
	network := "tcp4"
	if a.Is6() {
		if !globalUnicast.Contains(a) {
			return "not-global-unicast"
		}
		network = "tcp6"
	}
	if library.Safe(network, netip.AddrPortFrom(a, 443).String(), nil) != nil {
		return "special-purpose"
	}
	return ""
}
