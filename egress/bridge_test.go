package egress

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"openvibe.network/agentsandbox/inside/bridge"
)

// startTestBridge runs a bridge for tp's socket on test ports; transparent
// mode maps destination ports 80 and 443 to listeners on port 0 of every
// local address (the host's loopback stands in for the sandbox's lo).
func startTestBridge(tb testing.TB, tp *testProxy, transparent bool) *bridge.Bridge {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	tb.Cleanup(cancel)
	cfg := bridge.Config{Socket: tp.socket, ProxyAddr: "127.0.0.1:0"}
	if transparent {
		cfg.DNSAddr = "127.0.0.1:0"
		cfg.Listen = map[uint16]string{80: "0.0.0.0:0", 443: "0.0.0.0:0"}
		cfg.Synthetic = netip.MustParsePrefix(bridge.SyntheticPrefix)
	}
	b, err := bridge.Start(ctx, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func TestBridgeForwardsAndIsReady(t *testing.T) {
	tp := newTestProxy(t, nil)
	tp.serveHTTP(t, publicV4, 80, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "via bridge")
	}))
	b := startTestBridge(t, tp, false)
	env := bridge.ProxyEnv(b.ProxyAddr())
	for _, k := range []string{"HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"} {
		if env[k] != "http://"+b.ProxyAddr() {
			t.Errorf("%s = %q", k, env[k])
		}
	}
	if env["NO_PROXY"] != "localhost,127.0.0.1,::1" || env["no_proxy"] != env["NO_PROXY"] {
		t.Errorf("NO_PROXY = %q, no_proxy = %q", env["NO_PROXY"], env["no_proxy"])
	}
	// Ready on return: the first connection, with no retry, is served.
	proxyURL, _ := url.Parse(env["HTTP_PROXY"])
	client := &http.Client{Timeout: ioTimeout, Transport: &http.Transport{Proxy: http.ProxyURL(proxyURL)}}
	resp, err := client.Get("http://public.test/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "via bridge" {
		t.Fatalf("got %d %q", resp.StatusCode, body)
	}
	resp, err = client.Get("http://10.0.0.1/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 403 || resp.Header.Get("X-Egress-Refused") != ReasonRefused {
		t.Fatalf("private through the bridge: %d %q", resp.StatusCode, resp.Header.Get("X-Egress-Refused"))
	}
}

func TestBridgeErrors(t *testing.T) {
	tp := newTestProxy(t, nil)
	for _, tc := range []struct {
		name string
		cfg  bridge.Config
		want string // in the error
	}{
		{"NoSocket", bridge.Config{Socket: filepath.Join(t.TempDir(), "none"), ProxyAddr: "127.0.0.1:0"}, "is not a socket"},
		{"NotASocket", bridge.Config{Socket: t.TempDir(), ProxyAddr: "127.0.0.1:0"}, "is not a socket"},
		{"BadListen", bridge.Config{Socket: tp.socket, ProxyAddr: "127.0.0.1:99999"}, "listen tcp4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := bridge.Start(context.Background(), tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("bridge.Start: %v, want an error with %q", err, tc.want)
			}
		})
	}
}

// query asks the bridge's resolver one question over net ("udp" or "tcp").
func query(tb testing.TB, b *bridge.Bridge, network, name string, qtype uint16) *dns.Msg {
	tb.Helper()
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), qtype)
	c := &dns.Client{Net: network, Timeout: ioTimeout}
	r, _, err := c.Exchange(m, b.DNSAddr())
	if err != nil {
		tb.Fatal(err)
	}
	return r
}

func TestTransparentResolver(t *testing.T) {
	tp := newTestProxy(t, nil)
	b := startTestBridge(t, tp, true)
	first := query(t, b, "udp", "public.test", dns.TypeA)
	if len(first.Answer) != 1 || first.Answer[0].(*dns.A).A.String() != "127.77.0.1" {
		t.Fatalf("A public.test = %v", first.Answer)
	}
	for _, tc := range []struct {
		name, network, host string
		qtype               uint16
		rcode               int
		want                string // A answer, "" for none
	}{
		{"SameNameSameAddressTCP", "tcp", "public.test", dns.TypeA, dns.RcodeSuccess, "127.77.0.1"},
		{"CaseInsensitive", "udp", "PUBLIC.test", dns.TypeA, dns.RcodeSuccess, "127.77.0.1"},
		{"NextName", "udp", "private.test", dns.TypeA, dns.RcodeSuccess, "127.77.0.2"},
		{"AAAAEmpty", "udp", "public.test", dns.TypeAAAA, dns.RcodeSuccess, ""},
		{"Localhost", "udp", "localhost", dns.TypeA, dns.RcodeSuccess, "127.0.0.1"},
		{"NumericNameRefused", "udp", "0x7f.1", dns.TypeA, dns.RcodeNameError, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := query(t, b, tc.network, tc.host, tc.qtype)
			if r.Rcode != tc.rcode {
				t.Fatalf("rcode %d, want %d", r.Rcode, tc.rcode)
			}
			got := ""
			if len(r.Answer) == 1 {
				got = r.Answer[0].(*dns.A).A.String()
			}
			if len(r.Answer) > 1 || got != tc.want {
				t.Fatalf("answer %v, want %q", r.Answer, tc.want)
			}
		})
	}
}

// dialSynthetic connects to the transparent listener of dport at the
// synthetic address the resolver gave name.
func dialSynthetic(tb testing.TB, b *bridge.Bridge, name string, dport uint16) net.Conn {
	tb.Helper()
	a := query(tb, b, "udp", name, dns.TypeA).Answer[0].(*dns.A).A.String()
	_, port, _ := net.SplitHostPort(b.ListenAddr(dport))
	c, err := net.DialTimeout("tcp4", net.JoinHostPort(a, port), ioTimeout)
	if err != nil {
		tb.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(ioTimeout))
	tb.Cleanup(func() { c.Close() })
	return c
}

func TestTransparentHTTP(t *testing.T) {
	tp := newTestProxy(t, nil)
	tp.serveHTTP(t, publicV4, 80, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "transparent "+r.Host)
	}))
	b := startTestBridge(t, tp, true)
	for _, tc := range []struct {
		name, host string
		status     int
		body       string
	}{
		{"Allowed", "public.test", 200, "transparent public.test"},
		{"Refused", "private.test", 403, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dialSynthetic(t, b, tc.host, 80)
			io.WriteString(c, "GET / HTTP/1.1\r\nHost: "+tc.host+"\r\n\r\n")
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.status || (tc.body != "" && string(body) != tc.body) {
				t.Fatalf("got %d %q", resp.StatusCode, body)
			}
			if tc.status == 403 && resp.Header.Get("X-Egress-Refused") != ReasonRefused {
				t.Fatalf("refusal reason %q", resp.Header.Get("X-Egress-Refused"))
			}
			c.Close() // the tunnel, and so its log line, ends with the client
			waitLog(t, tp, `"target":"`+tc.host+`:80"`)
		})
	}
	if got := tp.dial.dialed(); len(got) != 1 || got[0] != netip.AddrPortFrom(publicV4, 80) {
		t.Fatalf("dialed %v, want only the public address", got)
	}
}

func TestTransparentTLSPort(t *testing.T) {
	tp := newTestProxy(t, nil)
	tp.serveEcho(t, publicV4, 443)
	b := startTestBridge(t, tp, true)
	c := dialSynthetic(t, b, "public.test", 443)
	io.WriteString(c, "not really a client hello\n")
	if line, err := bufio.NewReader(c).ReadString('\n'); err != nil || line != "not really a client hello\n" {
		t.Fatalf("echo through 443: %q %v", line, err)
	}
	c.Close()
	waitLog(t, tp, `"target":"public.test:443"`)
	// A private name on 443 is closed without a byte.
	pc := dialSynthetic(t, b, "private.test", 443)
	if n, err := pc.Read(make([]byte, 1)); n != 0 || err == nil || strings.Contains(err.Error(), "timeout") {
		t.Fatalf("private 443: n=%d err=%v, want closed", n, err)
	}
	// An address the resolver never gave is closed without a CONNECT.
	_, port, _ := net.SplitHostPort(b.ListenAddr(443))
	uc, err := net.DialTimeout("tcp4", "127.0.0.1:"+port, ioTimeout)
	if err != nil {
		t.Fatal(err)
	}
	defer uc.Close()
	uc.SetDeadline(time.Now().Add(ioTimeout))
	if _, err := uc.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("unknown address: %v, want EOF", err)
	}
	if strings.Contains(tp.logs.String(), `"target":"127.0.0.1`) {
		t.Fatal("a CONNECT was sent for an unknown address")
	}
}

// TestBridgeSpeaksTheProxysReason: the reason the bridge answers itself at
// the connection limit is the proxy's.
func TestBridgeSpeaksTheProxysReason(t *testing.T) {
	if bridge.ReasonConnLimit != ReasonConnLimit {
		t.Fatalf("bridge.ReasonConnLimit %q, egress.ReasonConnLimit %q", bridge.ReasonConnLimit, ReasonConnLimit)
	}
}

// TestBridgeHandsOver: the bridge hands each proxy client's connection to
// the proxy, which then serves the client's own TCP connection (no byte of
// it crosses the bridge), and still counts it against the sandbox's limit.
func TestBridgeHandsOver(t *testing.T) {
	tp := newTestProxy(t, func(c *ProxyConfig) { c.MaxConns = 1 })
	tp.serveEcho(t, publicV4, 443)
	b := startTestBridge(t, tp, false)
	c := connectVia(t, "tcp4", b.ProxyAddr(), "public.test:443")
	defer c.Close()
	io.WriteString(c, "echo\n")
	if line, err := bufio.NewReader(c).ReadString('\n'); err != nil || line != "echo\n" {
		t.Fatalf("through the handed-over tunnel: %q %v", line, err)
	}
	var kinds []string
	for a := range tp.proxy.attached {
		a.mu.Lock()
		for conn := range a.conns {
			if _, ok := conn.(*net.TCPConn); ok && conn.LocalAddr().String() == b.ProxyAddr() {
				kinds = append(kinds, "client")
			} else {
				kinds = append(kinds, conn.LocalAddr().Network())
			}
		}
		a.mu.Unlock()
	}
	slices.Sort(kinds)
	if !slices.Equal(kinds, []string{"client", "tcp"}) {
		t.Fatalf("the proxy holds %v, want the client's own connection and its upstream (no unix carrier)", kinds)
	}
	// The one connection the sandbox may have is taken: the next waits.
	c2, err := net.Dial("tcp4", b.ProxyAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	io.WriteString(c2, "CONNECT public.test:443 HTTP/1.1\r\nHost: public.test:443\r\n\r\n")
	c2.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if _, err := c2.Read(make([]byte, 1)); err == nil {
		t.Fatal("a second connection was served past the sandbox's limit of 1")
	}
}
