package egress

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"openvibe.network/agentsandbox"
	"openvibe.network/agentsandbox/internal/brokerca"
)

// envCompareBroker runs TestCompareBroker (scripts/bench-broker.sh sets
// it); envDownloadMiB is its download's size.
const (
	envCompareBroker = "AGENTSANDBOX_COMPARE_BROKER"
	envDownloadMiB   = "AGENTSANDBOX_COMPARE_DOWNLOAD_MIB"
)

// TestCompareBroker measures, interleaved in one run on loopback, the same
// HTTPS upstream reached through interception (a secret's host) and
// through a blind CONNECT tunnel (a host without one): small GETs on a
// kept-alive connection, the first request on a new connection (for
// interception: a new host each time, so its leaf is minted, and two
// handshakes), and a large download. It prints the medians per side and
// the ratios. With envSquid set it measures Squid's ssl-bump (started by
// the test, on loopback, replacing the same header) as a third side, the
// same upstream behind it. It only runs when asked
// (scripts/bench-broker.sh, scripts/bench-broker-squid.sh).
func TestCompareBroker(t *testing.T) {
	if os.Getenv(envCompareBroker) == "" {
		t.Skip("a measurement, run by scripts/bench-broker.sh (set " + envCompareBroker + "=1)")
	}
	rounds := envInt(envRounds, 5)
	requests := envInt(envRequests, 2000)
	download := int64(envInt(envDownloadMiB, 1024)) << 20
	firsts := 50

	chunk := make([]byte, 1<<20)
	var unsubstituted atomic.Int64 // requests of the broker or Squid that reached the upstream without the value
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a := r.Header.Values("Authorization"); r.Host != "blind.example.com" && (len(a) != 1 || a[0] != "Bearer "+testValue) {
			unsubstituted.Add(1)
		}
		if r.URL.Path == "/big" {
			n, _ := strconv.ParseInt(r.URL.Query().Get("n"), 10, 64)
			w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
			for n > 0 {
				k := min(n, int64(len(chunk)))
				if _, err := w.Write(chunk[:k]); err != nil {
					return
				}
				n -= k
			}
			return
		}
		io.WriteString(w, "ok")
	}))
	srv.StartTLS()
	t.Cleanup(srv.Close)
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())

	// Interception: api.example.com and the "first" hosts f<i>.example.com
	// (wildcard secret); the tunnel: blind.example.com. All are the same
	// loopback server (its certificate is for *.example.com).
	answers := map[string][][]netip.Addr{"api.example.com": {{apiV4}}, "blind.example.com": {{blindV4}}}
	for i := range rounds * firsts {
		answers[fmt.Sprintf("f%d.example.com", i)] = [][]netip.Addr{{apiV4}}
	}
	ca, err := brokerca.New("bench", []string{"example.com"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	opts := AttachOptions{CA: &ca, Secrets: []agentsandbox.EgressSecret{
		{Name: "K", Placeholder: testPH, Value: testValue, Hosts: []string{"api.example.com", "*.example.com"}},
	}}
	res := newFakeResolver(answers)
	tp := newPolicyProxy(t, func(c *ProxyConfig) { c.Guard = testGuard(res); c.UpstreamRoots = roots }, opts)
	up := srv.Listener.Addr().String()
	tp.dial.set(netip.AddrPortFrom(apiV4, 443), up)
	tp.dial.set(netip.AddrPortFrom(blindV4, 443), up)

	clientRoots := x509.NewCertPool()
	clientRoots.AddCert(ca.Leaf)
	clientRoots.AddCert(srv.Certificate())
	newClient := func(keep bool) *http.Client {
		tr := &http.Transport{
			Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: "proxy.invalid"}),
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "unix", tp.socket)
			},
			TLSClientConfig:    &tls.Config{RootCAs: clientRoots},
			DisableKeepAlives:  !keep,
			DisableCompression: true,
		}
		return &http.Client{Transport: tr}
	}
	names := []string{"intercepted", "tunnel"}
	clients := map[string]func(keep bool) *http.Client{"intercepted": newClient, "tunnel": newClient}
	host := map[string]string{"intercepted": "api.example.com", "tunnel": "blind.example.com"}
	firstHost := func(name string, i int) string {
		if name == "tunnel" {
			return host[name]
		}
		return fmt.Sprintf("f%d.example.com", i) // a new leaf each time
	}
	if bin := os.Getenv(envSquid); bin != "" {
		var squidHosts []string
		for i := range rounds * firsts {
			squidHosts = append(squidHosts, fmt.Sprintf("f%d.example.com", i))
		}
		sq := startSquid(t, bin, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}),
			append(squidHosts, "api.example.com"), testValue)
		_, upPort, _ := net.SplitHostPort(up)
		names = append(names, "squid")
		host["squid"] = "api.example.com:" + upPort
		clients["squid"] = func(keep bool) *http.Client {
			return &http.Client{Transport: &http.Transport{
				Proxy:              http.ProxyURL(&url.URL{Scheme: "http", Host: sq.addr}),
				TLSClientConfig:    &tls.Config{RootCAs: sq.roots},
				DisableKeepAlives:  !keep,
				DisableCompression: true,
			}}
		}
		plain := firstHost
		firstHost = func(name string, i int) string {
			if name == "squid" {
				return fmt.Sprintf("f%d.example.com:%s", i, upPort)
			}
			return plain(name, i)
		}
	}
	get := func(c *http.Client, u string) {
		req, _ := http.NewRequest(http.MethodGet, u, nil)
		req.Header.Set("Authorization", "Bearer "+testPH)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("GET %s: %d %v", u, resp.StatusCode, err)
		}
	}
	type figures struct{ p50, first, mibs []float64 }
	sides := map[string]*figures{"intercepted": {}, "tunnel": {}, "squid": {}}
	for r := range rounds {
		for _, name := range names {
			f := sides[name]
			c := clients[name](true)
			get(c, "https://"+host[name]+"/") // the connection, and its handshakes, first
			lat := make([]float64, requests)
			for i := range requests {
				s := time.Now()
				get(c, "https://"+host[name]+"/")
				lat[i] = float64(time.Since(s).Microseconds())
			}
			f.p50 = append(f.p50, median(lat))
			firstLat := make([]float64, firsts)
			for i := range firsts {
				h := firstHost(name, r*firsts+i)
				fc := clients[name](false)
				s := time.Now()
				get(fc, "https://"+h+"/")
				firstLat[i] = float64(time.Since(s).Microseconds())
				fc.CloseIdleConnections()
			}
			f.first = append(f.first, median(firstLat))
			s := time.Now()
			get(c, "https://"+host[name]+"/big?n="+strconv.FormatInt(download, 10))
			f.mibs = append(f.mibs, float64(download>>20)/time.Since(s).Seconds())
			c.CloseIdleConnections()
		}
	}
	if n := unsubstituted.Load(); n > 0 {
		t.Fatalf("%d requests reached the upstream without exactly the value in Authorization", n)
	}
	in, tu := sides["intercepted"], sides["tunnel"]
	fmt.Printf("broker vs tunnel, %d rounds, medians of rounds (keep-alive GET p50 of %d; first request on a new connection, median of %d; %d MiB download)\n",
		rounds, requests, firsts, download>>20)
	fmt.Printf("keep-alive GET p50: intercepted %.0f µs, tunnel %.0f µs, added %+.0f µs\n", median(in.p50), median(tu.p50), median(in.p50)-median(tu.p50))
	fmt.Printf("first request:      intercepted %.0f µs, tunnel %.0f µs, added %+.0f µs\n", median(in.first), median(tu.first), median(in.first)-median(tu.first))
	ratios := make([]float64, rounds)
	for i := range ratios {
		ratios[i] = in.mibs[i] / tu.mibs[i]
	}
	fmt.Printf("download:           intercepted %.0f MiB/s, tunnel %.0f MiB/s, ratio %.2f× (median of the rounds' ratios)\n",
		median(in.mibs), median(tu.mibs), median(ratios))
	if sq := sides["squid"]; len(sq.p50) > 0 {
		tun := median(tu.p50)
		fmt.Printf("broker vs squid ssl-bump (added over the tunnel; ratios ours/squid, medians of the rounds' ratios)\n")
		fmt.Printf("keep-alive GET p50: intercepted %.0f µs (added %+.0f), squid %.0f µs (added %+.0f), ratio %.2f×\n",
			median(in.p50), median(in.p50)-tun, median(sq.p50), median(sq.p50)-tun, roundRatios(in.p50, sq.p50))
		tf := median(tu.first)
		fmt.Printf("first request:      intercepted %.0f µs (added %+.0f), squid %.0f µs (added %+.0f), ratio %.2f×\n",
			median(in.first), median(in.first)-tf, median(sq.first), median(sq.first)-tf, roundRatios(in.first, sq.first))
		fmt.Printf("download:           intercepted %.0f MiB/s, squid %.0f MiB/s, ratio %.2f×\n",
			median(in.mibs), median(sq.mibs), roundRatios(in.mibs, sq.mibs))
	}
}

// roundRatios is the median of a[i]/b[i] over the rounds.
func roundRatios(a, b []float64) float64 {
	r := make([]float64, len(a))
	for i := range r {
		r[i] = a[i] / b[i]
	}
	return median(r)
}
