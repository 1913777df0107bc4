package image

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"openvibe.network/agentsandbox/egress"
)

// ErrRefused is returned when the worker will not connect to an address a
// registry (or a host it redirects to) resolves to: not public, the host's
// own, or on a port no allowed registry has.
var ErrRefused = errors.New("registry address refused")

// dialer connects the store's HTTP client: to a private registry at any
// address its name resolves to; to anything else (a public registry, the
// CDN it redirects a blob to) only at the addresses the guard checked.
type dialer struct {
	private  map[string]bool // "host:port" of the private registries
	guard    *egress.Guard
	resolver egress.Resolver
	// connect connects to a checked address (nil: the guard's own dialer,
	// which checks the address again at connect time); connectPrivate to a
	// private registry's.
	connect, connectPrivate egress.DialFunc
	stall                   time.Duration
}

// Ports are the ports the guard must allow for regs: 80, 443 and each
// registry's own.
func Ports(regs []Registry) []uint16 {
	out := []uint16{80, 443}
	for _, r := range regs {
		_, p := r.hostPort()
		if n, err := strconv.ParseUint(p, 10, 16); err == nil && n > 0 && !containsPort(out, uint16(n)) {
			out = append(out, uint16(n))
		}
	}
	return out
}

func containsPort(ps []uint16, p uint16) bool {
	for _, x := range ps {
		if x == p {
			return true
		}
	}
	return false
}

func (d *dialer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	host, ps, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("%w: %q: %v", ErrRefused, addr, err)
	}
	port, err := strconv.ParseUint(ps, 10, 16)
	if err != nil || port == 0 {
		return nil, fmt.Errorf("%w: %q: bad port", ErrRefused, addr)
	}
	host = strings.ToLower(host)
	var addrs []netip.Addr
	connect := d.connect
	if d.private[net.JoinHostPort(host, ps)] {
		connect = d.connectPrivate
		if addrs, err = d.lookup(ctx, host); err != nil {
			return nil, fmt.Errorf("resolve private registry %s: %w", host, err)
		}
	} else {
		if d.guard == nil {
			return nil, fmt.Errorf("%w: %s is not a private registry and the worker has no egress guard to check it", ErrRefused, addr)
		}
		v := d.guard.CheckHost(ctx, host, uint16(port), nil)
		if !v.Allowed {
			return nil, fmt.Errorf("%w: %s: %s (%s)", ErrRefused, addr, v.Reason, v.Detail)
		}
		addrs = v.Addresses
		if connect == nil {
			connect = d.guard.Dial
		}
	}
	var errs []error
	for _, a := range addrs {
		cctx, cancel := context.WithTimeout(ctx, dialTimeout)
		c, err := connect(cctx, netip.AddrPortFrom(a, uint16(port)))
		cancel()
		if err == nil {
			return &stallConn{Conn: c, stall: d.stall}, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, errors.Join(errs...)
}

// lookup resolves a private registry's name (a literal as it is).
func (d *dialer) lookup(ctx context.Context, host string) ([]netip.Addr, error) {
	if a, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		return []netip.Addr{a}, nil
	}
	if d.resolver == nil {
		return nil, errors.New("no resolver configured")
	}
	addrs, err := d.resolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, err
	}
	if len(addrs) == 0 {
		return nil, errors.New("no addresses")
	}
	for i, a := range addrs {
		addrs[i] = a.Unmap()
	}
	return addrs, nil
}

// plainConnect connects to a private registry's address.
func plainConnect(ctx context.Context, addr netip.AddrPort) (net.Conn, error) {
	d := net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}
	return d.DialContext(ctx, "tcp", addr.String())
}

// dialTimeout bounds one connection attempt.
const dialTimeout = 15 * time.Second

// stallConn fails a read or write that makes no progress for stall: a
// registry that stops sending in the middle of a blob ends the pull.
type stallConn struct {
	net.Conn
	stall time.Duration
}

func (c *stallConn) Read(p []byte) (int, error) {
	_ = c.Conn.SetReadDeadline(time.Now().Add(c.stall))
	return c.Conn.Read(p)
}

func (c *stallConn) Write(p []byte) (int, error) {
	_ = c.Conn.SetWriteDeadline(time.Now().Add(c.stall))
	return c.Conn.Write(p)
}

// newTransport is the store's HTTP transport: no proxy from the
// environment, every connection through d, every wait bounded.
func newTransport(d *dialer, tlsConfig *tls.Config, stall time.Duration) *http.Transport {
	return &http.Transport{
		Proxy:                 nil,
		DialContext:           d.dial,
		TLSClientConfig:       tlsConfig,
		TLSHandshakeTimeout:   stall,
		ResponseHeaderTimeout: stall,
		ExpectContinueTimeout: time.Second,
		ForceAttemptHTTP2:     true,
		MaxIdleConnsPerHost:   8,
		IdleConnTimeout:       90 * time.Second,
	}
}
