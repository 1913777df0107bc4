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
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"openvibe.network/agentsandbox"
	"openvibe.network/agentsandbox/internal/imagetest"
	"openvibe.network/agentsandbox/internal/syncbuf"
	"openvibe.network/agentsandbox/internal/testenv"
	"openvibe.network/agentsandbox/sandbox"
)

// TestBrokerInSandbox: in real sandboxes with a secret, curl (through the
// proxy variables and transparently) and Python's urllib reach a loopback
// TLS upstream with the placeholder from their environment and no TLS
// flag, and the upstream receives the value; the placeholder sent to
// another allowed host is refused before that host sees it; an upstream
// whose certificate is for another name is refused with the reason; the
// value is in no /proc/*/environ or /proc/*/cmdline inside, the CA's key
// in no file of the bundle, nor the value in the proxy's log; two
// sandboxes have different CAs.
func TestBrokerInSandbox(t *testing.T) {
	testenv.RequireSandbox(t)
	curl := testenv.RequireBinary(t, "curl", "apt-get install -y curl")
	seen := &seenHeaders{}
	upstream := func(name string) string {
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			seen.add(name, r)
			if r.Header.Get("Authorization") == "Bearer "+testValue {
				io.WriteString(w, name+": authorized")
				return
			}
			http.Error(w, name+": unauthorized", http.StatusUnauthorized)
		}))
		srv.Config.ErrorLog = log.New(io.Discard, "", 0)
		srv.StartTLS()
		t.Cleanup(srv.Close)
		return srv.Listener.Addr().String()
	}
	res := newFakeResolver(map[string][][]netip.Addr{
		"api.example.com":   {{apiV4}},
		"other.example.com": {{otherV4}},
		"wrong.test":        {{wrongV4}},
	})
	tp := &testProxy{dial: &dialMap{to: map[netip.AddrPort]string{}}, resolver: res, logs: &syncbuf.Buffer{}}
	tp.dial.set(netip.AddrPortFrom(apiV4, 443), upstream("api"))
	tp.dial.set(netip.AddrPortFrom(otherV4, 443), upstream("other"))
	tp.dial.set(netip.AddrPortFrom(wrongV4, 443), upstream("wrong"))
	probe := httptest.NewTLSServer(http.NotFoundHandler())
	roots := x509.NewCertPool()
	roots.AddCert(probe.Certificate())
	probe.Close()
	p, err := NewProxy(ProxyConfig{Guard: testGuard(res), TestDial: tp.dial.dial, Logger: newJSONLogger(tp.logs), UpstreamRoots: roots})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	var rtLogs syncbuf.Buffer
	rt := newSandboxRuntime(t, sandbox.Config{Capacity: 2, Egress: p, Logger: newJSONLogger(&rtLogs)})
	ctx, cancel := context.WithTimeout(context.Background(), sandboxTimeout)
	defer cancel()
	opts := sandbox.Options{Egress: true, Env: map[string]string{"PLAIN": "x"}, Secrets: map[string]agentsandbox.Secret{
		"API_KEY":   {Value: testValue, Hosts: []string{"api.example.com"}},
		"OTHER_KEY": {Value: "other-value", Hosts: []string{"other.example.com", "wrong.test"}},
	}}
	create := func() func(string) (string, int) {
		info, err := rt.Create(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rt.Delete(context.Background(), info.ID) })
		if want := []string{"api.example.com"}; len(info.Secrets["API_KEY"]) != 1 || info.Secrets["API_KEY"][0] != want[0] {
			t.Fatalf("info.Secrets = %v", info.Secrets)
		}
		return func(script string) (string, int) {
			var out, errb bytes.Buffer
			res, err := rt.Exec(ctx, info.ID, agentsandbox.ExecRequest{Argv: []string{"/bin/sh", "-c", script}}, &out, &errb)
			if err != nil {
				t.Fatalf("exec %q: %v", script, err)
			}
			return out.String() + errb.String(), res.ExitCode
		}
	}
	sh := create()
	cases := []struct{ name, script, want string }{
		{"Placeholder", `echo "$API_KEY"`, agentsandbox.SecretPlaceholderPrefix},
		{"CAVariables", `echo "$SSL_CERT_FILE $REQUESTS_CA_BUNDLE $NODE_EXTRA_CA_CERTS $CURL_CA_BUNDLE $GIT_SSL_CAINFO $PIP_CERT"`,
			strings.TrimSpace(strings.Repeat(agentsandbox.SandboxCABundle+" ", 6))},
		{"Curl", curl + ` -sS --max-time 60 -H "Authorization: Bearer $API_KEY" https://api.example.com/`, "api: authorized"},
		{"CurlTransparent", curl + ` -sS --noproxy '*' --max-time 60 -H "Authorization: Bearer $API_KEY" https://api.example.com/`, "api: authorized"},
		{"CurlOtherHost", curl + ` -sS -i --max-time 60 -H "Authorization: Bearer $API_KEY" https://other.example.com/`, "X-Egress-Refused: secret-host-mismatch"},
		{"CurlPlainHTTP", curl + ` -sS -i --max-time 60 -H "Authorization: Bearer $API_KEY" http://other.example.com/`, "X-Egress-Refused: secret-host-mismatch"},
		{"CurlWrongCert", curl + ` -sS -i --max-time 60 https://wrong.test/`, "not for this name"},
		{"NoKeyInBundle", `grep -c "PRIVATE KEY" ` + agentsandbox.SandboxCABundle + `; true`, "0\n"},
	}
	if _, err := exec.LookPath("python3"); err == nil {
		cases = append(cases, struct{ name, script, want string }{"PythonUrllib",
			`python3 -c 'import os, urllib.request as u; print(u.urlopen(u.Request("https://api.example.com/", headers={"Authorization": "Bearer " + os.environ["API_KEY"]}), timeout=60).read().decode())'`,
			"api: authorized"})
	}
	if _, err := exec.LookPath("node"); err == nil {
		cases = append(cases, struct{ name, script, want string }{"NodeFetch",
			`node -e 'fetch("https://api.example.com/", {headers: {Authorization: "Bearer " + process.env.API_KEY}}).then(r => r.text()).then(console.log, e => console.log(e.cause || e))'`,
			"api: authorized"})
	}
	_, err = exec.LookPath("git")
	gitOK := err == nil
	if gitOK {
		// git speaks TLS to the intercepted host with the bundle (the
		// upstream is no git server: seen below says it was reached).
		cases = append(cases, struct{ name, script, want string }{"Git",
			`git -c http.extraHeader="Authorization: Bearer $API_KEY" ls-remote https://api.example.com/repo.git 2>&1; true`, ""})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if out, _ := sh(tc.script); !strings.Contains(strings.ToLower(out), strings.ToLower(tc.want)) {
				t.Fatalf("%s:\n%s\nwant %q", tc.script, out, tc.want)
			}
		})
	}
	if s := seen.String(); strings.Contains(s, "other ") || strings.Count(s, "Bearer "+testValue) < 2 ||
		gitOK && !strings.Contains(s, "api /repo.git/info/refs?service=git-upload-pack") {
		t.Fatalf("what the upstreams saw:\n%s", s)
	}
	procs, _ := sh(`for f in /proc/[0-9]*/environ /proc/[0-9]*/cmdline; do cat "$f"; echo; done 2>/dev/null; cat ` + agentsandbox.SandboxCABundle)
	if strings.Contains(procs, testValue) || strings.Contains(procs, "other-value") || !strings.Contains(procs, agentsandbox.SecretPlaceholderPrefix) {
		t.Fatalf("a secret's value is inside the sandbox (or no placeholder is):\n%.2000s", procs)
	}
	hostProcs, _ := filepath.Glob("/proc/[0-9]*/environ")
	for _, f := range hostProcs {
		for _, name := range []string{f, strings.TrimSuffix(f, "environ") + "cmdline"} {
			if b, err := os.ReadFile(name); err == nil && bytes.Contains(b, []byte(testValue)) {
				t.Fatalf("the value is in the host's %s", name)
			}
		}
	}
	ca1, _ := sh(`tail -n 20 ` + agentsandbox.SandboxCABundle)
	sh2 := create()
	ca2, _ := sh2(`tail -n 20 ` + agentsandbox.SandboxCABundle)
	if ca1 == ca2 || !strings.Contains(ca1, "BEGIN CERTIFICATE") {
		t.Fatalf("two sandboxes share a CA:\n%s", ca1)
	}
	if out, _ := sh2(curl + ` -sS --max-time 60 -H "Authorization: Bearer $API_KEY" https://api.example.com/`); out != "api: authorized" {
		t.Fatalf("second sandbox: %q", out)
	}
	if logs := tp.logs.String() + rtLogs.String(); strings.Contains(logs, testValue) || strings.Contains(logs, "other-value") {
		t.Fatalf("a secret's value is in the worker's log:\n%s", logs)
	}
}

// TestBrokerInImageSandbox: in an image sandbox with a secret, the
// image's own trust bundle where Alpine keeps it (/etc/ssl/cert.pem, a
// symlink inside the image as images ship it) is the sandbox's bundle
// too: the same file as the one at agentsandbox.SandboxCABundle, holding
// the sandbox's CA and not the image's content.
func TestBrokerInImageSandbox(t *testing.T) {
	testenv.RequireSandbox(t)
	own := t.TempDir() // a layer with the image's own bundle, below busybox's
	if err := os.Chmod(own, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(own, "etc/ssl/certs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(own, "etc/ssl/certs/image-bundle.pem"), []byte("the image's own bundle\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("certs/image-bundle.pem", filepath.Join(own, "etc/ssl/cert.pem")); err != nil {
		t.Fatal(err)
	}
	p, err := NewProxy(ProxyConfig{Guard: testGuard(newFakeResolver(nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	rt := newSandboxRuntime(t, sandbox.Config{Capacity: 1, Egress: p, InitBinary: imagetest.StaticInit(t)})
	ctx, cancel := context.WithTimeout(context.Background(), sandboxTimeout)
	defer cancel()
	img := &sandbox.RootImage{Ref: "registry.test/tiny/busybox:1", Digest: "sha256:" + strings.Repeat("0", 63) + "1",
		Layers: []string{own, imagetest.BusyboxLayer(t)}, Env: []string{"PATH=/bin"}}
	info, err := rt.Create(ctx, sandbox.Options{Egress: true, Image: img,
		Secrets: map[string]agentsandbox.Secret{"API_KEY": {Value: testValue, Hosts: []string{"api.example.com"}}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Delete(context.Background(), info.ID) })
	var out bytes.Buffer
	script := `cmp /etc/ssl/cert.pem ` + agentsandbox.SandboxCABundle + ` && echo same; grep -c "BEGIN CERTIFICATE" /etc/ssl/cert.pem; grep -c "image's own" /etc/ssl/cert.pem`
	if _, err := rt.Exec(ctx, info.ID, agentsandbox.ExecRequest{Argv: []string{"/bin/sh", "-c", script}}, &out, &out); err != nil {
		t.Fatal(err)
	}
	if f := strings.Fields(out.String()); len(f) != 3 || f[0] != "same" || f[1] == "0" || f[2] != "0" {
		t.Fatalf("the image's bundle in the sandbox:\n%s", out.String())
	}
}
