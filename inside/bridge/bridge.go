// Package bridge is the in-sandbox half of egress: it runs in the sandbox's
// init and exposes the worker's proxy (reached through a descriptor of the
// sandbox's unix socket) as a loopback proxy address that the proxy
// variables name, and, in transparent mode, a synthetic resolver and 80/443
// listeners that turn a program's direct connections into CONNECTs. It
// imports nothing of the host side: the guard and the proxy stay in the
// worker.
package bridge

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"openvibe.network/agentsandbox/internal/tunnel"
)

// Addresses of the bridge inside the sandbox.
const (
	// BridgeAddr is the in-sandbox proxy address that the proxy variables name.
	BridgeAddr = "127.0.0.1:3128"
	// ResolverAddr is the in-sandbox resolver of transparent mode; the
	// sandbox's /etc/resolv.conf names 127.0.0.1.
	ResolverAddr = "127.0.0.1:53"
)

// SyntheticPrefix holds the loopback addresses that the transparent-mode
// resolver hands out, one per name.
const SyntheticPrefix = "127.77.0.0/16"

// acceptPause is how long an accept loop waits after a failed accept.
const acceptPause = 50 * time.Millisecond

// ReasonConnLimit is the refusal the bridge answers itself when the proxy
// takes no more of the sandbox's connections: the proxy's own reason for
// that limit (egress.ReasonConnLimit), in X-Egress-Refused like its answers.
const ReasonConnLimit = "conn-limit"

// refusalTimeout bounds the reading of a request that transparent mode
// refuses on port 80.
const refusalTimeout = 10 * time.Second

// Run runs inside the sandbox: it listens on BridgeAddr and forwards
// every connection to the proxy socket at socketPath (a /proc/self/fd path
// of the init's descriptor of it). It is the init's inside.Bridge hook. When transparent, it
// also serves a resolver on ResolverAddr (UDP and TCP) that answers every
// name with a synthetic address of 127.77.0.0/16, and listeners on ports
// 80 and 443 of every local address that turn a connection to a synthetic
// address into a CONNECT for its name. It returns once every listener
// accepts, with the proxy variables to add to every command; everything
// stops when ctx ends. Errors: socketPath is not a socket, or a listen
// failure.
func Run(ctx context.Context, socketPath string, transparent bool) (map[string]string, error) {
	cfg := Config{Socket: socketPath, ProxyAddr: BridgeAddr}
	if transparent {
		cfg.DNSAddr = ResolverAddr
		cfg.Listen = map[uint16]string{80: "0.0.0.0:80", 443: "0.0.0.0:443"}
		cfg.Synthetic = netip.MustParsePrefix(SyntheticPrefix)
	}
	b, err := Start(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return ProxyEnv(b.ProxyAddr()), nil
}

// Config says where a bridge listens (Run uses the sandbox's fixed
// addresses; tests use port 0).
type Config struct {
	// Socket is the path of the proxy's socket.
	Socket string
	// ProxyAddr is the loopback address of the proxy the variables name.
	ProxyAddr string
	// DNSAddr, Listen (destination port -> listen address) and Synthetic
	// are set for transparent mode only.
	DNSAddr   string
	Listen    map[uint16]string
	Synthetic netip.Prefix
}

// Bridge is a running bridge.
type Bridge struct {
	socket    string
	proxyAddr string
	dnsAddr   string
	listeners map[uint16]string // destination port -> bound address
	names     *nameTable
}

// ProxyAddr is the address the proxy listener is bound to.
func (b *Bridge) ProxyAddr() string { return b.proxyAddr }

// DNSAddr is the address the resolver is bound to ("" outside transparent
// mode).
func (b *Bridge) DNSAddr() string { return b.dnsAddr }

// ListenAddr is the address the transparent listener for destination port
// is bound to ("" when there is none).
func (b *Bridge) ListenAddr(port uint16) string { return b.listeners[port] }

// Start runs a bridge for cfg until ctx ends and returns once every
// listener accepts. Errors: cfg.Socket is not a socket, or a listen failure.
func Start(ctx context.Context, cfg Config) (*Bridge, error) {
	if fi, err := os.Stat(cfg.Socket); err != nil || fi.Mode()&os.ModeSocket == 0 {
		return nil, fmt.Errorf("bridge: %s is not a socket (%v)", cfg.Socket, err)
	}
	b := &Bridge{socket: cfg.Socket, listeners: map[uint16]string{}}
	var closers []io.Closer
	fail := func(err error) (*Bridge, error) {
		for _, c := range closers {
			_ = c.Close()
		}
		return nil, fmt.Errorf("bridge: %w", err)
	}
	ln, err := net.Listen("tcp4", cfg.ProxyAddr)
	if err != nil {
		return fail(err)
	}
	closers = append(closers, ln)
	b.proxyAddr = ln.Addr().String()
	serves := []func(){func() { serveListener(ln, b.forward) }}
	if cfg.DNSAddr != "" {
		b.names = newNameTable(cfg.Synthetic)
		srv, addr, err := listenDNS(cfg.DNSAddr, b.names)
		if err != nil {
			return fail(err)
		}
		closers = append(closers, srv...)
		b.dnsAddr = addr
		for port, addr := range cfg.Listen {
			ln, err := net.Listen("tcp4", addr)
			if err != nil {
				return fail(err)
			}
			closers = append(closers, ln)
			b.listeners[port] = ln.Addr().String()
			serves = append(serves, func() { serveListener(ln, func(c net.Conn) { b.transparent(c, port) }) })
		}
	}
	for _, s := range serves {
		go s()
	}
	context.AfterFunc(ctx, func() {
		for _, c := range closers {
			_ = c.Close()
		}
	})
	return b, nil
}

// maxBridged bounds the connections one bridge listener serves at once;
// more wait in its listen queue. It keeps the init's descriptors (the
// sandbox's own, capped) for its control socket however many connections a
// program of the sandbox opens.
const maxBridged = 256

// serveListener hands accepted connections to handle, each in its own
// goroutine, at most maxBridged at a time, until the listener is closed;
// other accept errors (out of file descriptors) pause it briefly.
func serveListener(ln net.Listener, handle func(net.Conn)) {
	sem := make(chan struct{}, maxBridged)
	for {
		sem <- struct{}{}
		c, err := ln.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			<-sem
			time.Sleep(acceptPause)
			continue
		}
		go func() {
			defer func() { <-sem }()
			handle(c)
		}()
	}
}

// ProxyEnv is the environment that points programs at a bridge's proxy
// address.
func ProxyEnv(addr string) map[string]string {
	u := "http://" + addr
	env := map[string]string{}
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"} {
		env[k], env[strings.ToLower(k)] = u, u
	}
	env["NO_PROXY"], env["no_proxy"] = "localhost,127.0.0.1,::1", "localhost,127.0.0.1,::1"
	return env
}

// forward gives an in-sandbox proxy client to the worker's proxy: it hands
// the client's connection over on a new connection to the proxy socket
// (tunnel.Hand), so the proxy serves it directly and no byte of it crosses
// the bridge; when that cannot be done it joins the two. When the proxy
// does not take the connection (the sandbox already has as many as the
// worker allows), the client is answered 429 with the proxy's reason.
func (b *Bridge) forward(c net.Conn) {
	defer c.Close()
	u, err := net.Dial("unix", b.socket)
	if err != nil {
		refuseLimit(c)
		return
	}
	defer u.Close()
	if tc, ok := c.(*net.TCPConn); ok && tunnel.Hand(u.(*net.UnixConn), tc) == nil {
		return // the proxy holds the connection now; this copy closes
	}
	tunnel.Join(c, u, 0)
}

// refuseLimit answers a client of the bridge that the sandbox is at its
// connection limit, without reading its request.
func refuseLimit(c net.Conn) {
	body := "egress refused: " + ReasonConnLimit + " (the sandbox has as many connections as the worker allows; close some)\n"
	_ = c.SetWriteDeadline(time.Now().Add(refusalTimeout))
	_, _ = fmt.Fprintf(c, "HTTP/1.1 429 Too Many Requests\r\nX-Egress-Refused: %s\r\nContent-Type: text/plain; charset=utf-8\r\n"+
		"Content-Length: %d\r\nConnection: close\r\n\r\n%s", ReasonConnLimit, len(body), body)
}

// transparent turns a connection to a synthetic address on port into a
// CONNECT for the name behind the address. A refusal on port 80 is passed
// back to the client as the proxy's HTTP answer; on 443 the connection is
// closed.
func (b *Bridge) transparent(c net.Conn, port uint16) {
	defer c.Close()
	local := c.LocalAddr().(*net.TCPAddr).AddrPort().Addr().Unmap()
	name, ok := b.names.nameOf(local)
	if !ok {
		return
	}
	u, err := net.Dial("unix", b.socket)
	if err != nil {
		if port == 80 {
			refuseLimit(c)
		}
		return
	}
	defer u.Close()
	target := net.JoinHostPort(name, strconv.Itoa(int(port)))
	if _, err := fmt.Fprintf(u, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target); err != nil {
		return
	}
	br := bufio.NewReader(u)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		return
	}
	if resp.StatusCode != http.StatusOK {
		if port == 80 {
			refuseHTTP(c, resp)
		}
		resp.Body.Close()
		return
	}
	if n := br.Buffered(); n > 0 {
		p, _ := br.Peek(n)
		if _, err := c.Write(p); err != nil {
			return
		}
	}
	tunnel.Join(c, u, 0)
}

// refuseHTTP reads the client's request, answers it with the proxy's
// refusal and closes gently, so that the answer is not lost to a reset.
func refuseHTTP(c net.Conn, resp *http.Response) {
	_ = c.SetDeadline(time.Now().Add(refusalTimeout))
	req, err := http.ReadRequest(bufio.NewReader(c))
	if err != nil {
		return
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(req.Body, 1<<20))
	resp.Close = true
	if err := resp.Write(c); err != nil {
		return
	}
	if tc, ok := c.(interface{ CloseWrite() error }); ok {
		_ = tc.CloseWrite()
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(c, 1<<20))
}

// nameTable remembers the synthetic address of each name, both ways.
type nameTable struct {
	mu     sync.Mutex
	prefix netip.Prefix
	next   netip.Addr
	byName map[string]netip.Addr
	byAddr map[netip.Addr]string
}

func newNameTable(prefix netip.Prefix) *nameTable {
	return &nameTable{prefix: prefix, next: prefix.Masked().Addr().Next(),
		byName: map[string]netip.Addr{}, byAddr: map[netip.Addr]string{}}
}

// addrFor returns the address of name, giving it the next free one; false
// when the prefix is used up.
func (t *nameTable) addrFor(name string) (netip.Addr, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if a, ok := t.byName[name]; ok {
		return a, true
	}
	if !t.prefix.Contains(t.next) {
		return netip.Addr{}, false
	}
	a := t.next
	t.next = a.Next()
	t.byName[name], t.byAddr[a] = a, name
	return a, true
}

func (t *nameTable) nameOf(a netip.Addr) (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	name, ok := t.byAddr[a]
	return name, ok
}
