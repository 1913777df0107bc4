package egress

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"slices"
	"sync"
	"testing"
)

// Test addresses. Only loopback is ever connected to: "public" addresses
// are served by loopback listeners through ProxyConfig.TestDial.
var (
	publicV4 = netip.MustParseAddr("93.184.216.34")
	publicV6 = netip.MustParseAddr("2606:4700:4700::1111")
	selfV4   = netip.MustParseAddr("93.184.216.100")
)

// fakeResolver answers from a table, one answer list per successive call of
// a name (the last repeats), and counts the calls. It never resolves for real.
type fakeResolver struct {
	mu      sync.Mutex
	answers map[string][][]netip.Addr
	calls   map[string]int
}

func newFakeResolver(answers map[string][][]netip.Addr) *fakeResolver {
	return &fakeResolver{answers: answers, calls: map[string]int{}}
}

func (r *fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	seq, ok := r.answers[host]
	n := r.calls[host]
	r.calls[host]++
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return seq[min(n, len(seq)-1)], nil
}

func (r *fakeResolver) count(host string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls[host]
}

func addrs(ss ...string) []netip.Addr {
	out := make([]netip.Addr, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParseAddr(s)
	}
	return out
}

// testResolver knows the names the tests use.
func testResolver() *fakeResolver {
	return newFakeResolver(map[string][][]netip.Addr{
		"public.test":        {addrs("93.184.216.34")},
		"public6.test":       {addrs("2606:4700:4700::1111")},
		"private.test":       {addrs("10.0.0.1")},
		"mixed.test":         {addrs("93.184.216.34", "10.0.0.1")},
		"mapped.test":        {addrs("::ffff:10.0.0.1")},
		"mapped-public.test": {addrs("::ffff:93.184.216.34")},
		"metadata.test":      {addrs("169.254.169.254")},
		"self.test":          {addrs("93.184.216.100")},
		"empty.test":         {{}},
		"flip.test":          {addrs("93.184.216.34"), addrs("127.0.0.1")},
	})
}

func testGuard(r Resolver) *Guard {
	return NewGuard(GuardConfig{Resolver: r, Self: []netip.Prefix{netip.PrefixFrom(selfV4, 32)}})
}

func TestGuardCheck(t *testing.T) {
	for _, tc := range []struct {
		name, target, reason string
	}{
		{"PublicV4", "93.184.216.34:443", ReasonOK},
		{"PublicV4Port80", "93.184.216.34:80", ReasonOK},
		{"PublicV6", "[2606:4700:4700::1111]:443", ReasonOK},
		{"PublicName", "public.test:443", ReasonOK},
		{"PublicNameUpperCase", "PUBLIC.test:443", ReasonOK},
		{"PublicNameV6", "public6.test:80", ReasonOK},
		{"MappedAnswerOfPublicIsUnmapped", "mapped-public.test:443", ReasonOK},
		// Ports.
		{"Port22", "93.184.216.34:22", ReasonPort},
		{"Port8080", "public.test:8080", ReasonPort},
		{"PortLeadingZero", "93.184.216.34:0443", ReasonBadPort},
		{"PortMissing", "93.184.216.34", ReasonBadPort},
		{"PortEmpty", "93.184.216.34:", ReasonBadPort},
		{"PortTooBig", "93.184.216.34:65979", ReasonBadPort},
		{"PortZero", "93.184.216.34:0", ReasonBadPort},
		{"PortSign", "93.184.216.34:+443", ReasonBadPort},
		// IPv4 special-purpose ranges.
		{"Loopback", "127.0.0.1:80", ReasonPrivate},
		{"LoopbackOther", "127.77.0.1:80", ReasonPrivate},
		{"ThisNetwork", "0.0.0.0:80", ReasonPrivate},
		{"RFC1918_10", "10.0.0.1:80", ReasonPrivate},
		{"RFC1918_172", "172.16.0.1:443", ReasonPrivate},
		{"RFC1918_192", "192.168.1.1:443", ReasonPrivate},
		{"LinkLocalMetadata", "169.254.169.254:80", ReasonPrivate},
		{"CGNAT", "100.64.0.1:80", ReasonPrivate},
		{"CGNATAlibabaMetadata", "100.100.100.200:80", ReasonPrivate},
		{"IETFProtocol", "192.0.0.170:80", ReasonPrivate},
		{"Documentation1", "192.0.2.1:80", ReasonPrivate},
		{"Documentation2", "198.51.100.1:80", ReasonPrivate},
		{"Documentation3", "203.0.113.1:80", ReasonPrivate},
		{"Benchmarking", "198.19.255.1:80", ReasonPrivate},
		{"SixToFourRelay", "192.88.99.1:80", ReasonPrivate},
		{"Multicast", "224.0.0.1:80", ReasonPrivate},
		{"Reserved", "240.0.0.1:80", ReasonPrivate},
		{"Broadcast", "255.255.255.255:80", ReasonPrivate},
		// IPv6 special-purpose ranges.
		{"V6Loopback", "[::1]:443", ReasonPrivate},
		{"V6Unspecified", "[::]:443", ReasonPrivate},
		{"V4Mapped", "[::ffff:127.0.0.1]:443", ReasonPrivate},
		{"V4MappedPublic", "[::ffff:93.184.216.34]:443", ReasonPrivate},
		{"V4MappedHex", "[::ffff:7f00:1]:443", ReasonPrivate},
		{"V4Compatible", "[::127.0.0.1]:443", ReasonPrivate},
		{"V4CompatiblePublic", "[::93.184.216.34]:443", ReasonPrivate},
		{"NAT64", "[64:ff9b::7f00:1]:443", ReasonPrivate},
		{"NAT64Public", "[64:ff9b::5db8:d822]:443", ReasonPrivate},
		{"NAT64Local", "[64:ff9b:1::a00:1]:443", ReasonPrivate},
		{"SixToFour", "[2002:7f00:1::1]:443", ReasonPrivate},
		{"SixToFourPublic", "[2002:5db8:d822::1]:443", ReasonPrivate},
		{"Teredo", "[2001:0:4136:e378:8000:63bf:3fff:fdd2]:443", ReasonPrivate},
		{"V6Benchmarking", "[2001:2::1]:443", ReasonPrivate},
		{"V6Documentation", "[2001:db8::1]:443", ReasonPrivate},
		{"V6Documentation3fff", "[3fff::1]:443", ReasonPrivate},
		{"V6Discard", "[100::1]:443", ReasonPrivate},
		{"SiteLocal", "[fec0::1]:443", ReasonPrivate},
		{"ULA", "[fc00::1]:443", ReasonPrivate},
		{"ULAMetadataAWS", "[fd00:ec2::254]:80", ReasonPrivate},
		{"V6LinkLocal", "[fe80::1]:443", ReasonPrivate},
		{"V6Multicast", "[ff02::1]:443", ReasonPrivate},
		{"V6NotGlobalUnicast", "[4000::1]:443", ReasonPrivate},
		// Zone ids.
		{"ZoneLinkLocal", "[fe80::1%eth0]:443", ReasonNotCanonical},
		{"ZonePublic", "[2606:4700:4700::1111%25lo]:443", ReasonNotCanonical},
		// Numeric forms that clients read as 127.0.0.1.
		{"Decimal", "2130706433:80", ReasonNotCanonical},
		{"Octal", "0177.0.0.1:80", ReasonNotCanonical},
		{"OctalDotted", "0177.0000.0000.0001:80", ReasonNotCanonical},
		{"Hex", "0x7f.1:80", ReasonNotCanonical},
		{"HexWhole", "0x7f000001:80", ReasonNotCanonical},
		{"HexLastLabel", "127.0.0.0x1:80", ReasonNotCanonical},
		{"Short", "127.1:80", ReasonNotCanonical},
		{"ShortTwo", "10.1:443", ReasonNotCanonical},
		{"LeadingZeros", "127.000.000.001:80", ReasonNotCanonical},
		{"HexUpper", "0X7F.1:80", ReasonNotCanonical},
		// Trailing dots, userinfo, brackets, empty, escapes.
		{"TrailingDotLiteral", "127.0.0.1.:80", ReasonNotCanonical},
		{"TrailingDotName", "public.test.:443", ReasonNotCanonical},
		{"Userinfo", "good.com@127.0.0.1:80", ReasonNotCanonical},
		{"UserinfoPublic", "user@public.test:443", ReasonNotCanonical},
		{"BracketsV4", "[127.0.0.1]:80", ReasonNotCanonical},
		{"BracketsName", "[public.test]:443", ReasonNotCanonical},
		{"EmptyHost", ":80", ReasonNotCanonical},
		{"EmptyBrackets", "[]:80", ReasonNotCanonical},
		{"PercentEscape", "%31%32%37.0.0.1:80", ReasonNotCanonical},
		{"NonASCII", "pub\u043bic.test:443", ReasonNotCanonical},
		{"EmptyLabel", "public..test:443", ReasonNotCanonical},
		{"HyphenEdge", "-public.test:443", ReasonNotCanonical},
		{"Slash", "public.test/x:443", ReasonNotCanonical},
		// Resolution.
		{"NameToPrivate", "private.test:443", ReasonPrivate},
		{"NameOnePublicOnePrivate", "mixed.test:443", ReasonPrivate},
		{"NameToMappedPrivate", "mapped.test:443", ReasonPrivate},
		{"NameToMetadata", "metadata.test:80", ReasonPrivate},
		{"NameUnknown", "nxdomain.test:443", ReasonResolve},
		{"NameNoAnswer", "empty.test:443", ReasonResolve},
		// The proxy's own addresses.
		{"SelfLiteral", "93.184.216.100:443", ReasonSelf},
		{"SelfName", "self.test:80", ReasonSelf},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := testGuard(testResolver()).Check(context.Background(), tc.target)
			if v.Reason != tc.reason || v.Allowed != (tc.reason == ReasonOK) {
				t.Fatalf("Check(%q) = %+v, want reason %s", tc.target, v, tc.reason)
			}
			if v.Allowed && len(v.Addresses) == 0 {
				t.Fatalf("allowed without addresses: %+v", v)
			}
		})
	}
}

func TestGuardResolvesOnlyAllowedPortsOnce(t *testing.T) {
	r := testResolver()
	g := testGuard(r)
	if v := g.Check(context.Background(), "public.test:22"); v.Reason != ReasonPort {
		t.Fatalf("got %+v", v)
	}
	if n := r.count("public.test"); n != 0 {
		t.Fatalf("resolved %d times for a refused port, want 0", n)
	}
	g.Check(context.Background(), "public.test:443")
	if n := r.count("public.test"); n != 1 {
		t.Fatalf("resolved %d times, want 1", n)
	}
}

func TestGuardNoResolver(t *testing.T) {
	g := NewGuard(GuardConfig{})
	if v := g.Check(context.Background(), "public.test:443"); v.Reason != ReasonResolve {
		t.Fatalf("got %+v, want %s", v, ReasonResolve)
	}
	if v := g.Check(context.Background(), "93.184.216.34:443"); !v.Allowed {
		t.Fatalf("literal refused: %+v", v)
	}
}

func TestGuardPorts(t *testing.T) {
	g := NewGuard(GuardConfig{Ports: []uint16{8443}})
	for _, tc := range []struct {
		name, target string
		allowed      bool
	}{
		{"Configured", "93.184.216.34:8443", true},
		{"DefaultNoLongerAllowed", "93.184.216.34:443", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if v := g.Check(context.Background(), tc.target); v.Allowed != tc.allowed {
				t.Fatalf("got %+v", v)
			}
		})
	}
	if !slices.Equal(NewGuard(GuardConfig{}).ports, []uint16{80, 443}) {
		t.Fatal("default ports are not exactly 80 and 443")
	}
}

func TestGuardControl(t *testing.T) {
	g := testGuard(nil)
	for _, tc := range []struct {
		name, network, address string
		ok                     bool
	}{
		{"Public", "tcp4", "93.184.216.34:443", true},
		{"PublicV6", "tcp6", "[2606:4700:4700::1111]:80", true},
		{"Loopback", "tcp4", "127.0.0.1:443", false},
		{"MappedLoopbackOnV6Socket", "tcp6", "[::ffff:127.0.0.1]:443", false},
		{"Private", "tcp4", "10.0.0.1:80", false},
		{"Self", "tcp4", "93.184.216.100:80", false},
		{"Port", "tcp4", "93.184.216.34:22", false},
		{"Garbage", "tcp4", "nonsense", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := g.Control(tc.network, tc.address, nil)
			if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrRefusedAtDial)) {
				t.Fatalf("Control(%s, %s) = %v, want ok=%v", tc.network, tc.address, err, tc.ok)
			}
		})
	}
}

// TestGuardDialRefusesLoopbackListener proves the connect-time check: a
// guard that allows the listener's port still never connects to loopback.
func TestGuardDialRefusesLoopbackListener(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan struct{}, 1)
	go func() {
		if c, err := ln.Accept(); err == nil {
			accepted <- struct{}{}
			c.Close()
		}
	}()
	ap := netip.MustParseAddrPort(ln.Addr().String())
	g := NewGuard(GuardConfig{Ports: []uint16{ap.Port()}})
	if _, err := g.Dial(context.Background(), ap); !errors.Is(err, ErrRefusedAtDial) {
		t.Fatalf("Dial(%s) = %v, want ErrRefusedAtDial", ap, err)
	}
	// A verdict cannot be forged into a dial of a refused address either.
	forged := Verdict{Allowed: true, Reason: ReasonOK, Addresses: []netip.Addr{ap.Addr()}, Port: ap.Port()}
	called := false
	dial := func(context.Context, netip.AddrPort) (net.Conn, error) { called = true; return nil, errors.New("no") }
	if _, _, err := g.dialVerdict(context.Background(), forged, dial); !errors.Is(err, ErrRefusedAtDial) || called {
		t.Fatalf("dialVerdict of a forged verdict: err=%v called=%v", err, called)
	}
	ln.Close()
	select {
	case <-accepted:
		t.Fatal("the loopback listener saw a connection")
	default:
	}
}

func TestInterfacePrefixes(t *testing.T) {
	ps, err := InterfacePrefixes()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(ps, netip.MustParsePrefix("127.0.0.1/32")) {
		t.Fatalf("%v lacks the loopback address", ps)
	}
	g := NewGuard(GuardConfig{Self: ps})
	if v := g.Check(context.Background(), "127.0.0.1:80"); v.Reason != ReasonSelf {
		t.Fatalf("own address: %+v, want %s", v, ReasonSelf)
	}
}
