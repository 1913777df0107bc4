package egress

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"openvibe.network/agentsandbox/internal/metrics"
)

func TestProxyHTTP(t *testing.T) {
	tp := newTestProxy(t, nil)
	seen := make(chan *http.Request, 1)
	tp.serveHTTP(t, publicV4, 80, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r
		w.Header().Set("Connection", "close, X-Secret-Hop")
		w.Header().Set("X-Secret-Hop", "1")
		io.WriteString(w, "hello from public")
	}))
	resp, body := tp.do(t, "GET http://public.test/path?q=1 HTTP/1.1\r\nHost: other.test\r\n"+
		"Proxy-Authorization: Basic c2VjcmV0\r\nProxy-Connection: keep-alive\r\nConnection: X-Hop\r\nX-Hop: 1\r\n"+
		"X-Kept: yes\r\n\r\n")
	if resp.StatusCode != 200 || body != "hello from public" {
		t.Fatalf("got %d %q", resp.StatusCode, body)
	}
	if resp.Header.Get("X-Secret-Hop") != "" {
		t.Error("a hop-by-hop response header was passed back")
	}
	r := <-seen
	if r.RequestURI != "/path?q=1" || r.Host != "public.test" {
		t.Errorf("upstream saw %q Host %q, want origin-form /path?q=1 for public.test", r.RequestURI, r.Host)
	}
	for _, h := range []string{"Proxy-Authorization", "Proxy-Connection", "X-Hop"} {
		if r.Header.Get(h) != "" {
			t.Errorf("upstream saw %s", h)
		}
	}
	if r.Header.Get("X-Kept") != "yes" {
		t.Error("an end-to-end header was dropped")
	}
}

func TestProxyResolvesOnceAndDialsTheCheckedAddress(t *testing.T) {
	tp := newTestProxy(t, nil)
	tp.serveHTTP(t, publicV4, 80, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "checked")
	}))
	// flip.test answers public first and 127.0.0.1 to any later lookup.
	resp, body := tp.do(t, "GET http://flip.test/ HTTP/1.1\r\nHost: flip.test\r\n\r\n")
	if resp.StatusCode != 200 || body != "checked" {
		t.Fatalf("got %d %q", resp.StatusCode, body)
	}
	if n := tp.resolver.count("flip.test"); n != 1 {
		t.Fatalf("resolved %d times, want 1", n)
	}
	want := []netip.AddrPort{netip.AddrPortFrom(publicV4, 80)}
	if got := tp.dial.dialed(); len(got) != 1 || got[0] != want[0] {
		t.Fatalf("dialed %v, want %v", got, want)
	}
}

func TestProxyRefusals(t *testing.T) {
	tp := newTestProxy(t, nil)
	// status and wire are what the sandbox is told; reason is what the log
	// and the metrics say.
	cases := []struct {
		name, raw    string
		status       int
		wire, reason string
	}{
		{"HTTPPrivateLiteral", "GET http://10.0.0.1/ HTTP/1.1\r\nHost: 10.0.0.1\r\n\r\n", 403, ReasonRefused, ReasonPrivate},
		{"ConnectPrivateLiteral", "CONNECT 10.0.0.1:443 HTTP/1.1\r\nHost: 10.0.0.1:443\r\n\r\n", 403, ReasonRefused, ReasonPrivate},
		{"HTTPOnePublicOnePrivate", "GET http://mixed.test/ HTTP/1.1\r\nHost: mixed.test\r\n\r\n", 403, ReasonRefused, ReasonPrivate},
		{"ConnectOnePublicOnePrivate", "CONNECT mixed.test:443 HTTP/1.1\r\nHost: mixed.test:443\r\n\r\n", 403, ReasonRefused, ReasonPrivate},
		{"HTTPMetadata", "GET http://169.254.169.254/latest/meta-data/ HTTP/1.1\r\nHost: x\r\n\r\n", 403, ReasonRefused, ReasonPrivate},
		{"HTTPPort8080", "GET http://public.test:8080/ HTTP/1.1\r\nHost: public.test:8080\r\n\r\n", 403, ReasonPort, ReasonPort},
		{"ConnectPort22", "CONNECT public.test:22 HTTP/1.1\r\nHost: public.test:22\r\n\r\n", 403, ReasonPort, ReasonPort},
		{"ConnectPort80Ok8443", "CONNECT 93.184.216.34:8443 HTTP/1.1\r\nHost: x\r\n\r\n", 403, ReasonPort, ReasonPort},
		{"HTTPUserinfoDecoy", "GET http://public.test@127.0.0.1/ HTTP/1.1\r\nHost: public.test\r\n\r\n", 403, ReasonNotCanonical, ReasonNotCanonical},
		{"ConnectUserinfoDecoy", "CONNECT public.test@127.0.0.1:443 HTTP/1.1\r\nHost: x\r\n\r\n", 403, ReasonNotCanonical, ReasonNotCanonical},
		{"HTTPDecimal", "GET http://2130706433/ HTTP/1.1\r\nHost: x\r\n\r\n", 403, ReasonNotCanonical, ReasonNotCanonical},
		{"HTTPShort", "GET http://127.1/ HTTP/1.1\r\nHost: x\r\n\r\n", 403, ReasonNotCanonical, ReasonNotCanonical},
		{"ConnectHex", "CONNECT 0x7f.1:443 HTTP/1.1\r\nHost: x\r\n\r\n", 403, ReasonNotCanonical, ReasonNotCanonical},
		{"ConnectOctal", "CONNECT 0177.0.0.1:443 HTTP/1.1\r\nHost: x\r\n\r\n", 403, ReasonNotCanonical, ReasonNotCanonical},
		{"HTTPTrailingDot", "GET http://127.0.0.1./ HTTP/1.1\r\nHost: x\r\n\r\n", 403, ReasonNotCanonical, ReasonNotCanonical},
		{"HTTPMappedV6", "GET http://[::ffff:127.0.0.1]/ HTTP/1.1\r\nHost: x\r\n\r\n", 403, ReasonRefused, ReasonPrivate},
		{"HTTPZone", "GET http://[fe80::1%25eth0]/ HTTP/1.1\r\nHost: x\r\n\r\n", 403, ReasonNotCanonical, ReasonNotCanonical},
		{"HTTPSAbsoluteForm", "GET https://public.test/ HTTP/1.1\r\nHost: public.test\r\n\r\n", 400, ReasonBadRequest, ReasonBadRequest},
		{"OriginFormToProxyItself", "GET / HTTP/1.1\r\nHost: 127.0.0.1:3128\r\n\r\n", 403, ReasonRefused, ReasonSelf},
		{"ProxyOwnAddress", "CONNECT 93.184.216.100:443 HTTP/1.1\r\nHost: x\r\n\r\n", 403, ReasonRefused, ReasonSelf},
		{"ProxyOwnAddressByName", "GET http://self.test/ HTTP/1.1\r\nHost: self.test\r\n\r\n", 403, ReasonRefused, ReasonSelf},
		// No oracle: a name that does not exist is told what a private one is.
		{"ResolveFailure", "GET http://nxdomain.test/ HTTP/1.1\r\nHost: nxdomain.test\r\n\r\n", 403, ReasonRefused, ReasonResolve},
		{"ConnectResolveFailure", "CONNECT nxdomain.test:443 HTTP/1.1\r\nHost: x\r\n\r\n", 403, ReasonRefused, ReasonResolve},
		{"ConnectPrivateName", "CONNECT private.test:443 HTTP/1.1\r\nHost: x\r\n\r\n", 403, ReasonRefused, ReasonPrivate},
		{"DialRefused", "CONNECT public.test:443 HTTP/1.1\r\nHost: x\r\n\r\n", 502, ReasonDialFailed, ReasonDialFailed},
	}
	bodies := map[string]string{}
	want := map[string]float64{}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := tp.do(t, tc.raw)
			wantRefused(t, resp, body, tc.status, tc.wire)
			if tc.wire == ReasonRefused {
				bodies[tc.name] = strings.SplitN(body, "(", 2)[0] + resp.Status
			}
		})
		want[verdictOf(tc.reason)+"/"+tc.reason]++
	}
	for name, b := range bodies {
		if b != bodies["ConnectPrivateName"] {
			t.Errorf("%s answered %q, a private name %q: the answers must not tell them apart", name, b, bodies["ConnectPrivateName"])
		}
	}
	waitMetric(t, tp.reg, len(cases))
	if diff := cmp.Diff(want, requestCounts(t, tp.reg)); diff != "" {
		t.Errorf("precise reasons counted (-want +got):\n%s", diff)
	}
	// Not a proxy request: closed at once, unanswered, and nothing of what
	// was sent is logged.
	for _, raw := range []string{
		"HELLO secret-token-in-garbage\r\n\r\n",
		"GET http://%31%32%37.0.0.1/?secret-token-in-garbage HTTP/1.1\r\nHost: x\r\n\r\n",
		"R\x00\x00\x00\x20{\"op\":\"exec\",\"env\":{\"K\":\"secret-token-in-garbage\"}}",
	} {
		c := tp.dialProxy(t)
		io.WriteString(c, raw)
		if b, err := io.ReadAll(c); err != nil || len(b) != 0 {
			t.Errorf("answer to %q: %q %v, want the connection closed unanswered", raw, b, err)
		}
	}
	if strings.Contains(tp.logs.String(), "secret-token-in-garbage") {
		t.Errorf("the proxy logged what a non-request sent:\n%s", tp.logs.String())
	}
	// Only DialRefused got as far as a dial, and only to the checked address.
	if got := tp.dial.dialed(); len(got) != 1 || got[0] != netip.AddrPortFrom(publicV4, 443) {
		t.Fatalf("dialed %v, want only %s:443", got, publicV4)
	}
}

func TestProxyDialTimeout(t *testing.T) {
	tp := newTestProxy(t, func(c *ProxyConfig) { c.DialTimeout = 50 * time.Millisecond })
	tp.dial.block = true
	for _, raw := range []string{
		"CONNECT public.test:443 HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET http://public.test/ HTTP/1.1\r\nHost: public.test\r\n\r\n",
	} {
		resp, body := tp.do(t, raw)
		wantRefused(t, resp, body, 504, ReasonDialTimeout)
	}
}

func TestProxyRedirectIsPassedBack(t *testing.T) {
	tp := newTestProxy(t, nil)
	tp.serveHTTP(t, publicV4, 80, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://10.0.0.1/secret", http.StatusFound)
	}))
	resp, _ := tp.do(t, "GET http://public.test/ HTTP/1.1\r\nHost: public.test\r\n\r\n")
	if resp.StatusCode != 302 || resp.Header.Get("Location") != "http://10.0.0.1/secret" {
		t.Fatalf("got %d Location %q, want the 302 itself", resp.StatusCode, resp.Header.Get("Location"))
	}
	if got := tp.dial.dialed(); len(got) != 1 {
		t.Fatalf("dialed %v, want one dial (no redirect followed)", got)
	}
}

func TestProxyConnectTunnel(t *testing.T) {
	for _, tc := range []struct{ name, target string }{
		{"Name", "public.test:443"},
		{"V6Literal", "[2606:4700:4700::1111]:443"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tp := newTestProxy(t, nil)
			tp.serveEcho(t, publicV4, 443)
			tp.serveEcho(t, publicV6, 443)
			c := tp.dialProxy(t)
			// Early data right behind the request must not be lost.
			io.WriteString(c, "CONNECT "+tc.target+" HTTP/1.1\r\nHost: "+tc.target+"\r\n\r\nearly\n")
			br := bufio.NewReader(c)
			resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("CONNECT: %v %v", resp, err)
			}
			io.WriteString(c, "late\n")
			for _, want := range []string{"early\n", "late\n"} {
				if line, err := br.ReadString('\n'); err != nil || line != want {
					t.Fatalf("echo: %q %v, want %q", line, err, want)
				}
			}
			c.(*net.UnixConn).CloseWrite()
			if _, err := br.ReadByte(); err != io.EOF {
				t.Fatalf("after half-close: %v, want EOF", err)
			}
			c.Close()
			line := waitLog(t, tp, `"method":"CONNECT"`)
			var rec map[string]any
			if err := json.Unmarshal([]byte(line), &rec); err != nil {
				t.Fatal(err)
			}
			for k, want := range map[string]any{"sandbox": "sbx-test", "port": 443.0, "verdict": "allowed",
				"reason": "ok", "bytes_up": 11.0, "bytes_down": 11.0, "status": 200.0} {
				if rec[k] != want {
					t.Errorf("log %s = %v, want %v (line %s)", k, rec[k], want, line)
				}
			}
			for _, k := range []string{"host", "address", "duration_ms"} {
				if rec[k] == nil || rec[k] == "" {
					t.Errorf("log has no %s: %s", k, line)
				}
			}
		})
	}
}

// waitLog waits for the log line that contains s (the line is written when
// the connection ends, after the client sees it end).
func waitLog(tb testing.TB, tp *testProxy, s string) string {
	tb.Helper()
	deadline := time.Now().Add(ioTimeout)
	for time.Now().Before(deadline) {
		for _, l := range tp.logLines(tb) {
			if strings.Contains(l, s) {
				return l
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	tb.Fatalf("no log line with %s in %s", s, tp.logs.String())
	return ""
}

func TestProxyMetricsAndLog(t *testing.T) {
	tp := newTestProxy(t, nil)
	tp.serveHTTP(t, publicV4, 80, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	}))
	tp.do(t, "GET http://public.test/ HTTP/1.1\r\nHost: public.test\r\n\r\n")
	tp.do(t, "GET http://10.0.0.1/ HTTP/1.1\r\nHost: 10.0.0.1\r\n\r\n")
	tp.do(t, "CONNECT public.test:22 HTTP/1.1\r\nHost: x\r\n\r\n")
	line := waitLog(t, tp, `"reason":"port-not-allowed"`)
	for _, want := range []string{`"sandbox":"sbx-test"`, `"host":"public.test"`, `"port":22`, `"verdict":"refused"`} {
		if !strings.Contains(line, want) {
			t.Errorf("log line %s lacks %s", line, want)
		}
	}
	waitLog(t, tp, `"reason":"private-address"`)
	allowed := waitLog(t, tp, `"reason":"ok"`)
	if !strings.Contains(allowed, `"address":"93.184.216.34"`) || strings.Contains(allowed, `"bytes_down":0`) {
		t.Errorf("allowed line: %s", allowed)
	}
	waitMetric(t, tp.reg, 3)
	want := map[string]float64{"allowed/ok": 1, "refused/private-address": 1, "refused/port-not-allowed": 1}
	if diff := cmp.Diff(want, requestCounts(t, tp.reg)); diff != "" {
		t.Errorf("%s (-want +got):\n%s", MetricRequests, diff)
	}
	if n := metricValue(t, tp.reg, MetricAttached, map[string]string{"mode": "public"}); n != 1 {
		t.Errorf("%s{mode=public} = %v, want 1", MetricAttached, n)
	}
	if down := metricValue(t, tp.reg, MetricBytes, map[string]string{"direction": "down", "verdict": "allowed", "reason": "ok"}); down == 0 {
		t.Error("no bytes counted down")
	}
}

// TestProxyConnLimit: past MaxConns the proxy accepts nothing more of the
// sandbox: further connections wait in a short queue, unserved, and past it
// the kernel refuses them at once, so a flood costs the worker no
// descriptor; a queued connection is served once a slot frees.
func TestProxyConnLimit(t *testing.T) {
	tp := newTestProxy(t, func(c *ProxyConfig) { c.MaxConns = 2 })
	tp.serveEcho(t, publicV4, 443)
	connect := func(c net.Conn) *bufio.Reader {
		t.Helper()
		io.WriteString(c, "CONNECT public.test:443 HTTP/1.1\r\nHost: x\r\n\r\n")
		br := bufio.NewReader(c)
		if resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect}); err != nil || resp.StatusCode != 200 {
			t.Fatalf("CONNECT: %v %v", resp, err)
		}
		return br
	}
	held := []net.Conn{tp.dialProxy(t), tp.dialProxy(t)}
	for _, c := range held {
		connect(c)
	}
	var queued []net.Conn
	var refused error
	for range 16 {
		c, err := net.Dial("unix", tp.socket)
		if err != nil {
			refused = err
			break
		}
		t.Cleanup(func() { c.Close() })
		queued = append(queued, c)
	}
	if !errors.Is(refused, syscall.EAGAIN) || len(queued) == 0 {
		t.Fatalf("after %d queued connections past a limit of 2: %v, want the kernel to refuse with EAGAIN", len(queued), refused)
	}
	io.WriteString(queued[0], "CONNECT public.test:443 HTTP/1.1\r\nHost: x\r\n\r\n")
	queued[0].SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	var one [1]byte
	if _, err := queued[0].Read(one[:]); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a queued connection was answered while the limit is reached: %v", err)
	}
	held[0].Close()
	queued[0].SetReadDeadline(time.Now().Add(ioTimeout))
	if resp, err := http.ReadResponse(bufio.NewReader(queued[0]), &http.Request{Method: http.MethodConnect}); err != nil || resp.StatusCode != 200 {
		t.Fatalf("the queued CONNECT once a slot freed: %v %v", resp, err)
	}
}

func TestProxyIdleTimeout(t *testing.T) {
	tp := newTestProxy(t, func(c *ProxyConfig) { c.IdleTimeout = 100 * time.Millisecond })
	tp.serveEcho(t, publicV4, 443)
	c := tp.dialProxy(t)
	io.WriteString(c, "CONNECT public.test:443 HTTP/1.1\r\nHost: x\r\n\r\n")
	br := bufio.NewReader(c)
	if resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect}); err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %v %v", resp, err)
	}
	// Nothing is sent: the proxy ends the tunnel (the client's deadline is
	// the 30 s hang guard, far beyond the idle timeout).
	if _, err := br.ReadByte(); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read on an idle tunnel: %v, want the proxy to close it", err)
	}
}

// TestAttach: the sandbox's socket has no name on disk; only its
// descriptor leads to it, owned by the sandbox's uid with mode 0600; detach
// ends its tunnels and the socket.
func TestAttach(t *testing.T) {
	tp := newTestProxy(t, nil)
	var st syscall.Stat_t
	if err := syscall.Fstat(int(tp.sock.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFSOCK || st.Mode&0o777 != 0o600 || int(st.Uid) != os.Getuid() {
		t.Fatalf("socket mode %o owner %d, want a socket with 0600 owned by %d", st.Mode, st.Uid, os.Getuid())
	}
	if st.Nlink != 0 {
		t.Fatalf("the socket still has %d names on disk", st.Nlink)
	}
	tp.serveEcho(t, publicV4, 443)
	c := tp.dialProxy(t)
	io.WriteString(c, "CONNECT public.test:443 HTTP/1.1\r\nHost: x\r\n\r\n")
	br := bufio.NewReader(c)
	if resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect}); err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %v %v", resp, err)
	}
	tp.detach()
	if _, err := br.ReadByte(); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("tunnel after detach: %v, want closed", err)
	}
	if c, err := net.Dial("unix", tp.socket); err == nil {
		c.Close()
		t.Fatal("the socket still takes connections after detach")
	}
	tp.detach() // idempotent
	tp.proxy.Close()
	if _, _, err := tp.proxy.Attach(context.Background(), "late", filepath.Join(t.TempDir(), "late.sock"), os.Getuid(), AttachOptions{}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Attach after Close: %v, want ErrClosed", err)
	}
}

func TestNewProxyErrors(t *testing.T) {
	if _, err := NewProxy(ProxyConfig{}); err == nil {
		t.Error("NewProxy without a guard succeeded")
	}
	tp := newTestProxy(t, nil)
	func() {
		defer func() {
			if recover() == nil {
				t.Error("NewProxy registering the same metrics twice did not panic")
			}
		}()
		_, _ = NewProxy(ProxyConfig{Guard: testGuard(nil), Metrics: tp.reg})
	}()
}

// requestCounts returns the request counter's series as verdict/reason ->
// count.
func requestCounts(tb testing.TB, reg *metrics.Registry) map[string]float64 {
	tb.Helper()
	out := map[string]float64{}
	for _, m := range series(tb, reg, MetricRequests) {
		out[m.labels["verdict"]+"/"+m.labels["reason"]] = m.value
	}
	return out
}

// waitMetric waits until the request counter holds n requests (a request
// is counted once its answer is written).
func waitMetric(tb testing.TB, reg *metrics.Registry, n int) {
	tb.Helper()
	deadline := time.Now().Add(ioTimeout)
	for {
		total := 0.0
		for _, v := range requestCounts(tb, reg) {
			total += v
		}
		if total >= float64(n) || time.Now().After(deadline) {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// sample is one series of a counter or gauge.
type sample struct {
	labels map[string]string
	value  float64
}

// series parses reg's exposition and returns the series of name.
func series(tb testing.TB, reg *metrics.Registry, name string) []sample {
	tb.Helper()
	var b bytes.Buffer
	reg.WriteText(&b)
	parser := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := parser.TextToMetricFamilies(&b)
	if err != nil {
		tb.Fatal(err)
	}
	var out []sample
	for _, m := range fams[name].GetMetric() {
		s := sample{labels: map[string]string{}, value: m.GetGauge().GetValue()}
		if m.GetCounter() != nil {
			s.value = m.GetCounter().GetValue()
		}
		for _, l := range m.GetLabel() {
			s.labels[l.GetName()] = l.GetValue()
		}
		out = append(out, s)
	}
	return out
}

// metricValue is the value of the counter or gauge name with exactly these
// labels in reg (0 when there is no such series).
func metricValue(tb testing.TB, reg *metrics.Registry, name string, labels map[string]string) float64 {
	tb.Helper()
	for _, s := range series(tb, reg, name) {
		if len(s.labels) == len(labels) && cmp.Equal(s.labels, labels, cmpopts.EquateEmpty()) {
			return s.value
		}
	}
	return 0
}

// TestProxyHeaderLimits: a request header over MaxHeaderBytes is answered
// 431 in every mode (in a kept-alive connection and in a port-80 tunnel
// too); a response header over maxResponseHeader is a 502.
func TestProxyHeaderLimits(t *testing.T) {
	big := strings.Repeat("x", MaxHeaderBytes)
	for _, tc := range []struct {
		name string
		opts AttachOptions
		pre  string // sent before the over-long request, each answered 200
	}{
		{"Public", AttachOptions{}, ""},
		{"PublicKeptAlive", AttachOptions{}, "GET http://public.test/ok HTTP/1.1\r\nHost: public.test\r\n\r\n"},
		{"Allow", AttachOptions{Policy: pypiPolicy()}, ""},
		{"AllowTunnel", AttachOptions{Policy: pypiPolicy()}, "CONNECT public.test:80 HTTP/1.1\r\nHost: public.test:80\r\n\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tp := newPolicyProxy(t, nil, tc.opts)
			tp.serveHTTP(t, publicV4, 80, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
			c := tp.dialProxy(t)
			br := bufio.NewReader(c)
			if tc.pre != "" {
				io.WriteString(c, tc.pre)
				req, _ := http.ReadRequest(bufio.NewReader(strings.NewReader(tc.pre)))
				resp, err := http.ReadResponse(br, req)
				if err != nil || resp.StatusCode != 200 {
					t.Fatalf("before: %v %v", resp, err)
				}
				if req.Method != http.MethodConnect { // a tunnel's answer has no end
					io.Copy(io.Discard, resp.Body)
				}
			}
			target := "http://public.test/"
			if strings.HasPrefix(tc.pre, "CONNECT") {
				target = "/"
			}
			go io.WriteString(c, "GET "+target+" HTTP/1.1\r\nHost: public.test\r\nX-Big: "+big+"\r\n\r\n")
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("no answer to an over-long header: %v", err)
			}
			body, _ := io.ReadAll(resp.Body)
			wantRefused(t, resp, string(body), http.StatusRequestHeaderFieldsTooLarge, ReasonHeaderTooLarge)
		})
	}
	t.Run("Response", func(t *testing.T) {
		tp := newTestProxy(t, nil)
		bigResponse := strings.Repeat("x", maxResponseHeader)
		tp.serveHTTP(t, publicV4, 80, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Big", bigResponse)
		}))
		resp, sbody := tp.do(t, "GET http://public.test/ HTTP/1.1\r\nHost: public.test\r\n\r\n")
		wantRefused(t, resp, sbody, 502, ReasonUpstream)
	})
}

// TestProxyHeaderMemory: a sandbox's connections, as many as it may hold,
// each sending a header far over the bound and never finishing it, grow
// the worker's (this process's) heap by little more than MaxConns ×
// MaxHeaderBytes, and each is answered 431. Before the bound, each header
// was held up to 1 MiB (64 MiB per sandbox).
func TestProxyHeaderMemory(t *testing.T) {
	tp := newTestProxy(t, nil)
	const conns = DefaultMaxConns
	header := []byte("GET http://public.test/ HTTP/1.1\r\nHost: public.test\r\nX-Big: " + strings.Repeat("x", 900<<10))
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapInuse
	}
	cs := make([]net.Conn, conns)
	for i := range cs {
		cs[i] = tp.dialProxy(t)
	}
	before := heap()
	var wg sync.WaitGroup
	for _, c := range cs {
		wg.Go(func() { c.Write(header) }) // never finished; refused (EPIPE) or taken whole
	}
	wg.Wait()
	grown := int64(heap()) - int64(before)
	// The bound: each connection's buffer, its parse, and as much again
	// for everything else the test and the proxy allocate meanwhile.
	if limit := int64(conns * MaxHeaderBytes * 4); grown > limit {
		t.Errorf("the heap grew by %d KiB with %d never-finished headers, want under %d KiB", grown>>10, conns, limit>>10)
	}
	t.Logf("heap grew by %d KiB for %d connections", grown>>10, conns)
	for i, c := range cs {
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("connection %d: no answer: %v", i, err)
		}
		body, _ := io.ReadAll(resp.Body)
		wantRefused(t, resp, string(body), http.StatusRequestHeaderFieldsTooLarge, ReasonHeaderTooLarge)
	}
}

func TestProxyPostWithExpectContinue(t *testing.T) {
	tp := newTestProxy(t, nil)
	tp.serveHTTP(t, publicV4, 80, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		io.WriteString(w, r.Method+" "+string(b)+" upgrade="+r.Header.Get("Upgrade"))
	}))
	c := tp.dialProxy(t)
	io.WriteString(c, "POST http://public.test/ HTTP/1.1\r\nHost: public.test\r\nContent-Length: 5\r\n"+
		"Expect: 100-continue\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
	br := bufio.NewReader(c)
	if line, err := br.ReadString('\n'); err != nil || line != "HTTP/1.1 100 Continue\r\n" {
		t.Fatalf("before the body: %q %v, want 100 Continue", line, err)
	}
	br.ReadString('\n')
	io.WriteString(c, "hello")
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || string(body) != "POST hello upgrade=" {
		t.Fatalf("got %d %q", resp.StatusCode, body)
	}
}

// TestProxyStreamsResponses: what of a response body has arrived reaches
// the client before the proxy waits for more (the response is buffered only
// while the upstream's bytes are at hand), chunked or not.
func TestProxyStreamsResponses(t *testing.T) {
	for _, tc := range []struct {
		name   string
		length string // the Content-Length the upstream sends, "" for chunked
	}{
		{"chunked", ""},
		{"content-length", "6"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tp := newTestProxy(t, nil)
			seen := make(chan struct{})
			tp.serveHTTP(t, publicV4, 80, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tc.length != "" {
					w.Header().Set("Content-Length", tc.length)
				}
				io.WriteString(w, "one")
				w.(http.Flusher).Flush()
				select {
				case <-seen:
				case <-time.After(ioTimeout):
				}
				io.WriteString(w, "two")
			}))
			c := tp.dialProxy(t)
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(ioTimeout / 4)) // before the upstream gives up waiting
			io.WriteString(c, "GET http://public.test/ HTTP/1.1\r\nHost: public.test\r\n\r\n")
			br := bufio.NewReader(c)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			first := make([]byte, 3)
			if _, err := io.ReadFull(resp.Body, first); err != nil || string(first) != "one" {
				t.Fatalf("the first part: %q, %v (held back until the upstream sent the rest?)", first, err)
			}
			close(seen)
			rest, err := io.ReadAll(resp.Body)
			if err != nil || string(rest) != "two" {
				t.Fatalf("the rest: %q, %v", rest, err)
			}
		})
	}
}
