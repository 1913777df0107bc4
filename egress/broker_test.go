package egress

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/gorilla/websocket"

	"openvibe.network/agentsandbox"
	"openvibe.network/agentsandbox/internal/brokerca"
)

const (
	testPH    = agentsandbox.SecretPlaceholderPrefix + "0123456789abcdef0123456789abcdef"
	testValue = "sk-REAL-VALUE-4242"
	otherPH   = agentsandbox.SecretPlaceholderPrefix + "fedcba9876543210fedcba9876543210"
)

func testBroker(tb testing.TB) *broker {
	tb.Helper()
	ca, err := brokerca.New("sbx-test", []string{"api.example.com", "*.other.example.com"}, time.Now())
	if err != nil {
		tb.Fatal(err)
	}
	b, err := newBroker(AttachOptions{CA: &ca, Secrets: []agentsandbox.EgressSecret{
		{Name: "API_KEY", Placeholder: testPH, Value: testValue, Hosts: []string{"api.example.com"}},
		{Name: "OTHER_KEY", Placeholder: otherPH, Value: "other-value", Hosts: []string{"*.other.example.com:443"}},
	}}, nil)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func basic(user, pass string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
}

// TestSubstitute: the placeholder is put in place in every header value of
// a request to the secret's own host over TLS, Basic credentials included;
// anywhere else (another host, port 80, plain HTTP) a request carrying it
// in any form is refused, its header untouched.
func TestSubstitute(t *testing.T) {
	b := testBroker(t)
	for _, tc := range []struct {
		name       string
		host       string
		port       uint16
		tls        bool
		header     http.Header
		target     string
		wantHeader http.Header
		refused    string
		used       []string
	}{
		{name: "OK/Bearer", host: "api.example.com", port: 443, tls: true,
			header:     http.Header{"Authorization": {"Bearer " + testPH}},
			wantHeader: http.Header{"Authorization": {"Bearer " + testValue}}, used: []string{"API_KEY"}},
		{name: "OK/SeveralHeaders", host: "api.example.com", port: 443, tls: true,
			header: http.Header{"X-Api-Key": {testPH}, "X-Other": {"a " + testPH + " b " + testPH}, "Accept": {"*/*"}},
			wantHeader: http.Header{"X-Api-Key": {testValue}, "X-Other": {"a " + testValue + " b " + testValue},
				"Accept": {"*/*"}}, used: []string{"API_KEY"}},
		{name: "OK/RepeatedHeaderLines", host: "api.example.com", port: 443, tls: true,
			header:     http.Header{"X-Key": {testPH, "plain", testPH}},
			wantHeader: http.Header{"X-Key": {testValue, "plain", testValue}}, used: []string{"API_KEY"}},
		{name: "OK/BasicPassword", host: "api.example.com", port: 443, tls: true,
			header:     http.Header{"Authorization": {basic("token", testPH)}},
			wantHeader: http.Header{"Authorization": {basic("token", testValue)}}, used: []string{"API_KEY"}},
		{name: "OK/BasicUser", host: "api.example.com", port: 443, tls: true,
			header:     http.Header{"Authorization": {basic(testPH, "")}},
			wantHeader: http.Header{"Authorization": {basic(testValue, "")}}, used: []string{"API_KEY"}},
		{name: "OK/Wildcard", host: "a.b.other.example.com", port: 443, tls: true,
			header:     http.Header{"X-Key": {otherPH}},
			wantHeader: http.Header{"X-Key": {"other-value"}}, used: []string{"OTHER_KEY"}},
		{name: "OK/SplitIsNoPlaceholder", host: "api.example.com", port: 443, tls: true,
			header:     http.Header{"X-Key": {testPH[:20], testPH[20:]}},
			wantHeader: http.Header{"X-Key": {testPH[:20], testPH[20:]}}},
		{name: "OK/NoPlaceholder", host: "elsewhere.test", port: 443, tls: true,
			header: http.Header{"X-Key": {"nothing"}}, wantHeader: http.Header{"X-Key": {"nothing"}}},
		{name: "ErrOtherHost", host: "evil.test", port: 443, tls: true,
			header: http.Header{"Authorization": {"Bearer " + testPH}}, refused: "API_KEY",
			wantHeader: http.Header{"Authorization": {"Bearer " + testPH}}},
		{name: "ErrOtherSecretsHost", host: "x.other.example.com", port: 443, tls: true,
			header: http.Header{"X-Key": {testPH}}, refused: "API_KEY", wantHeader: http.Header{"X-Key": {testPH}}},
		{name: "ErrUpperCase", host: "evil.test", port: 443, tls: true,
			header: http.Header{"X-Key": {strings.ToUpper(testPH)}}, refused: "API_KEY",
			wantHeader: http.Header{"X-Key": {strings.ToUpper(testPH)}}},
		{name: "ErrPercentEncoded", host: "evil.test", port: 443, tls: true,
			header:  http.Header{"X-Key": {strings.ReplaceAll(testPH, "-", "%2D")}},
			refused: "API_KEY", wantHeader: http.Header{"X-Key": {strings.ReplaceAll(testPH, "-", "%2D")}}},
		{name: "ErrInBasic", host: "evil.test", port: 443, tls: true,
			header: http.Header{"Authorization": {basic("u", testPH)}}, refused: "API_KEY",
			wantHeader: http.Header{"Authorization": {basic("u", testPH)}}},
		{name: "ErrInQuery", host: "evil.test", port: 443, tls: true, target: "/?key=" + testPH,
			header: http.Header{}, refused: "API_KEY", wantHeader: http.Header{}},
		{name: "ErrInHeaderName", host: "evil.test", port: 443, tls: true,
			header: http.Header{"X-" + testPH: {"1"}}, refused: "API_KEY", wantHeader: http.Header{"X-" + testPH: {"1"}}},
		{name: "ErrPlainHTTPToOwnHost", host: "api.example.com", port: 80, tls: false,
			header: http.Header{"X-Key": {testPH}}, refused: "API_KEY", wantHeader: http.Header{"X-Key": {testPH}}},
		{name: "ErrOneOfTwo", host: "api.example.com", port: 443, tls: true,
			header:     http.Header{"X-Key": {testPH}, "X-Other": {otherPH}},
			refused:    "OTHER_KEY",
			wantHeader: http.Header{"X-Key": {testPH}, "X-Other": {otherPH}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			target := tc.target
			if target == "" {
				target = "/"
			}
			refused, used := b.substitute(tc.host, tc.port, tc.tls, tc.header, target)
			if refused != tc.refused {
				t.Fatalf("refused %q, want %q", refused, tc.refused)
			}
			if diff := cmp.Diff(tc.used, used); diff != "" {
				t.Fatalf("used (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantHeader, tc.header); diff != "" {
				t.Fatalf("header (-want +got):\n%s", diff)
			}
		})
	}
}

// brokerEnv is a proxy attached for one sandbox with secrets, whose
// "public" hosts are loopback TLS servers reached through the dial hook.
type brokerEnv struct {
	tp     *testProxy
	ca     tls.Certificate
	client *http.Client
	seen   *seenHeaders
}

// seenHeaders records what the upstreams received.
type seenHeaders struct {
	mu  sync.Mutex
	all []string
}

func (s *seenHeaders) add(host string, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var b strings.Builder
	r.Header.Write(&b)
	s.all = append(s.all, host+" "+r.URL.RequestURI()+"\n"+b.String())
}

func (s *seenHeaders) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.all, "\n")
}

var (
	apiV4      = netip.MustParseAddr("93.184.216.40")
	otherV4    = netip.MustParseAddr("93.184.216.41")
	wrongV4    = netip.MustParseAddr("93.184.216.42")
	selfSignV4 = netip.MustParseAddr("93.184.216.43")
	blindV4    = netip.MustParseAddr("93.184.216.44")
	expiredV4  = netip.MustParseAddr("93.184.216.45")
)

func newBrokerEnv(t *testing.T, h2 bool) *brokerEnv {
	t.Helper()
	seen := &seenHeaders{}
	echo := func(name string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			seen.add(name, r)
			if r.Method == http.MethodPost {
				http.NewResponseController(w).EnableFullDuplex()
				io.Copy(w, r.Body)
				return
			}
			io.WriteString(w, name+" got "+r.Header.Get("Authorization")+"|"+r.Header.Get("X-Api-Key")+"|host "+r.Host+"|sni "+r.TLS.ServerName)
		})
	}
	upstream := func(name string, cert *tls.Certificate) string {
		srv := httptest.NewUnstartedServer(echo(name))
		srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes are the point
		if cert != nil {
			srv.TLS = &tls.Config{Certificates: []tls.Certificate{*cert}}
		}
		srv.StartTLS()
		t.Cleanup(srv.Close)
		return srv.Listener.Addr().String()
	}
	// httptest's certificate is for example.com and *.example.com.
	roots := x509.NewCertPool()
	probe := httptest.NewTLSServer(http.NotFoundHandler())
	roots.AddCert(probe.Certificate())
	probe.Close()
	foreign, err := brokerca.New("foreign", []string{"selfsigned.example.com"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	fm, _ := brokerca.NewMinter(foreign, nil)
	selfLeaf, err := fm.Leaf("selfsigned.example.com")
	if err != nil {
		t.Fatal(err)
	}
	// An upstream whose certificate expired, from an authority the worker
	// trusts.
	past := time.Now().Add(-72 * time.Hour)
	oldCA, err := brokerca.New("old", []string{"expired.example.com"}, past)
	if err != nil {
		t.Fatal(err)
	}
	roots.AddCert(oldCA.Leaf)
	om, _ := brokerca.NewMinter(oldCA, func() time.Time { return past })
	expiredLeaf, err := om.Leaf("expired.example.com")
	if err != nil {
		t.Fatal(err)
	}
	hosts := []string{"api.example.com", "other.example.com", "wrong.test", "selfsigned.example.com", "expired.example.com"}
	ca, err := brokerca.New("sbx-test", hosts, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	opts := AttachOptions{CA: &ca, Secrets: []agentsandbox.EgressSecret{
		{Name: "API_KEY", Placeholder: testPH, Value: testValue, Hosts: []string{"api.example.com"}},
		{Name: "OTHER_KEY", Placeholder: otherPH, Value: "other-value", Hosts: []string{"other.example.com", "wrong.test", "selfsigned.example.com", "expired.example.com"}},
	}}
	res := newFakeResolver(map[string][][]netip.Addr{
		"api.example.com":        {{apiV4}},
		"other.example.com":      {{otherV4}},
		"wrong.test":             {{wrongV4}},
		"selfsigned.example.com": {{selfSignV4}},
		"blind.example.com":      {{blindV4}},
		"expired.example.com":    {{expiredV4}},
	})
	tp := newPolicyProxy(t, func(c *ProxyConfig) {
		c.Guard = testGuard(res)
		c.UpstreamRoots = roots
	}, opts)
	tp.dial.set(netip.AddrPortFrom(apiV4, 443), upstream("api", nil))
	tp.dial.set(netip.AddrPortFrom(otherV4, 443), upstream("other", nil))
	tp.dial.set(netip.AddrPortFrom(wrongV4, 443), upstream("wrong", nil))
	tp.dial.set(netip.AddrPortFrom(selfSignV4, 443), upstream("selfsigned", selfLeaf))
	tp.dial.set(netip.AddrPortFrom(blindV4, 443), upstream("blind", nil))
	tp.dial.set(netip.AddrPortFrom(expiredV4, 443), upstream("expired", expiredLeaf))
	tp.serveHTTP(t, otherV4, 80, echo("other-plain"))
	sandboxRoots := x509.NewCertPool()
	sandboxRoots.AddCert(ca.Leaf)
	sandboxRoots.AddCert(probe.Certificate()) // the blind tunnel's upstream, verified by the client itself
	tr := &http.Transport{
		Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: "proxy.invalid"}),
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", tp.socket)
		},
		TLSClientConfig:   &tls.Config{RootCAs: sandboxRoots},
		ForceAttemptHTTP2: h2,
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &brokerEnv{tp: tp, ca: ca, client: &http.Client{Transport: tr, Timeout: ioTimeout}, seen: seen}
}

func (e *brokerEnv) get(t *testing.T, rawURL string, header http.Header) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, rawURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header = header
	resp, err := e.client.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", rawURL, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(body)
}

// TestBroker: through the real proxy, a client that trusts only the
// sandbox's CA reaches an intercepted host, which receives the value in
// place of the placeholder (in several headers, Basic credentials, over
// HTTP/1.1 and HTTP/2, keep-alive); the placeholder sent to another
// intercepted host, or over plain HTTP, is refused before it leaves; an
// upstream whose certificate is for another name or from an unknown
// authority is refused with a reason that says so; the value is in no log
// line; a host without a secret stays a blind tunnel.
func TestBroker(t *testing.T) {
	for _, h2 := range []bool{false, true} {
		name := "HTTP1"
		if h2 {
			name = "HTTP2"
		}
		t.Run(name, func(t *testing.T) {
			e := newBrokerEnv(t, h2)
			for i := range 2 { // the second on the kept connection
				resp, body := e.get(t, "https://api.example.com/v1/models", http.Header{
					"Authorization": {"Bearer " + testPH}, "X-Api-Key": {testPH}})
				want := "api got Bearer " + testValue + "|" + testValue + "|host api.example.com|sni api.example.com"
				if resp.StatusCode != 200 || body != want {
					t.Fatalf("request %d: %d %q, want %q", i, resp.StatusCode, body, want)
				}
				if wantMajor := map[bool]int{false: 1, true: 2}[h2]; resp.ProtoMajor != wantMajor {
					t.Fatalf("request %d over HTTP/%d, want HTTP/%d", i, resp.ProtoMajor, wantMajor)
				}
			}
			if _, body := e.get(t, "https://api.example.com/", http.Header{"Authorization": {basic("x", testPH)}}); !strings.Contains(body, basic("x", testValue)) {
				t.Fatalf("basic credentials: %q", body)
			}
			resp, body := e.get(t, "https://other.example.com/", http.Header{"Authorization": {"Bearer " + testPH}})
			wantRefused(t, resp, body, http.StatusForbidden, ReasonSecretHost)
			resp, body = e.get(t, "http://other.example.com/", http.Header{"X-Api-Key": {testPH}})
			wantRefused(t, resp, body, http.StatusForbidden, ReasonSecretHost)
			resp, body = e.get(t, "http://api.example.com/", http.Header{"X-Api-Key": {testPH}})
			wantRefused(t, resp, body, http.StatusForbidden, ReasonSecretHost)
			if strings.Contains(e.seen.String(), "other") {
				t.Fatalf("another host saw a request:\n%s", e.seen)
			}
			resp, body = e.get(t, "https://wrong.test/", nil)
			wantRefused(t, resp, body, http.StatusBadGateway, ReasonUpstreamCert)
			if !strings.Contains(body, "not for this name") {
				t.Fatalf("wrong name: %q does not say why", body)
			}
			resp, body = e.get(t, "https://selfsigned.example.com/", nil)
			wantRefused(t, resp, body, http.StatusBadGateway, ReasonUpstreamCert)
			if !strings.Contains(body, "authority the worker does not trust") {
				t.Fatalf("unknown authority: %q does not say why", body)
			}
			resp, body = e.get(t, "https://expired.example.com/", nil)
			wantRefused(t, resp, body, http.StatusBadGateway, ReasonUpstreamCert)
			if !strings.Contains(body, "expired") {
				t.Fatalf("expired: %q does not say why", body)
			}
			// A host without a secret: a blind tunnel, whose certificate is
			// the upstream's own.
			resp, body = e.get(t, "https://blind.example.com/", http.Header{"X-Api-Key": {"none"}})
			if resp.StatusCode != 200 || !strings.HasPrefix(body, "blind got") || resp.TLS.PeerCertificates[0].Issuer.CommonName == e.ca.Leaf.Subject.CommonName {
				t.Fatalf("blind tunnel: %d %q", resp.StatusCode, body)
			}
			if logs := e.tp.logs.String(); strings.Contains(logs, testValue) || !strings.Contains(logs, `"reason":"secret-host-mismatch"`) ||
				!strings.Contains(logs, "secret API_KEY") {
				t.Fatalf("the log holds the value, or misses the refusal by name:\n%s", logs)
			}
			var m strings.Builder
			e.tp.reg.WriteText(&m)
			if !strings.Contains(m.String(), MetricSecrets+`{outcome="refused"} 3`) || strings.Contains(m.String(), testValue) {
				t.Fatalf("metrics:\n%s", m.String())
			}
		})
	}
}

// TestBrokerStreamingPost: a request body streams up and the response
// down through the interception.
func TestBrokerStreamingPost(t *testing.T) {
	e := newBrokerEnv(t, false)
	payload := strings.Repeat("0123456789", 200000)
	req, _ := http.NewRequest(http.MethodPost, "https://api.example.com/upload", io.NopCloser(strings.NewReader(payload)))
	req.Header.Set("X-Api-Key", testPH)
	resp, err := e.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil || string(got) != payload {
		t.Fatalf("echo of %d bytes: %d bytes, %v", len(payload), len(got), err)
	}
}

// TestBrokerWebSocket: a WebSocket upgrade to an intercepted host is
// passed on after its headers got their secrets, and messages flow both
// ways.
func TestBrokerWebSocket(t *testing.T) {
	e := newBrokerEnv(t, false)
	up := websocket.Upgrader{}
	wsAddr := func() string {
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "Bearer "+testValue {
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
			c, err := up.Upgrade(w, r, nil)
			if err != nil {
				return
			}
			defer c.Close()
			for {
				kind, msg, err := c.ReadMessage()
				if err != nil {
					return
				}
				c.WriteMessage(kind, append([]byte("echo "), msg...))
			}
		}))
		srv.StartTLS()
		t.Cleanup(srv.Close)
		return srv.Listener.Addr().String()
	}()
	e.tp.dial.set(netip.AddrPortFrom(apiV4, 443), wsAddr)
	tr := e.client.Transport.(*http.Transport)
	d := websocket.Dialer{
		Proxy:           tr.Proxy,
		NetDialContext:  tr.DialContext,
		TLSClientConfig: tr.TLSClientConfig,
	}
	c, resp, err := d.Dial("wss://api.example.com/ws", http.Header{"Authorization": {"Bearer " + testPH}})
	if err != nil {
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		t.Fatalf("dial: %v (status %d)", err, status)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(ioTimeout))
	for _, m := range []string{"one", "two"} {
		if err := c.WriteMessage(websocket.TextMessage, []byte(m)); err != nil {
			t.Fatal(err)
		}
		_, got, err := c.ReadMessage()
		if err != nil || string(got) != "echo "+m {
			t.Fatalf("got %q, %v", got, err)
		}
	}
}
