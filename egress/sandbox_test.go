package egress

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"openvibe.network/agentsandbox"
	"openvibe.network/agentsandbox/inside"
	"openvibe.network/agentsandbox/inside/bridge"
	"openvibe.network/agentsandbox/internal/imagetest"
	"openvibe.network/agentsandbox/internal/syncbuf"
	"openvibe.network/agentsandbox/internal/testenv"
	"openvibe.network/agentsandbox/sandbox"
)

// TestMain lets this test binary be the sandbox's init (with the real
// bridge) when the runtime re-executes it.
func TestMain(m *testing.M) {
	if code, ok := inside.MaybeRun(inside.Hooks{Bridge: bridge.Run}); ok {
		os.Exit(code)
	}
	code := m.Run()
	imagetest.Cleanup() // what TestBrokerInImageSandbox made
	os.Exit(code)
}

// sandboxTimeout bounds one sandbox operation (a hang guard).
const sandboxTimeout = 2 * time.Minute

// trap is a host loopback listener that counts the connections it gets.
func trap(tb testing.TB) (string, *atomic.Int32) {
	tb.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ln.Close() })
	var n atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			c.Close()
		}
	}()
	return ln.Addr().String(), &n
}

// TestInSandbox runs curl in a real sandbox whose init runs the real bridge,
// attached by the runtime to a real proxy whose TestDial serves the
// "public" 93.184.216.34 from a host loopback server.
func TestInSandbox(t *testing.T) {
	testenv.RequireSandbox(t)
	curl := testenv.RequireBinary(t, "curl", "apt-get install -y curl")
	tp := &testProxy{dial: &dialMap{to: map[netip.AddrPort]string{}}, resolver: testResolver(), logs: &syncbuf.Buffer{}}
	tp.serveHTTP(t, publicV4, 80, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("public page for " + r.Host))
	}))
	tls := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("tls page for " + r.Host))
	}))
	tls.StartTLS()
	t.Cleanup(tls.Close)
	tp.dial.set(netip.AddrPortFrom(publicV4, 443), tls.Listener.Addr().String())
	trapAddr, trapped := trap(t)
	// Were the guard broken, the private target would reach the trap.
	tp.dial.set(netip.MustParseAddrPort("10.0.0.1:80"), trapAddr)
	p, err := NewProxy(ProxyConfig{Guard: testGuard(tp.resolver), TestDial: tp.dial.dial,
		Logger: newJSONLogger(tp.logs)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	rt, err := sandbox.NewRuntime(sandbox.Config{Capacity: 1, Egress: p})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), sandboxTimeout)
	defer cancel()
	info, err := rt.Create(ctx, sandbox.Options{Egress: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Delete(context.Background(), info.ID) })
	sh := func(script string) (string, int) {
		var out, errb bytes.Buffer
		res, err := rt.Exec(ctx, info.ID, agentsandbox.ExecRequest{Argv: []string{"/bin/sh", "-c", script}}, &out, &errb)
		if err != nil {
			t.Fatalf("exec %q: %v", script, err)
		}
		return out.String() + errb.String(), res.ExitCode
	}
	// The very first command: the bridge must already accept.
	if out, code := sh(curl + " -sS --max-time 60 http://public.test/"); code != 0 || out != "public page for public.test" {
		t.Fatalf("first command through the proxy variables: exit %d %q", code, out)
	}
	for _, tc := range []struct {
		name, script, want string
	}{
		{"ProxyRefusesPrivate", curl + " -sS -i --max-time 60 http://10.0.0.1/", "X-Egress-Refused: refused"},
		{"ProxyRefusesPort", curl + " -sS -i --max-time 60 http://public.test:8080/", "X-Egress-Refused: port-not-allowed"},
		{"ConnectRefusesPrivate", curl + " -sS -i --max-time 60 -p http://10.0.0.1:443/ 2>&1; true", "403"},
		{"ProxyHTTPS", curl + " -sS -k --max-time 60 https://public.test/", "tls page for public.test"},
		{"TransparentHTTPS", curl + " -sS -k --noproxy '*' --max-time 60 https://public.test/", "tls page for public.test"},
		{"TransparentAllowed", curl + " -sS --noproxy '*' --max-time 60 http://public.test/", "public page for public.test"},
		{"TransparentRefusesPrivate", curl + " -sS -i --noproxy '*' --max-time 60 http://private.test/", "X-Egress-Refused: refused"},
		{"NoRouteToHostLoopback", curl + " -sS --noproxy '*' --max-time 60 http://" + trapAddr + "/ 2>&1; true", "Failed to connect"},
		{"NoRouteToPrivate", curl + " -sS --noproxy '*' --max-time 60 http://10.0.0.1/ 2>&1; true", "curl: (7)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if out, _ := sh(tc.script); !strings.Contains(out, tc.want) {
				t.Fatalf("%s:\n%s\nwant %q", tc.script, out, tc.want)
			}
		})
	}
	if n := trapped.Load(); n != 0 {
		t.Fatalf("the host loopback trap saw %d connections", n)
	}
	for _, d := range tp.dial.dialed() {
		if d.Addr() != publicV4 {
			t.Fatalf("dialed %s: only the public address may be dialed", d)
		}
	}
	if !strings.Contains(tp.logs.String(), `"sandbox":"`+info.ID+`"`) {
		t.Fatalf("no log line attributed to %s:\n%s", info.ID, tp.logs.String())
	}
}

// realSandbox starts a runtime on a real proxy (whose resolver and dialer
// are tp's) and creates one sandbox with opts; sh runs a script in it.
func realSandbox(t *testing.T, tp *testProxy, opts sandbox.Options) func(script string) (string, int) {
	t.Helper()
	testenv.RequireSandbox(t)
	p, err := NewProxy(ProxyConfig{Guard: testGuard(tp.resolver), TestDial: tp.dial.dial, Logger: newJSONLogger(tp.logs)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	rt, err := sandbox.NewRuntime(sandbox.Config{Capacity: 1, Egress: p})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), sandboxTimeout)
	t.Cleanup(cancel)
	info, err := rt.Create(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Delete(context.Background(), info.ID) })
	return func(script string) (string, int) {
		var out, errb bytes.Buffer
		res, err := rt.Exec(ctx, info.ID, agentsandbox.ExecRequest{Argv: []string{"/bin/sh", "-c", script}}, &out, &errb)
		if err != nil {
			t.Fatalf("exec %q: %v", script, err)
		}
		return out.String() + errb.String(), res.ExitCode
	}
}

// TestInSandboxModeNone: a sandbox in mode none (created without egress,
// as the API makes it) has no proxy variables, nothing listening where the
// bridge and the transparent listeners would be, and no way to a canary
// on the host's loopback.
func TestInSandboxModeNone(t *testing.T) {
	curl := testenv.RequireBinary(t, "curl", "apt-get install -y curl")
	tp := &testProxy{dial: &dialMap{to: map[netip.AddrPort]string{}}, resolver: testResolver(), logs: &syncbuf.Buffer{}}
	trapAddr, trapped := trap(t)
	tp.dial.set(netip.AddrPortFrom(publicV4, 80), trapAddr) // were it reached, the trap would see it
	sh := realSandbox(t, tp, sandbox.Options{})
	for _, tc := range []struct{ name, script, want string }{
		{"NoProxyVariables", "env | grep -ci _proxy; true", "0\n"},
		{"BridgeRefuses", curl + " -sS --max-time 10 -x http://127.0.0.1:3128 http://public.test/ 2>&1; true", "Failed to connect"},
		{"NoTransparentHTTP", curl + " -sS --max-time 10 http://127.0.0.1:80/ 2>&1; true", "Failed to connect"},
		{"NoTransparentTLS", curl + " -sS --max-time 10 -k https://127.0.0.1:443/ 2>&1; true", "Failed to connect"},
		{"NoResolver", "getent hosts public.test || echo unresolved", "unresolved\n"},
		{"NoHostLoopback", curl + " -sS --max-time 10 http://" + trapAddr + "/ 2>&1; true", "Failed to connect"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if out, _ := sh(tc.script); !strings.Contains(out, tc.want) {
				t.Fatalf("%s:\n%s\nwant %q", tc.script, out, tc.want)
			}
		})
	}
	if n := trapped.Load(); n != 0 || len(tp.dial.dialed()) != 0 || tp.logs.String() != "" {
		t.Fatalf("a sandbox in mode none reached out: trap %d, dialed %v, proxy log %q", n, tp.dial.dialed(), tp.logs.String())
	}
}

// TestInSandboxAllowMode: in a real sandbox attached in allow mode, a
// listed name the (injected) resolver maps to a loopback canary is still
// refused as private; an unlisted name is refused as policy-denied, through
// the proxy variables and transparently, and is never looked up; a listed
// public name is served (by loopback, through the test dial hook).
func TestInSandboxAllowMode(t *testing.T) {
	curl := testenv.RequireBinary(t, "curl", "apt-get install -y curl")
	tp := &testProxy{dial: &dialMap{to: map[netip.AddrPort]string{}}, logs: &syncbuf.Buffer{},
		resolver: newFakeResolver(map[string][][]netip.Addr{
			"public.test":   {addrs("93.184.216.34")},
			"canary.test":   {addrs("127.0.0.1")},
			"unlisted.test": {addrs("93.184.216.34")},
		})}
	trapAddr, trapped := trap(t)
	trapPort := netip.MustParseAddrPort(trapAddr).Port()
	tp.dial.set(netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), 80), trapAddr)
	tp.dial.set(netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), trapPort), trapAddr)
	tp.serveHTTP(t, publicV4, 80, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("listed page for " + r.Host))
	}))
	tlsSrv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("tls for " + r.TLS.ServerName))
	}))
	tlsSrv.StartTLS()
	t.Cleanup(tlsSrv.Close)
	tp.dial.set(netip.AddrPortFrom(publicV4, 443), tlsSrv.Listener.Addr().String())
	sh := realSandbox(t, tp, sandbox.Options{Egress: true, EgressPolicy: agentsandbox.EgressPolicy{
		Mode: agentsandbox.EgressAllow, Allow: agentsandbox.EgressHosts("public.test", "canary.test")}})
	for _, tc := range []struct{ name, script, want string }{
		{"ListedPublic", curl + " -sS --max-time 60 http://public.test/", "listed page for public.test"},
		{"ListedPublicTLS", curl + " -sS -k --max-time 60 https://public.test/", "tls for public.test"},
		{"ListedPublicTransparentTLS", curl + " -sS -k --noproxy '*' --max-time 60 https://public.test/", "tls for public.test"},
		{"ListedButLoopback", curl + " -sS -i --max-time 60 http://canary.test/", "X-Egress-Refused: refused"},
		{"Unlisted", curl + " -sS -i --max-time 60 http://unlisted.test/", "X-Egress-Refused: policy-denied"},
		{"UnlistedConnect", curl + " -sS -i --max-time 60 -p http://unlisted.test:443/ 2>&1; true", "403"},
		{"UnlistedTransparent", curl + " -sS -i --noproxy '*' --max-time 60 http://unlisted.test/", "X-Egress-Refused: policy-denied"},
		{"UnlistedLiteral", curl + " -sS -i --max-time 60 http://93.184.216.34/", "X-Egress-Refused: policy-denied"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if out, _ := sh(tc.script); !strings.Contains(out, tc.want) {
				t.Fatalf("%s:\n%s\nwant %q", tc.script, out, tc.want)
			}
		})
	}
	if n := tp.resolver.count("unlisted.test"); n != 0 {
		t.Fatalf("the unlisted name was looked up %d times", n)
	}
	if n := trapped.Load(); n != 0 {
		t.Fatalf("the loopback canary saw %d connections", n)
	}
	if !strings.Contains(tp.logs.String(), `"reason":"private-address"`) || !strings.Contains(tp.logs.String(), `"policy":"allow"`) {
		t.Fatalf("the log does not say why canary.test was refused:\n%s", tp.logs.String())
	}
}
