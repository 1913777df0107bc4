package egress

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"openvibe.network/agentsandbox/internal/tunnel"
)

// Environment of TestCompareProxies (scripts/bench-egress.sh sets it).
const (
	envSmokescreen = "AGENTSANDBOX_SMOKESCREEN_ADDR" // a running smokescreen, host:port
	envCompare     = "AGENTSANDBOX_COMPARE"          // "1" runs the comparison without smokescreen
	envUploadMiB   = "AGENTSANDBOX_COMPARE_UPLOAD_MIB"
	envRounds      = "AGENTSANDBOX_COMPARE_ROUNDS"
	envRequests    = "AGENTSANDBOX_COMPARE_REQUESTS"
	envChild       = "AGENTSANDBOX_COMPARE_CHILD" // set by TestCompareProxies for TestCompareProxyProcess
)

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

// side is one way to a loopback destination: connect opens a tunnel to the
// sink (a CONNECT for a proxy), client is a keep-alive HTTP client and url
// the small page's URL for it.
type side struct {
	name    string
	connect func(tb testing.TB) net.Conn
	client  *http.Client
	url     string
}

// TestCompareProxies measures, interleaved in one run on loopback, a large
// CONNECT upload and small keep-alive GETs directly, through this proxy
// (its unix socket, and the in-sandbox bridge in front of it; "public"
// destinations served by loopback through the test dial hook) and through
// smokescreen when envSmokescreen names one; it prints the medians and the
// ratios. It only runs when asked (scripts/bench-egress.sh).
func TestCompareProxies(t *testing.T) {
	smokescreen := os.Getenv(envSmokescreen)
	if smokescreen == "" && os.Getenv(envCompare) == "" {
		t.Skip("a measurement, run by scripts/bench-egress.sh (set " + envSmokescreen + " or " + envCompare + "=1)")
	}
	upload := int64(envInt(envUploadMiB, 1024)) << 20
	rounds, requests := envInt(envRounds, 5), envInt(envRequests, 2000)

	sinkAddr, done := sink(t)
	page := smallServer(t)
	pp := proxyProcess(t, sinkAddr, page)

	sides := []side{
		{name: "direct", connect: func(tb testing.TB) net.Conn { return dialTB(tb, "tcp4", sinkAddr) },
			client: keepAlive(nil, nil), url: "http://" + page + "/small"},
		{name: "ours", connect: func(tb testing.TB) net.Conn { return connectVia(tb, "unix", pp.socket, "public.test:443") },
			client: keepAlive(mustURL("http://proxy.invalid"), func(ctx context.Context) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "unix", pp.socket)
			}), url: "http://public.test/small"},
		{name: "ours-bridge", connect: func(tb testing.TB) net.Conn { return connectVia(tb, "tcp4", pp.bridge, "public.test:443") },
			client: keepAlive(mustURL("http://"+pp.bridge), nil), url: "http://public.test/small"},
		{name: "splice-relay", connect: func(tb testing.TB) net.Conn { return dialTB(tb, "tcp4", pp.relaySink) },
			client: keepAlive(nil, func(ctx context.Context) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "tcp4", pp.relayPage)
			}), url: "http://" + page + "/small"},
	}
	if smokescreen != "" {
		sides = append(sides, side{name: "smokescreen",
			connect: func(tb testing.TB) net.Conn { return connectVia(tb, "tcp4", smokescreen, sinkAddr) },
			client:  keepAlive(mustURL("http://"+smokescreen), nil), url: "http://" + page + "/small"})
	}

	rates := map[string][]float64{}
	for r := range rounds {
		for _, s := range sides {
			c := s.connect(t)
			d := push(t, c, upload, done)
			c.Close()
			rates[s.name] = append(rates[s.name], float64(upload)/d.Seconds()/(1<<20))
		}
		t.Logf("round %d: %v", r, lastOf(rates, sides))
	}
	lat := map[string][]time.Duration{}
	for _, s := range sides { // warm: one connection each way
		get(t, s.client, s.url)
	}
	for range requests {
		for _, s := range sides {
			lat[s.name] = append(lat[s.name], get(t, s.client, s.url))
		}
	}
	fmt.Printf("egress comparison, %s, %d MiB upload x %d rounds, %d keep-alive GETs per side, interleaved\n",
		time.Now().UTC().Format(time.DateOnly), upload>>20, rounds, requests)
	direct, directLat := median(rates["direct"]), medianDur(lat["direct"])
	for _, s := range sides {
		m, l := median(rates[s.name]), medianDur(lat[s.name])
		fmt.Printf("%-12s upload median %7.0f MiB/s  %.2fx direct (per-round ratios %s)   GET p50 %6.0f µs  added %+5.0f µs\n",
			s.name, m, m/direct, ratios(rates[s.name], rates["direct"]), us(l), us(l-directLat))
	}
}

// proxyAddrs are where the proxy's process serves: the sandbox's socket,
// the bridge, and the bare relays to the sink and to the page.
type proxyAddrs struct {
	socket, bridge, relaySink, relayPage string
}

// proxyProcess starts this test binary again as TestCompareProxyProcess:
// the proxy and its bridge in a process of their own, as the worker runs
// them (and as smokescreen runs), so that they do not share the client's Go
// scheduler; their "public" destinations on ports 443 and 80 are sinkAddr
// and page. Beside them it runs a bare relay to each (tunnel.Join of an
// accepted connection and one dialled to the destination, nothing else):
// the least any relay in a process of its own costs here. The process ends
// with the test.
func proxyProcess(tb testing.TB, sinkAddr, page string) proxyAddrs {
	tb.Helper()
	cmd := exec.Command(os.Args[0], "-test.run", "^TestCompareProxyProcess$", "-test.count", "1")
	cmd.Env = append(os.Environ(), envChild+"="+sinkAddr+" "+page)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		stdin.Close()
		_ = cmd.Wait()
	})
	var pa proxyAddrs
	if _, err := fmt.Fscan(stdout, &pa.socket, &pa.bridge, &pa.relaySink, &pa.relayPage); err != nil {
		tb.Fatalf("the proxy's process did not start: %v", err)
	}
	go io.Copy(io.Discard, stdout)
	pa.socket = strings.Replace(pa.socket, "/proc/self/", fmt.Sprintf("/proc/%d/", cmd.Process.Pid), 1)
	return pa
}

// TestCompareProxyProcess is the proxy's process of TestCompareProxies (see
// proxyProcess): it prints where it serves and ends when its standard input
// does.
func TestCompareProxyProcess(t *testing.T) {
	sinkAddr, page, ok := strings.Cut(os.Getenv(envChild), " ")
	if !ok {
		t.Skip("the proxy's process of TestCompareProxies, started by it")
	}
	tp := newTestProxy(t, func(c *ProxyConfig) { c.Logger = nil })
	br := startTestBridge(t, tp, false)
	tp.dial.set(netip.AddrPortFrom(publicV4, 443), sinkAddr)
	tp.dial.set(netip.AddrPortFrom(publicV4, 80), page)
	fmt.Println(tp.socket, br.ProxyAddr(), relay(t, sinkAddr), relay(t, page))
	_, _ = io.Copy(io.Discard, os.Stdin)
}

// relay serves a loopback port whose every connection is joined to a new
// one to target, and returns its address.
func relay(tb testing.TB, target string) string {
	return listenLoopback(tb, func(c net.Conn) {
		defer c.Close()
		up, err := net.Dial("tcp4", target)
		if err != nil {
			return
		}
		defer up.Close()
		tunnel.Join(c, up, 0)
	})
}

func lastOf(rates map[string][]float64, sides []side) string {
	out := ""
	for _, s := range sides {
		out += fmt.Sprintf("%s %.0f MiB/s  ", s.name, rates[s.name][len(rates[s.name])-1])
	}
	return out
}

// smallServer serves a small page on loopback and returns its address.
func smallServer(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "small")
	})}
	go srv.Serve(ln)
	tb.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// keepAlive is an HTTP client that keeps one connection alive, through
// proxy when set (dial replaces how the proxy is reached).
func keepAlive(proxy *url.URL, dial func(ctx context.Context) (net.Conn, error)) *http.Client {
	tr := &http.Transport{MaxIdleConnsPerHost: 1, DisableCompression: true}
	if proxy != nil {
		tr.Proxy = http.ProxyURL(proxy)
	}
	if dial != nil {
		tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) { return dial(ctx) }
	}
	return &http.Client{Transport: tr, Timeout: ioTimeout}
}

func mustURL(s string) *url.URL {
	u, err := url.Parse(s)
	if err != nil {
		panic(err)
	}
	return u
}

func get(tb testing.TB, c *http.Client, u string) time.Duration {
	tb.Helper()
	start := time.Now()
	resp, err := c.Get(u)
	if err != nil {
		tb.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		tb.Fatalf("GET %s: %d", u, resp.StatusCode)
	}
	return time.Since(start)
}

func dialTB(tb testing.TB, network, addr string) net.Conn {
	tb.Helper()
	c, err := net.Dial(network, addr)
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

func medianDur(v []time.Duration) time.Duration {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1000 }

func ratios(a, b []float64) string {
	out := ""
	for i := range a {
		out += fmt.Sprintf("%.2f ", a[i]/b[i])
	}
	return out
}
