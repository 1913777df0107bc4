package egress

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"testing"
	"time"

	"openvibe.network/agentsandbox"
	"openvibe.network/agentsandbox/egress/policy"
)

// benchProxy is a proxy for benchmarks: no log, private metrics, "public"
// addresses served by loopback through TestDial.
func benchProxy(b *testing.B) *testProxy {
	b.Helper()
	tp := newTestProxy(b, func(c *ProxyConfig) { c.Logger = nil })
	return tp
}

// sink accepts connections on loopback and reads them to the end with a
// large buffer; done gets the byte count of each connection.
func sink(b testing.TB) (string, chan int64) {
	b.Helper()
	done := make(chan int64, 1)
	addr := listenLoopback(b, func(c net.Conn) {
		defer c.Close()
		buf := make([]byte, 1<<20)
		var n int64
		for {
			k, err := c.Read(buf)
			n += int64(k)
			if err != nil {
				break
			}
		}
		done <- n
	})
	return addr, done
}

// push writes size bytes to c in 1 MiB writes, half-closes it and waits for
// the sink to have read them all; it returns how long that took.
func push(b testing.TB, c net.Conn, size int64, done chan int64) time.Duration {
	b.Helper()
	buf := make([]byte, 1<<20)
	start := time.Now()
	for sent := int64(0); sent < size; sent += int64(len(buf)) {
		if _, err := c.Write(buf); err != nil {
			b.Fatal(err)
		}
	}
	c.(interface{ CloseWrite() error }).CloseWrite()
	if n := <-done; n != size {
		b.Fatalf("sink got %d bytes, want %d", n, size)
	}
	return time.Since(start)
}

// connectVia opens a CONNECT tunnel to target through the proxy at
// network/address.
func connectVia(tb testing.TB, network, address, target string) net.Conn {
	tb.Helper()
	c, err := net.Dial(network, address)
	if err != nil {
		tb.Fatal(err)
	}
	io.WriteString(c, "CONNECT "+target+" HTTP/1.1\r\nHost: "+target+"\r\n\r\n")
	r := bufio.NewReaderSize(c, 128)
	resp, err := http.ReadResponse(r, &http.Request{Method: http.MethodConnect})
	if err != nil || resp.StatusCode != 200 || r.Buffered() != 0 {
		tb.Fatalf("CONNECT %s via %s: %v %v", target, address, resp, err)
	}
	return c
}

// BenchmarkTunnelThroughput copies 64 MiB per iteration directly to a
// loopback sink and the same through a CONNECT tunnel of the proxy (client
// on the sandbox's unix socket), and through the in-sandbox bridge too;
// it reports each rate and the ratios to direct.
func BenchmarkTunnelThroughput(b *testing.B) {
	const size = 64 << 20
	tp := benchProxy(b)
	addr, done := sink(b)
	tp.dial.set(netip.AddrPortFrom(publicV4, 443), addr)
	br := startTestBridge(b, tp, false)
	connect := func(network, address string) net.Conn { return connectVia(b, network, address, "public.test:443") }
	var direct, proxied, bridged time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c, err := net.Dial("tcp4", addr)
		if err != nil {
			b.Fatal(err)
		}
		direct += push(b, c, size, done)
		c.Close()
		c = connect("unix", tp.socket)
		proxied += push(b, c, size, done)
		c.Close()
		c = connect("tcp4", br.ProxyAddr())
		bridged += push(b, c, size, done)
		c.Close()
	}
	b.StopTimer()
	rate := func(d time.Duration) float64 { return float64(size) * float64(b.N) / d.Seconds() / (1 << 20) }
	b.ReportMetric(rate(direct), "direct-MiB/s")
	b.ReportMetric(rate(proxied), "proxy-MiB/s")
	b.ReportMetric(rate(bridged), "bridge-MiB/s")
	b.ReportMetric(rate(proxied)/rate(direct), "proxy/direct")
	b.ReportMetric(rate(bridged)/rate(direct), "bridge/direct")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkHTTPAddedLatency times small GETs (new connection each, as the
// proxy serves one request per connection) to a loopback server, directly
// and through the proxy, interleaved, and reports the p50 of each and the
// added p50.
func BenchmarkHTTPAddedLatency(b *testing.B) {
	tp := benchProxy(b)
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "small")
	})}
	go srv.Serve(ln)
	b.Cleanup(func() { srv.Close() })
	tp.dial.set(netip.AddrPortFrom(publicV4, 80), ln.Addr().String())
	get := func(network, address, raw string) time.Duration {
		start := time.Now()
		c, err := net.Dial(network, address)
		if err != nil {
			b.Fatal(err)
		}
		io.WriteString(c, raw)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != 200 {
			b.Fatalf("GET: %v %v", resp, err)
		}
		io.Copy(io.Discard, resp.Body)
		c.Close()
		return time.Since(start)
	}
	var direct, proxied []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		direct = append(direct, get("tcp4", ln.Addr().String(),
			"GET /x HTTP/1.1\r\nHost: public.test\r\nConnection: close\r\n\r\n"))
		proxied = append(proxied, get("unix", tp.socket,
			"GET http://public.test/x HTTP/1.1\r\nHost: public.test\r\n\r\n"))
	}
	b.StopTimer()
	p50 := func(d []time.Duration) float64 {
		slices.Sort(d)
		return float64(d[len(d)/2].Microseconds())
	}
	dp, pp := p50(direct), p50(proxied)
	b.ReportMetric(dp, "direct-p50-µs")
	b.ReportMetric(pp, "proxy-p50-µs")
	b.ReportMetric(pp-dp, "added-p50-µs")
}

// policy256 is an allow-list policy of 256 entries: names, wildcards and
// literals, with the name the benchmarks ask for last.
func policy256(tb testing.TB) *policy.Policy {
	tb.Helper()
	var allow []string
	for i := 0; len(allow) < 255; i++ {
		allow = append(allow, fmt.Sprintf("host%d.example.org", i), fmt.Sprintf("*.zone%d.example.net:443", i),
			fmt.Sprintf("198.51.%d.%d", i/250, i%250+1))
	}
	allow = append(allow[:255], "public.test")
	return compiled(tb, agentsandbox.EgressPolicy{Mode: agentsandbox.EgressAllow, Allow: agentsandbox.EgressHosts(allow...), Deny: nil})
}

// BenchmarkGuardPolicy is the guard's cost per CONNECT decision (parse,
// port, policy, one resolution by an in-memory resolver, classification),
// public mode against allow mode with a 256-entry policy, interleaved; it
// reports each and the difference.
func BenchmarkGuardPolicy(b *testing.B) {
	g := testGuard(newFakeResolver(map[string][][]netip.Addr{"public.test": {addrs("93.184.216.34")}}))
	pol := policy256(b)
	ctx := context.Background()
	for _, p := range []*policy.Policy{nil, pol} {
		if v := g.CheckPolicy(ctx, "public.test:443", p); !v.Allowed {
			b.Fatalf("not allowed: %+v", v)
		}
	}
	const batch = 1000
	var public, allow []float64
	b.ResetTimer()
	type side struct {
		p   *policy.Policy
		out *[]float64
	}
	for i := 0; i < b.N; i += batch {
		sides := []side{{nil, &public}, {pol, &allow}}
		if i/batch%2 == 1 { // A,B then B,A: neither side always runs first
			sides[0], sides[1] = sides[1], sides[0]
		}
		for _, side := range sides {
			start := time.Now()
			for range batch {
				g.CheckPolicy(ctx, "public.test:443", side.p)
			}
			*side.out = append(*side.out, float64(time.Since(start).Nanoseconds())/batch)
		}
	}
	b.StopTimer()
	pm, am := median(public), median(allow)
	b.ReportMetric(pm, "public-ns/check")
	b.ReportMetric(am, "allow256-ns/check")
	b.ReportMetric(am-pm, "added-ns/check")
	b.ReportMetric(0, "ns/op")
}

// clientHello returns the first bytes a crypto/tls client sends for sni.
func clientHello(tb testing.TB, sni string) []byte {
	tb.Helper()
	c1, c2 := net.Pipe()
	defer c1.Close()
	defer c2.Close()
	go tls.Client(c1, &tls.Config{ServerName: sni, InsecureSkipVerify: true}).Handshake()
	raw, got, err := readClientHello(c2)
	if err != nil || got != sni {
		tb.Fatalf("read hello: %q %v", got, err)
	}
	return raw
}

// BenchmarkSNIPeek is the cost of reading a tunnel's ClientHello (as
// crypto/tls sends it, about 1.8 KiB with its post-quantum key share) and
// finding its SNI.
func BenchmarkSNIPeek(b *testing.B) {
	hello := clientHello(b, "files.pythonhosted.org")
	b.SetBytes(int64(len(hello)))
	b.ReportAllocs()
	r := bytes.NewReader(hello)
	for b.Loop() {
		r.Reset(hello)
		if _, sni, err := readClientHello(r); err != nil || sni == "" {
			b.Fatal(sni, err)
		}
	}
}
