package egress

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"openvibe.network/agentsandbox"
	"openvibe.network/agentsandbox/internal/syncbuf"
	"openvibe.network/agentsandbox/internal/testenv"
	"openvibe.network/agentsandbox/sandbox"
)

// TestUpdateSecretsInSandbox: in a real sandbox with a secret, rotating
// it keeps its placeholder and the upstream receives the new value on the
// next request; a secret added after start gets a new placeholder, which
// a command started after has in its environment and which the proxy
// replaces with its value; a host outside the sandbox's CA is refused;
// no value is in the logs.
func TestUpdateSecretsInSandbox(t *testing.T) {
	testenv.RequireSandbox(t)
	curl := testenv.RequireBinary(t, "curl", "apt-get install -y curl")
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "auth="+r.Header.Get("Authorization"))
	}))
	up.Config.ErrorLog = log.New(io.Discard, "", 0)
	up.StartTLS()
	t.Cleanup(up.Close)
	res := newFakeResolver(map[string][][]netip.Addr{"api.example.com": {{apiV4}}})
	tp := &testProxy{dial: &dialMap{to: map[netip.AddrPort]string{}}, resolver: res, logs: &syncbuf.Buffer{}}
	tp.dial.set(netip.AddrPortFrom(apiV4, 443), up.Listener.Addr().String())
	roots := x509.NewCertPool()
	roots.AddCert(up.Certificate())
	p, err := NewProxy(ProxyConfig{Guard: testGuard(res), TestDial: tp.dial.dial, Logger: newJSONLogger(tp.logs), UpstreamRoots: roots})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	var rtLogs syncbuf.Buffer
	rt := newSandboxRuntime(t, sandbox.Config{Capacity: 1, Egress: p, Logger: newJSONLogger(&rtLogs)})
	ctx, cancel := context.WithTimeout(context.Background(), sandboxTimeout)
	defer cancel()
	const v1, v2, v3 = "first-VALUE-111", "second-VALUE-222", "added-VALUE-333"
	info, err := rt.Create(ctx, sandbox.Options{Egress: true, Secrets: map[string]agentsandbox.Secret{
		"API_KEY": {Value: v1, Hosts: []string{"api.example.com"}}}})
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
	get := func(variable string) string {
		return sh(curl + ` -sS --max-time 60 -H "Authorization: Bearer $` + variable + `" https://api.example.com/`)
	}
	if got := get("API_KEY"); got != "auth=Bearer "+v1 {
		t.Fatalf("before the rotation: %q", got)
	}
	ph := strings.TrimSpace(sh(`echo "$API_KEY"`))
	info2, phs, err := rt.UpdateSecrets(info.ID, map[string]agentsandbox.Secret{"API_KEY": {Value: v2, Hosts: []string{"api.example.com"}}})
	if err != nil {
		t.Fatal(err)
	}
	if phs["API_KEY"] != ph || len(phs) != 1 || len(info2.Secrets) != 1 {
		t.Fatalf("rotation: placeholders %v (the env's %q), info %v", phs, ph, info2.Secrets)
	}
	if got := get("API_KEY"); got != "auth=Bearer "+v2 {
		t.Fatalf("after the rotation: %q", got)
	}
	_, phs, err = rt.UpdateSecrets(info.ID, map[string]agentsandbox.Secret{"NEW_KEY": {Value: v3, Hosts: []string{"api.example.com"}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(sh(`echo "$NEW_KEY"`)); got != phs["NEW_KEY"] || !strings.HasPrefix(got, agentsandbox.SecretPlaceholderPrefix) || got == ph {
		t.Fatalf("added: the env has %q, the answer %v", got, phs)
	}
	if got := get("NEW_KEY"); got != "auth=Bearer "+v3 {
		t.Fatalf("the added secret: %q", got)
	}
	if got := get("API_KEY"); got != "auth=Bearer "+v2 {
		t.Fatalf("the rotated secret after an add: %q", got)
	}
	_, _, err = rt.UpdateSecrets(info.ID, map[string]agentsandbox.Secret{"OTHER": {Value: "x", Hosts: []string{"other.example.com"}}})
	if !errors.Is(err, sandbox.ErrInvalid) || !strings.Contains(err.Error(), "outside the names this sandbox's CA was made for") {
		t.Fatalf("a host outside the CA: %v", err)
	}
	if logs := tp.logs.String() + rtLogs.String(); strings.Contains(logs, "VALUE-") {
		t.Fatalf("a value is in the worker's log:\n%s", logs)
	}
}
