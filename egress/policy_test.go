package egress

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"openvibe.network/agentsandbox"
	"openvibe.network/agentsandbox/egress/policy"
)

// pypiPolicy is the allow-list the tests attach sandboxes with.
func pypiPolicy() agentsandbox.EgressPolicy {
	return agentsandbox.EgressPolicy{Mode: agentsandbox.EgressAllow,
		Allow: agentsandbox.EgressHosts("public.test", "*.files.test", "93.184.216.34:443", "private.test", "mixed.test:443"),
		Deny:  []string{"evil.files.test"}}
}

func compiled(tb testing.TB, p agentsandbox.EgressPolicy) *policy.Policy {
	tb.Helper()
	c, err := policy.Compile(p, policy.Limits{})
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// TestGuardPolicyOrder: parse, port, the name against the policy (and the
// operator's deny list) before any lookup, resolve once, every answer
// public. A counting resolver shows that a refused name is never looked
// up.
func TestGuardPolicyOrder(t *testing.T) {
	r := newFakeResolver(map[string][][]netip.Addr{
		"public.test":     {addrs("93.184.216.34")},
		"a.files.test":    {addrs("93.184.216.34")},
		"evil.files.test": {addrs("93.184.216.34")},
		"private.test":    {addrs("10.0.0.1")},
		"mixed.test":      {addrs("93.184.216.34", "10.0.0.1")},
		"unlisted.test":   {addrs("93.184.216.34")},
		"banned.test":     {addrs("93.184.216.34")},
	})
	deny, err := policy.ParseRules("deny", []string{"banned.test"}, policy.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	g := NewGuard(GuardConfig{Resolver: r, Deny: deny})
	pol := compiled(t, pypiPolicy())
	for _, tc := range []struct {
		name, target, reason string
		lookups              int // of the target's name, by this check
	}{
		{"OKListed", "public.test:443", ReasonOK, 1},
		{"OKWildcard", "a.files.test:80", ReasonOK, 1},
		{"OKListedLiteral", "93.184.216.34:443", ReasonOK, 0},
		{"ParseFirst", "PUBLIC.test.:443", ReasonNotCanonical, 0},
		{"PortBeforePolicy", "unlisted.test:22", ReasonPort, 0},
		{"DeniedNeverResolved", "evil.files.test:443", ReasonPolicy, 0},
		{"UnlistedNeverResolved", "unlisted.test:443", ReasonPolicy, 0},
		{"OperatorDenyNeverResolved", "banned.test:443", ReasonPolicy, 0},
		{"ListedPortOnly", "mixed.test:80", ReasonPolicy, 0},
		{"LiteralNotListed", "93.184.216.35:443", ReasonPolicy, 0},
		{"LiteralListedForOtherPort", "93.184.216.34:80", ReasonPolicy, 0},
		{"ListedButPrivate", "private.test:443", ReasonPrivate, 1},
		{"ListedButOneAnswerPrivate", "mixed.test:443", ReasonPrivate, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			host := strings.ToLower(strings.Split(tc.target, ":")[0])
			before := r.count(host)
			v := g.CheckPolicy(context.Background(), tc.target, pol)
			got := []any{v.Reason, v.Allowed, r.count(host) - before}
			if diff := cmp.Diff([]any{tc.reason, tc.reason == ReasonOK, tc.lookups}, got); diff != "" {
				t.Fatalf("CheckPolicy(%q) = %+v; [reason allowed lookups] (-want +got):\n%s", tc.target, v, diff)
			}
		})
	}
	// The operator's deny list holds in public mode too, before any lookup.
	if v := g.Check(context.Background(), "banned.test:443"); v.Reason != ReasonPolicy || r.count("banned.test") != 0 {
		t.Fatalf("public mode, operator-denied: %+v after %d lookups", v, r.count("banned.test"))
	}
}

// TestGuardDeniesResolvedAddresses: a deny entry that is an address or a
// range, the operator's or the sandbox's, refuses every name that resolves
// into it (any answer of the one lookup), with the address in the detail;
// the verdict is taken without dialing.
func TestGuardDeniesResolvedAddresses(t *testing.T) {
	r := newFakeResolver(map[string][][]netip.Addr{
		"op.test":      {addrs("93.184.216.34", "44.0.0.2")},
		"op6.test":     {addrs("2606:4700:4700::1111")},
		"mapped.test":  {addrs("::ffff:44.0.0.2")},
		"sbx.test":     {addrs("45.1.200.7")},
		"public.test":  {addrs("93.184.216.34")},
		"allowed.test": {addrs("45.1.0.9")},
	})
	deny, err := policy.ParseRules("deny", []string{"44.0.0.2", "2606:4700::/32"}, policy.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	g := NewGuard(GuardConfig{Resolver: r, Deny: deny})
	public := compiled(t, agentsandbox.EgressPolicy{Mode: agentsandbox.EgressPublic, Deny: []string{"45.1.0.0/16:443"}})
	allow := compiled(t, agentsandbox.EgressPolicy{Mode: agentsandbox.EgressAllow, Allow: agentsandbox.EgressHosts("allowed.test", "public.test"),
		Deny: []string{"45.1.0.9"}})
	for _, tc := range []struct {
		name, target string
		pol          *policy.Policy
		want         Verdict
	}{
		{"OperatorAnyAnswer", "op.test:443", nil, Verdict{Reason: ReasonPolicy,
			Detail:    `op.test resolves to 44.0.0.2, which matches the worker's deny entry "44.0.0.2"`,
			Addresses: addrs("93.184.216.34", "44.0.0.2")}},
		{"OperatorRange", "op6.test:80", public, Verdict{Reason: ReasonPolicy,
			Detail:    `op6.test resolves to 2606:4700:4700::1111, which matches the worker's deny entry "2606:4700::/32"`,
			Addresses: addrs("2606:4700:4700::1111")}},
		{"OperatorMappedAnswer", "mapped.test:443", nil, Verdict{Reason: ReasonPolicy,
			Detail:    `mapped.test resolves to 44.0.0.2, which matches the worker's deny entry "44.0.0.2"`,
			Addresses: addrs("44.0.0.2")}},
		{"OperatorLiteral", "44.0.0.2:443", nil, Verdict{Reason: ReasonPolicy,
			Detail: `44.0.0.2:443 matches the worker's deny entry "44.0.0.2"`}},
		{"SandboxRange", "sbx.test:443", public, Verdict{Reason: ReasonPolicy,
			Detail:    `sbx.test resolves to 45.1.200.7, which matches deny entry "45.1.0.0/16:443"`,
			Addresses: addrs("45.1.200.7")}},
		{"SandboxRangeOtherPort", "sbx.test:80", public, Verdict{Allowed: true, Reason: ReasonOK, Addresses: addrs("45.1.200.7")}},
		{"AllowModeListedNameDeniedAddress", "allowed.test:443", allow, Verdict{Reason: ReasonPolicy,
			Detail:    `allowed.test resolves to 45.1.0.9, which matches deny entry "45.1.0.9"`,
			Addresses: addrs("45.1.0.9")}},
		{"AllowModeOK", "public.test:443", allow, Verdict{Allowed: true, Reason: ReasonOK, Addresses: addrs("93.184.216.34")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := g.CheckPolicy(context.Background(), tc.target, tc.pol)
			v.Host, v.Port = "", 0
			if diff := cmp.Diff(tc.want, v, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
				t.Fatalf("CheckPolicy(%s) (-want +got):\n%s", tc.target, diff)
			}
		})
	}
}

// TestGuardHostSelf: an address of the host's own interfaces, public as it
// looks, is refused as the host's; the set follows the interfaces.
func TestGuardHostSelf(t *testing.T) {
	hostPublic := netip.MustParseAddr("93.184.216.50")
	var ifaces atomic.Pointer[[]netip.Prefix]
	set := func(ps ...netip.Prefix) { ifaces.Store(&ps) }
	set(netip.PrefixFrom(hostPublic, 32), netip.MustParsePrefix("127.0.0.1/32"))
	h, err := NewHostAddrs(HostAddrsConfig{Interfaces: func() ([]netip.Prefix, error) { return *ifaces.Load(), nil },
		Every: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	g := NewGuard(GuardConfig{Resolver: newFakeResolver(map[string][][]netip.Addr{"host.test": {{hostPublic}}}), Host: h})
	for _, target := range []string{"93.184.216.50:443", "93.184.216.50:80", "host.test:443", "[::ffff:93.184.216.50]:443"} {
		if v := g.Check(context.Background(), target); v.Reason != ReasonHostSelf && !(v.Reason == ReasonPrivate && strings.Contains(target, "ffff")) {
			t.Errorf("Check(%s) = %+v, want %s", target, v, ReasonHostSelf)
		}
	}
	if err := g.Control("tcp4", "93.184.216.50:443", nil); err == nil {
		t.Error("the connect-time check lets a host address through")
	}
	// A new address is refused once the set is refreshed; a removed one is
	// allowed again.
	moved := netip.MustParseAddr("93.184.216.51")
	set(netip.PrefixFrom(moved, 32))
	if err := h.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	if v := g.Check(context.Background(), "93.184.216.51:443"); v.Reason != ReasonHostSelf {
		t.Errorf("after the refresh, the new address: %+v", v)
	}
	if v := g.Check(context.Background(), "93.184.216.50:443"); !v.Allowed {
		t.Errorf("after the refresh, the old address: %+v", v)
	}
}

// TestHostAddrsRefreshes: the set is re-read every interval, and an error
// keeps the last set.
func TestHostAddrsRefreshes(t *testing.T) {
	var calls atomic.Int32
	first := netip.MustParsePrefix("93.184.216.50/32")
	h, err := NewHostAddrs(HostAddrsConfig{Every: 5 * time.Millisecond, Netlink: true,
		Interfaces: func() ([]netip.Prefix, error) {
			if calls.Add(1) > 1 {
				return nil, io.ErrUnexpectedEOF
			}
			return []netip.Prefix{first}, nil
		},
		Extra: func(context.Context) []netip.Prefix {
			return []netip.Prefix{netip.MustParsePrefix("::ffff:93.184.216.60/128")}
		}})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(ioTimeout)
	for calls.Load() < 3 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	h.Close()
	h.Close()
	want := []netip.Prefix{first, netip.MustParsePrefix("93.184.216.60/32")}
	if diff := cmp.Diff(want, h.Prefixes(), cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" || calls.Load() < 3 {
		t.Fatalf("after %d reads, failing ones kept the set? (-want +got):\n%s", calls.Load(), diff)
	}
	if _, err := NewHostAddrs(HostAddrsConfig{Interfaces: func() ([]netip.Prefix, error) { return nil, io.EOF }}); err == nil {
		t.Fatal("a first read that fails is not an error")
	}
	var none *HostAddrs
	if none.Contains(first.Addr()) || none.Prefixes() != nil || none.Close() != nil {
		t.Fatal("a nil HostAddrs holds something")
	}
}

// TestProxyRefusesHostAddress: the interface prefixes hold a public-looking
// address, served (were the guard broken) by a loopback server through the
// test dial hook; the proxy refuses it and the server sees nothing.
func TestProxyRefusesHostAddress(t *testing.T) {
	hostPublic := netip.MustParseAddr("93.184.216.50")
	h, err := NewHostAddrs(HostAddrsConfig{Every: time.Hour,
		Interfaces: func() ([]netip.Prefix, error) { return []netip.Prefix{netip.PrefixFrom(hostPublic, 32)}, nil }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	tp := newTestProxy(t, func(c *ProxyConfig) {
		c.Guard = NewGuard(GuardConfig{Resolver: newFakeResolver(map[string][][]netip.Addr{"host.test": {{hostPublic}}}), Host: h})
	})
	addr, seen := trap(t)
	tp.dial.set(netip.AddrPortFrom(hostPublic, 443), addr)
	tp.dial.set(netip.AddrPortFrom(hostPublic, 80), addr)
	for _, raw := range []string{
		"CONNECT 93.184.216.50:443 HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET http://93.184.216.50/ HTTP/1.1\r\nHost: 93.184.216.50\r\n\r\n",
		"CONNECT host.test:443 HTTP/1.1\r\nHost: x\r\n\r\n",
	} {
		resp, body := tp.do(t, raw)
		wantRefused(t, resp, body, 403, ReasonRefused)
	}
	waitMetric(t, tp.reg, 3)
	if got := requestCounts(t, tp.reg); !cmp.Equal(got, map[string]float64{"refused/host-self": 3}) {
		t.Fatalf("counted %v, want 3 host-self refusals", got)
	}
	if n := seen.Load(); n != 0 || len(tp.dial.dialed()) != 0 {
		t.Fatalf("the host's own address was dialed (%v), its server saw %d connections", tp.dial.dialed(), n)
	}
}

// serveTLS serves h over TLS on loopback, reached as public:443, and
// returns the server (its certificate is for example.com and 127.0.0.1;
// clients here skip verification: the SNI is the point).
func serveTLS(tb testing.TB, tp *testProxy, public netip.Addr, h http.Handler) *httptest.Server {
	tb.Helper()
	srv := httptest.NewUnstartedServer(h)
	srv.StartTLS()
	tb.Cleanup(srv.Close)
	tp.dial.set(netip.AddrPortFrom(public, 443), srv.Listener.Addr().String())
	return srv
}

// tlsThrough opens a CONNECT tunnel to target and runs a crypto/tls
// handshake in it with serverName as SNI ("" sends none), then one GET.
func tlsThrough(tb testing.TB, tp *testProxy, target, serverName string) (string, error) {
	tb.Helper()
	c := tp.dialProxy(tb)
	io.WriteString(c, "CONNECT "+target+" HTTP/1.1\r\nHost: "+target+"\r\n\r\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil || resp.StatusCode != 200 {
		tb.Fatalf("CONNECT %s: %v %v", target, resp, err)
	}
	tc := tls.Client(c, &tls.Config{ServerName: serverName, InsecureSkipVerify: true})
	if err := tc.Handshake(); err != nil {
		return "", err
	}
	io.WriteString(tc, "GET / HTTP/1.1\r\nHost: "+serverName+"\r\nConnection: close\r\n\r\n")
	r, err := http.ReadResponse(bufio.NewReader(tc), nil)
	if err != nil {
		return "", err
	}
	b, _ := io.ReadAll(r.Body)
	return string(b), nil
}

// TestProxySNI: in a sandbox whose destinations are decided by name, a
// tunnel's ClientHello must name the CONNECT's host: a matching SNI
// passes, a different or missing one is refused (domain fronting) with a
// TLS alert, logged and counted as sni-mismatch.
func TestProxySNI(t *testing.T) {
	tp := newPolicyProxy(t, nil, AttachOptions{Policy: pypiPolicy()})
	serveTLS(t, tp, publicV4, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "tls for "+r.TLS.ServerName)
	}))
	for _, tc := range []struct {
		name, target, sni string
		ok                bool
	}{
		{"OKMatching", "public.test:443", "public.test", true},
		{"OKMatchingAnyCase", "public.test:443", "PUBLIC.test", true},
		{"OKLiteralWithout", "93.184.216.34:443", "", true},
		{"ErrFronted", "public.test:443", "fronted.example", false},
		{"ErrMissing", "public.test:443", "", false},
		{"ErrLiteralWithSNI", "93.184.216.34:443", "fronted.example", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body, err := tlsThrough(t, tp, tc.target, tc.sni)
			if tc.ok {
				if err != nil || body != "tls for "+tc.sni {
					t.Fatalf("got %q %v", body, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), "access denied") {
				t.Fatalf("handshake: %q %v, want a TLS access_denied alert", body, err)
			}
		})
	}
	waitMetric(t, tp.reg, 6)
	if diff := cmp.Diff(map[string]float64{"allowed/ok": 3, "refused/sni-mismatch": 3}, requestCounts(t, tp.reg)); diff != "" {
		t.Fatalf("counted (-want +got):\n%s", diff)
	}
	waitLog(t, tp, `"detail":"SNI \"fronted.example\" on a tunnel to public.test"`)
}

// TestProxyNoSNICheckInPublicMode: a sandbox in public mode with no rules
// is not asked for a ClientHello (its tunnel carries anything).
func TestProxyNoSNICheckInPublicMode(t *testing.T) {
	tp := newTestProxy(t, nil)
	serveTLS(t, tp, publicV4, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	if body, err := tlsThrough(t, tp, "public.test:443", "fronted.example"); err != nil || body != "ok" {
		t.Fatalf("public mode: %q %v", body, err)
	}
}

// TestProxyPolicyHTTP: in allow mode, an unlisted name is refused as
// policy-denied without a lookup, a listed one passes, and a Host header
// that is not the absolute-form host is refused as host-mismatch.
func TestProxyPolicyHTTP(t *testing.T) {
	tp := newPolicyProxy(t, nil, AttachOptions{Policy: pypiPolicy()})
	tp.serveHTTP(t, publicV4, 80, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "page for "+r.Host)
	}))
	for _, tc := range []struct {
		name, raw, wire, body string
		status                int
	}{
		{"OKListed", "GET http://public.test/ HTTP/1.1\r\nHost: public.test\r\nConnection: close\r\n\r\n", "", "page for public.test", 200},
		{"OKHostWithPort", "GET http://public.test/ HTTP/1.1\r\nHost: PUBLIC.test:80\r\nConnection: close\r\n\r\n", "", "page for public.test", 200},
		{"OKNoHost", "GET http://public.test/ HTTP/1.0\r\n\r\n", "", "page for public.test", 200},
		{"Unlisted", "GET http://unlisted.test/ HTTP/1.1\r\nHost: unlisted.test\r\n\r\n", ReasonPolicy, "", 403},
		{"Denied", "GET http://evil.files.test/ HTTP/1.1\r\nHost: evil.files.test\r\n\r\n", ReasonPolicy, "", 403},
		{"ConnectUnlisted", "CONNECT unlisted.test:443 HTTP/1.1\r\nHost: x\r\n\r\n", ReasonPolicy, "", 403},
		{"HostMismatch", "GET http://public.test/ HTTP/1.1\r\nHost: fronted.example\r\n\r\n", ReasonHostHeader, "", 403},
		{"HostOtherPort", "GET http://public.test/ HTTP/1.1\r\nHost: public.test:8080\r\n\r\n", ReasonHostHeader, "", 403},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := tp.do(t, tc.raw)
			if tc.wire != "" {
				wantRefused(t, resp, body, tc.status, tc.wire)
				return
			}
			if resp.StatusCode != tc.status || body != tc.body {
				t.Fatalf("got %d %q", resp.StatusCode, body)
			}
		})
	}
	if n := tp.resolver.count("unlisted.test") + tp.resolver.count("evil.files.test"); n != 0 {
		t.Fatalf("refused names were looked up %d times", n)
	}
}

// TestProxyPolicyTunnelOnPort80: a tunnel to port 80 of a sandbox decided
// by name is read as HTTP, and every request's Host must be the tunnel's
// name, not only the first one.
func TestProxyPolicyTunnelOnPort80(t *testing.T) {
	tp := newPolicyProxy(t, nil, AttachOptions{Policy: pypiPolicy()})
	tp.serveHTTP(t, publicV4, 80, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "page for "+r.Host)
	}))
	c := tp.dialProxy(t)
	io.WriteString(c, "CONNECT public.test:80 HTTP/1.1\r\nHost: public.test:80\r\n\r\n")
	br := bufio.NewReader(c)
	if resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect}); err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %v %v", resp, err)
	}
	for i, tc := range []struct {
		host   string
		status int
	}{{"public.test", 200}, {"public.test", 200}, {"fronted.example", 403}} {
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: "+tc.host+"\r\n\r\n")
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != tc.status || (tc.status == 403) != (resp.Header.Get("X-Egress-Refused") == ReasonHostHeader) {
			t.Fatalf("request %d for %s: %d %q %q", i, tc.host, resp.StatusCode, resp.Header.Get("X-Egress-Refused"), body)
		}
	}
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("after a refused request: %v, want the tunnel closed", err)
	}
}

// TestProxyKeepAlive: a keep-alive client's requests through the proxy go
// on one client connection and one upstream connection per destination;
// a refusal among them ends the client's connection.
func TestProxyKeepAlive(t *testing.T) {
	tp := newTestProxy(t, nil)
	var upstreams atomic.Int32
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		io.WriteString(w, r.Method+" "+r.URL.Path+" "+string(body))
	}), ConnState: func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			upstreams.Add(1)
		}
	}}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	tp.dial.set(netip.AddrPortFrom(publicV4, 80), ln.Addr().String())
	c := tp.dialProxy(t)
	br := bufio.NewReader(c)
	for i, raw := range []string{
		"GET http://public.test/a HTTP/1.1\r\nHost: public.test\r\n\r\n",
		"POST http://public.test/b HTTP/1.1\r\nHost: public.test\r\nContent-Length: 4\r\n\r\nbody",
		"GET http://public.test/c HTTP/1.1\r\nHost: public.test\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
		"HEAD http://public.test/d HTTP/1.1\r\nHost: public.test\r\n\r\n",
		"GET http://public.test/e HTTP/1.1\r\nHost: public.test\r\n\r\n",
	} {
		io.WriteString(c, raw)
		method := strings.Fields(raw)[0]
		resp, err := http.ReadResponse(br, &http.Request{Method: method})
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || resp.Close || (method != "HEAD" && !strings.HasPrefix(string(body), method+" /")) {
			t.Fatalf("request %d: %d close=%v %q", i, resp.StatusCode, resp.Close, body)
		}
	}
	if n := upstreams.Load(); n != 1 {
		t.Fatalf("%d upstream connections for five requests to one destination, want 1", n)
	}
	if n := tp.resolver.count("public.test"); n != 1 {
		t.Fatalf("resolved %d times for five requests on one upstream, want 1", n)
	}
	io.WriteString(c, "GET http://10.0.0.1/ HTTP/1.1\r\nHost: 10.0.0.1\r\n\r\n")
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 403 || !resp.Close {
		t.Fatalf("a refusal on a kept connection: %v %v", resp, err)
	}
	io.Copy(io.Discard, resp.Body)
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("after the refusal: %v, want the connection closed", err)
	}
	waitMetric(t, tp.reg, 6)
	if diff := cmp.Diff(map[string]float64{"allowed/ok": 5, "refused/private-address": 1}, requestCounts(t, tp.reg)); diff != "" {
		t.Fatalf("one count per request (-want +got):\n%s", diff)
	}
}

// TestProxyKeepAliveUpstreamClosed: when the upstream closes a kept
// connection between requests, the next request dials again.
func TestProxyKeepAliveUpstreamClosed(t *testing.T) {
	tp := newTestProxy(t, nil)
	var n atomic.Int32
	tp.serveHTTP(t, publicV4, 80, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			w.Header().Set("Connection", "close")
		}
		io.WriteString(w, "ok")
	}))
	c := tp.dialProxy(t)
	br := bufio.NewReader(c)
	for i := range 3 {
		io.WriteString(c, "GET http://public.test/ HTTP/1.1\r\nHost: public.test\r\n\r\n")
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || string(body) != "ok" || resp.Close {
			t.Fatalf("request %d: %d %q close=%v", i, resp.StatusCode, body, resp.Close)
		}
	}
	if got := len(tp.dial.dialed()); got != 2 {
		t.Fatalf("%d dials, want 2 (the first upstream closed after its response)", got)
	}
}

func TestProxyCheckPolicy(t *testing.T) {
	tp := newTestProxy(t, func(c *ProxyConfig) { c.MaxPolicyEntries = 2 })
	got, err := tp.proxy.CheckPolicy(agentsandbox.EgressPolicy{Mode: "allow", Allow: agentsandbox.EgressHosts("PyPI.org")})
	if err != nil || !cmp.Equal(got, agentsandbox.EgressPolicy{Mode: "allow", Allow: agentsandbox.EgressHosts("pypi.org")}) {
		t.Fatalf("CheckPolicy = %+v %v", got, err)
	}
	if got, err := tp.proxy.CheckPolicy(agentsandbox.EgressPolicy{}); err != nil || got.Mode != "public" {
		t.Fatalf("the zero policy: %+v %v, want public", got, err)
	}
	if _, err := tp.proxy.CheckPolicy(agentsandbox.EgressPolicy{Mode: "allow", Allow: agentsandbox.EgressHosts("a.test", "b.test", "c.test")}); err == nil {
		t.Fatal("a policy over the configured size was accepted")
	}
	if _, _, err := tp.proxy.Attach(context.Background(), "none", t.TempDir()+"/s", 0, AttachOptions{Policy: agentsandbox.EgressPolicy{Mode: "none"}}); err == nil {
		t.Fatal("a sandbox in mode none was attached")
	}
}

// TestProxyNamedHeaderInPieces: a request whose header arrives in pieces
// is read whole before its Host is checked, and answered.
func TestProxyNamedHeaderInPieces(t *testing.T) {
	tp := newPolicyProxy(t, nil, AttachOptions{Policy: pypiPolicy()})
	tp.serveHTTP(t, publicV4, 80, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "whole") }))
	for _, tc := range []struct {
		name   string
		pieces []string
		status int
	}{
		{"Allowed", []string{"GET http://public.test/ HTTP/1.1\r\n", "Host: public.test\r\n", "Connection: close\r\n", "\r\n"}, 200},
		{"RefusedPort", []string{"GET http://127.0.0.1:33855/ HTTP/1.1\r\n", "Host: 127.0.0.1:33855\r\n\r\n"}, 403},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tp.dialProxy(t)
			for _, p := range tc.pieces {
				io.WriteString(c, p)
				time.Sleep(20 * time.Millisecond)
			}
			c.SetReadDeadline(time.Now().Add(5 * time.Second)) // the answer comes at once, not at a timeout
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil || resp.StatusCode != tc.status {
				t.Fatalf("got %v %v, want %d", resp, err, tc.status)
			}
		})
	}
}

// splitRecords re-frames a one-record ClientHello into records of at most
// n handshake bytes each.
func splitRecords(hello []byte, n int) []byte {
	body := hello[5:]
	var out []byte
	for len(body) > 0 {
		k := min(n, len(body))
		out = append(out, 22, 3, 1, byte(k>>8), byte(k))
		out = append(out, body[:k]...)
		body = body[k:]
	}
	return out
}

func TestReadClientHello(t *testing.T) {
	hello := clientHello(t, "files.pythonhosted.org")
	noSNI := clientHello(t, "")
	for _, tc := range []struct {
		name, sni string
		in        []byte
		err       bool
	}{
		{"OK", "files.pythonhosted.org", hello, false},
		{"OKSplitAcrossRecords", "files.pythonhosted.org", splitRecords(hello, 3), false},
		{"OKNoSNI", "", noSNI, false},
		{"NotTLS", "", []byte("GET / HTTP/1.1\r\nHost: files.pythonhosted.org\r\n\r\n"), true},
		{"Truncated", "", hello[:len(hello)/2], true},
		{"NotAHello", "", []byte{22, 3, 3, 0, 4, 2, 0, 0, 0}, true},
		{"Oversized", "", []byte{22, 3, 3, 0xff, 0xff}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw, sni, err := readClientHello(bytes.NewReader(append(slices.Clone(tc.in), "after"...)))
			if (err != nil) != tc.err || sni != tc.sni {
				t.Fatalf("readClientHello = %q %v, want %q (error %v)", sni, err, tc.sni, tc.err)
			}
			if !tc.err && !bytes.Equal(raw, tc.in) {
				t.Fatalf("read %d bytes, want exactly the hello's %d", len(raw), len(tc.in))
			}
		})
	}
}
