package egress

import (
	"bytes"
	"context"
	"crypto/x509"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"regexp"
	"strings"
	"testing"

	"openvibe.network/agentsandbox"
	"openvibe.network/agentsandbox/internal/metrics"
	"openvibe.network/agentsandbox/internal/syncbuf"
	"openvibe.network/agentsandbox/internal/testenv"
	"openvibe.network/agentsandbox/sandbox"
)

// TestRulesInSandbox: in a real sandbox without secrets whose allow entry
// for api.example.com holds methods ["GET"] and paths, curl reaches the
// loopback upstream (HTTPS intercepted with the sandbox's CA, through the
// proxy variables and transparently; plain HTTP) with a GET on an allowed
// path, and a POST, a DELETE over plain HTTP, a path outside and a path
// with a dot segment are refused 403 rule-denied before the upstream sees
// them, logged and counted with that reason.
func TestRulesInSandbox(t *testing.T) {
	testenv.RequireSandbox(t)
	curl := testenv.RequireBinary(t, "curl", "apt-get install -y curl")
	seen := &seenHeaders{}
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.add(r.Method, r)
		io.WriteString(w, "upstream: "+r.Method+" "+r.URL.RequestURI())
	})
	tlsUp := httptest.NewUnstartedServer(handler)
	tlsUp.Config.ErrorLog = log.New(io.Discard, "", 0)
	tlsUp.StartTLS()
	t.Cleanup(tlsUp.Close)
	plainUp := httptest.NewServer(handler)
	t.Cleanup(plainUp.Close)
	res := newFakeResolver(map[string][][]netip.Addr{"api.example.com": {{apiV4}}})
	tp := &testProxy{dial: &dialMap{to: map[netip.AddrPort]string{}}, resolver: res, logs: &syncbuf.Buffer{}}
	tp.dial.set(netip.AddrPortFrom(apiV4, 443), tlsUp.Listener.Addr().String())
	tp.dial.set(netip.AddrPortFrom(apiV4, 80), plainUp.Listener.Addr().String())
	roots := x509.NewCertPool()
	roots.AddCert(tlsUp.Certificate())
	reg := metrics.NewRegistry()
	p, err := NewProxy(ProxyConfig{Guard: testGuard(res), TestDial: tp.dial.dial, Logger: newJSONLogger(tp.logs),
		UpstreamRoots: roots, Metrics: reg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	rt := newSandboxRuntime(t, sandbox.Config{Capacity: 1, Egress: p})
	ctx, cancel := context.WithTimeout(context.Background(), sandboxTimeout)
	defer cancel()
	info, err := rt.Create(ctx, sandbox.Options{Egress: true, EgressPolicy: agentsandbox.EgressPolicy{Mode: agentsandbox.EgressAllow,
		Allow: []agentsandbox.EgressEntry{{Host: "api.example.com", Methods: []string{"GET"}, Paths: []string{"/repos/acme/", "/repos/*/issues"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Delete(context.Background(), info.ID) })
	sh := func(script string) string {
		var out bytes.Buffer
		if _, err := rt.Exec(ctx, info.ID, agentsandbox.ExecRequest{Argv: []string{"/bin/sh", "-c", script}}, &out, &out); err != nil {
			t.Fatalf("exec %q: %v", script, err)
		}
		return out.String()
	}
	c := curl + " -sS -i --max-time 60 "
	const denied = "x-egress-refused: rule-denied"
	for _, tc := range []struct{ name, args, want string }{
		{"Get", "https://api.example.com/repos/acme/app", "upstream: GET /repos/acme/app"},
		{"GetStar", "https://api.example.com/repos/other/issues?state=open", "upstream: GET /repos/other/issues?state=open"},
		{"GetTransparent", "--noproxy '*' https://api.example.com/repos/acme/x", "upstream: GET /repos/acme/x"},
		{"GetPlainHTTP", "http://api.example.com/repos/acme/plain", "upstream: GET /repos/acme/plain"},
		{"Post", "-X POST -d x=1 https://api.example.com/repos/acme/app", denied},
		{"PostTransparent", "--noproxy '*' -X POST https://api.example.com/repos/acme/app", denied},
		{"DeletePlainHTTP", "-X DELETE http://api.example.com/repos/acme/plain", denied},
		{"PathOutside", "https://api.example.com/users/acme", denied},
		{"PathNotASegment", "https://api.example.com/repos/acmeevil/x", denied},
		{"DotSegment", "--path-as-is https://api.example.com/repos/acme/../../admin", denied},
		{"EscapedSlash", "https://api.example.com/repos/acme%2F..%2F..%2Fadmin", denied},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := sh(c + tc.args)
			if !strings.Contains(strings.ToLower(out), strings.ToLower(tc.want)) {
				t.Fatalf("curl %s:\n%s\nwant %q", tc.args, out, tc.want)
			}
			if tc.want == denied && !status403.MatchString(out) {
				t.Fatalf("curl %s: not a 403:\n%s", tc.args, out)
			}
		})
	}
	if s := seen.String(); strings.Contains(s, "POST") || strings.Contains(s, "DELETE") || strings.Contains(s, "/users") ||
		strings.Contains(s, "admin") || strings.Contains(s, "acmeevil") || strings.Count(s, "GET /repos/") != 4 {
		t.Fatalf("what the upstream saw:\n%s", s)
	}
	var m strings.Builder
	reg.WriteText(&m)
	if want := MetricRequests + `{verdict="refused",reason="rule-denied"} 7`; !strings.Contains(m.String(), want) {
		t.Fatalf("metrics lack %q:\n%s", want, m.String())
	}
	if logs := tp.logs.String(); strings.Count(logs, `"reason":"rule-denied"`) != 7 {
		t.Fatalf("log lines with rule-denied:\n%s", logs)
	}
}

// status403 finds curl -i's status line of a 403 (after a proxy's 200).
var status403 = regexp.MustCompile(`(?m)^HTTP/[0-9.]+ 403`)
