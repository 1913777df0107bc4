package egress

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"openvibe.network/agentsandbox"
	"openvibe.network/agentsandbox/internal/brokerca"
)

// TestBrokerCanary: a sandbox attached with the self-test's canary
// reaches the canary's host (a name no resolver knows) through the
// canary's dial hook, verified against the canary's roots only (not the
// proxy's), with the value put in; with roots that do not trust the
// canary, the request is refused for its certificate and nothing reaches
// it; a canary without its hook or roots is refused at attach.
func TestBrokerCanary(t *testing.T) {
	const host = "canary.invalid"
	canaryCA, err := brokerca.New("canary", []string{host}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	m, _ := brokerca.NewMinter(canaryCA, nil)
	leaf, err := m.Leaf(host)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 4)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Host + " " + r.TLS.ServerName + " " + r.Header.Get("Authorization")
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{*leaf}}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	trusted := x509.NewCertPool()
	trusted.AddCert(canaryCA.Leaf)
	dial := func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", srv.Listener.Addr().String())
	}

	for _, tc := range []struct {
		name       string
		roots      *x509.CertPool
		wantStatus int
		wantSeen   string
	}{
		{"Trusted", trusted, http.StatusOK, host + " " + host + " Bearer " + testValue},
		{"NotTrusted", x509.NewCertPool(), http.StatusBadGateway, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ca, err := brokerca.New("sbx-test", []string{host}, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			opts := AttachOptions{CA: &ca, Secrets: []agentsandbox.EgressSecret{{Name: "K", Placeholder: testPH, Value: testValue, Hosts: []string{host}}},
				Canary: &agentsandbox.EgressCanary{Host: host, Dial: dial, Roots: tc.roots}}
			tp := newPolicyProxy(t, func(c *ProxyConfig) { c.UpstreamRoots = trusted }, opts) // the proxy's roots do not count for a canary
			sandboxRoots := x509.NewCertPool()
			sandboxRoots.AddCert(ca.Leaf)
			tr := &http.Transport{
				Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: "proxy.invalid"}),
				DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
					var d net.Dialer
					return d.DialContext(ctx, "unix", tp.socket)
				},
				TLSClientConfig: &tls.Config{RootCAs: sandboxRoots},
			}
			defer tr.CloseIdleConnections()
			req, _ := http.NewRequest(http.MethodGet, "https://"+host+"/", nil)
			req.Header.Set("Authorization", "Bearer "+testPH)
			resp, err := (&http.Client{Transport: tr, Timeout: ioTimeout}).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.wantStatus {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.wantStatus)
			}
			var seen string
			select {
			case seen = <-got:
			default:
			}
			if seen != tc.wantSeen {
				t.Fatalf("the canary saw %q, want %q", seen, tc.wantSeen)
			}
		})
	}
	t.Run("Incomplete", func(t *testing.T) {
		ca, _ := brokerca.New("sbx-test", []string{host}, time.Now())
		_, err := newBroker(AttachOptions{CA: &ca, Secrets: []agentsandbox.EgressSecret{{Name: "K", Placeholder: testPH, Value: testValue, Hosts: []string{host}}},
			Canary: &agentsandbox.EgressCanary{Host: host, Roots: trusted}}, nil)
		if err == nil {
			t.Fatal("a canary without a dial hook was taken")
		}
	})
}
