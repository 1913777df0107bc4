package egress

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"openvibe.network/agentsandbox/internal/metrics"
	"openvibe.network/agentsandbox/internal/syncbuf"
	"openvibe.network/agentsandbox/internal/unixsock"
	"openvibe.network/agentsandbox/sandbox"
)

// ioTimeout bounds every blocking step of a test; it is generous because
// the machine is shared and loaded. It is a hang guard, never a measure.
const ioTimeout = 30 * time.Second

// dialMap is an injected dial: it serves "public" addresses from loopback
// listeners and records every address it is asked for.
type dialMap struct {
	mu    sync.Mutex
	to    map[netip.AddrPort]string
	dials []netip.AddrPort
	block bool // block until the context ends (a dial that never answers)
}

func (d *dialMap) set(public netip.AddrPort, loopback string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.to[public] = loopback
}

func (d *dialMap) dial(ctx context.Context, ap netip.AddrPort) (net.Conn, error) {
	d.mu.Lock()
	d.dials = append(d.dials, ap)
	to, ok := d.to[ap]
	block := d.block
	d.mu.Unlock()
	if block {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if !ok {
		return nil, fmt.Errorf("dial %s: %w", ap, errors.New("connection refused (unmapped)"))
	}
	if !netip.MustParseAddrPort(to).Addr().IsLoopback() {
		panic("test dial to a non-loopback address: " + to)
	}
	var nd net.Dialer
	return nd.DialContext(ctx, "tcp", to)
}

func (d *dialMap) dialed() []netip.AddrPort {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]netip.AddrPort(nil), d.dials...)
}

// proxyEnv is a proxy attached for one sandbox on a temporary socket.
type testProxy struct {
	proxy    *Proxy
	sock     *os.File // the O_PATH descriptor Attach returned
	socket   string   // its /proc/self/fd path, which the test dials
	dial     *dialMap
	resolver *fakeResolver
	reg      *metrics.Registry
	logs     *syncbuf.Buffer
	detach   func()
}

func newTestProxy(tb testing.TB, mod func(*ProxyConfig)) *testProxy {
	tb.Helper()
	return newPolicyProxy(tb, mod, AttachOptions{})
}

// newPolicyProxy is newTestProxy for a sandbox attached with opts.
func newPolicyProxy(tb testing.TB, mod func(*ProxyConfig), opts AttachOptions) *testProxy {
	tb.Helper()
	tp := &testProxy{
		dial:     &dialMap{to: map[netip.AddrPort]string{}},
		resolver: testResolver(),
		reg:      metrics.NewRegistry(),
		logs:     &syncbuf.Buffer{},
	}
	cfg := ProxyConfig{
		Guard:    testGuard(tp.resolver),
		TestDial: tp.dial.dial,
		Logger:   slog.New(slog.NewJSONHandler(tp.logs, nil)),
		Metrics:  tp.reg,
	}
	if mod != nil {
		mod(&cfg)
	}
	p, err := NewProxy(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tp.proxy = p
	sock, detach, err := p.Attach(context.Background(), "sbx-test", filepath.Join(tb.TempDir(), "egress.sock"), os.Getuid(), opts)
	if err != nil {
		tb.Fatal(err)
	}
	tp.sock, tp.socket = sock, unixsock.ProcPath(int(sock.Fd()))
	tp.detach = detach
	tb.Cleanup(func() {
		detach()
		p.Close()
		sock.Close()
	})
	return tp
}

// serveHTTP serves h on a loopback listener reached as public:port.
func (tp *testProxy) serveHTTP(tb testing.TB, public netip.Addr, port uint16, h http.Handler) {
	tb.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: ioTimeout}
	go srv.Serve(ln)
	tb.Cleanup(func() { srv.Close() })
	tp.dial.set(netip.AddrPortFrom(public, port), ln.Addr().String())
}

// serveEcho serves an echo on a loopback listener reached as public:port.
func (tp *testProxy) serveEcho(tb testing.TB, public netip.Addr, port uint16) {
	tb.Helper()
	addr := listenLoopback(tb, func(c net.Conn) {
		defer c.Close()
		io.Copy(c, c)
	})
	tp.dial.set(netip.AddrPortFrom(public, port), addr)
}

// listenLoopback serves handle, in a goroutine per connection, on a new
// loopback listener closed when the test ends, and returns its address.
func listenLoopback(tb testing.TB, handle func(net.Conn)) string {
	tb.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go handle(c)
		}
	}()
	return ln.Addr().String()
}

// dialProxy connects to the sandbox's socket.
func (tp *testProxy) dialProxy(tb testing.TB) net.Conn {
	tb.Helper()
	c, err := net.Dial("unix", tp.socket)
	if err != nil {
		tb.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(ioTimeout))
	tb.Cleanup(func() { c.Close() })
	return c
}

// do sends one raw request through the proxy and returns the response and
// its body.
func (tp *testProxy) do(tb testing.TB, raw string) (*http.Response, string) {
	tb.Helper()
	c := tp.dialProxy(tb)
	if _, err := io.WriteString(c, raw); err != nil {
		tb.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		tb.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatal(err)
	}
	return resp, string(body)
}

// logLines returns the proxy's log lines (JSON objects) so far.
func (tp *testProxy) logLines(tb testing.TB) []string {
	tb.Helper()
	return strings.Split(strings.TrimSpace(tp.logs.String()), "\n")
}

// wantRefused checks a proxy answer's status and reason.
func wantRefused(tb testing.TB, resp *http.Response, body string, status int, reason string) {
	tb.Helper()
	if resp.StatusCode != status || resp.Header.Get("X-Egress-Refused") != reason || !strings.Contains(body, reason) {
		tb.Fatalf("got %d %q body %q, want %d with reason %s", resp.StatusCode,
			resp.Header.Get("X-Egress-Refused"), body, status, reason)
	}
}

func newJSONLogger(w *syncbuf.Buffer) *slog.Logger { return slog.New(slog.NewJSONHandler(w, nil)) }

// newSandboxRuntime is a runtime of real sandboxes made with cfg and a
// state dir of its own (as the sandbox package's tests), both gone when the
// test ends.
func newSandboxRuntime(tb testing.TB, cfg sandbox.Config) *sandbox.Runtime {
	tb.Helper()
	state, err := os.MkdirTemp("/run", "codes-sandbox-test-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(state) })
	if err := os.Chmod(state, 0o755); err != nil { // the sandbox uids traverse it
		tb.Fatal(err)
	}
	cfg.StateDir = state
	rt, err := sandbox.NewRuntime(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { rt.Close() })
	return rt
}
