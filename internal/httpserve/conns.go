package httpserve

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultMaxConnsPerClient is Config.MaxConnsPerClient's default.
const DefaultMaxConnsPerClient = 256

// evictAfter is how long a connection must have been open without a
// request before a new connection may take its place at the cap (an idle
// keep-alive connection may be closed at any time: its client opens
// another when it needs one).
const evictAfter = time.Second

// logEvery bounds how often the listener logs what it refused (the lines
// say how many since the last).
const logEvery = 10 * time.Second

// limiter caps the listener's connections, overall and per client, and
// counts what it refused for the log.
type limiter struct {
	max, perClient int
	trusted        []netip.Prefix
	log            *slog.Logger
	errorBody      func(status int, text string) []byte

	mu       sync.Mutex
	conns    map[*conn]struct{}
	byClient map[netip.Addr]int

	refusedLog   rateLog
	evictedLog   rateLog
	handshakeLog rateLog
}

func newLimiter(cfg Config, log *slog.Logger) *limiter {
	l := &limiter{max: cfg.MaxConns, perClient: cfg.MaxConnsPerClient, trusted: cfg.TrustedProxies, log: log, errorBody: cfg.ErrorBody,
		conns: map[*conn]struct{}{}, byClient: map[netip.Addr]int{}}
	if l.max == 0 {
		l.max = DefaultMaxConns()
	}
	if l.perClient == 0 {
		l.perClient = DefaultMaxConnsPerClient
	}
	return l
}

// clientKey is the client a connection counts against: its address, an
// IPv6 one by its /64 (what one host usually holds); ok is false for an
// address the limiter does not count per client (a trusted proxy's, or
// one that is not IP).
func (l *limiter) clientKey(a net.Addr) (netip.Addr, bool) {
	ta, ok := a.(*net.TCPAddr)
	if !ok {
		return netip.Addr{}, false
	}
	ip, ok := netip.AddrFromSlice(ta.IP)
	if !ok {
		return netip.Addr{}, false
	}
	ip = ip.Unmap()
	for _, p := range l.trusted {
		if p.Contains(ip) {
			return netip.Addr{}, false
		}
	}
	if ip.Is6() {
		ip = netip.PrefixFrom(ip, 64).Masked().Addr()
	}
	return ip, true
}

// admit counts c in, or says why it may not be: its client has
// perClient connections already, or every connection is busy at the cap.
// At the cap it closes the connection that has been idle the longest, or
// else the one open without a request the longest, when one has been for
// evictAfter.
func (l *limiter) admit(c *conn) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.counted && l.byClient[c.client] >= l.perClient {
		return fmt.Errorf("the client %s has %d connections open, the most one client may", c.client, l.perClient)
	}
	if len(l.conns) >= l.max {
		victim := l.idlest(time.Now())
		if victim == nil {
			return fmt.Errorf("%d connections are open and busy, the most this server takes", l.max)
		}
		l.forget(victim)
		go victim.closeNow() // outside l.mu: Close takes it again (forget made that a no-op)
		if n, ok := l.evictedLog.note(time.Now()); ok {
			l.log.LogAttrs(context.Background(), slog.LevelWarn, "connections closed to make room", slog.Int("count", n),
				slog.Int("max_conns", l.max))
		}
	}
	l.conns[c] = struct{}{}
	if c.counted {
		l.byClient[c.client]++
	}
	return nil
}

// idlest returns the connection idle the longest, or else the one open
// without a request the longest if for at least evictAfter, or nil.
func (l *limiter) idlest(now time.Time) *conn {
	var idle, fresh *conn
	var idleSince, freshSince int64
	for c := range l.conns {
		since := c.since.Load()
		switch http.ConnState(c.state.Load()) {
		case http.StateIdle:
			if idle == nil || since < idleSince {
				idle, idleSince = c, since
			}
		case http.StateNew:
			if now.Sub(time.Unix(0, since)) >= evictAfter && (fresh == nil || since < freshSince) {
				fresh, freshSince = c, since
			}
		}
	}
	if idle != nil {
		return idle
	}
	return fresh
}

// forget counts c out; it reports whether c was counted.
func (l *limiter) forget(c *conn) bool {
	if _, ok := l.conns[c]; !ok {
		return false
	}
	delete(l.conns, c)
	if c.counted {
		if l.byClient[c.client]--; l.byClient[c.client] <= 0 {
			delete(l.byClient, c.client)
		}
	}
	return true
}

// release counts c out when it closes.
func (l *limiter) release(c *conn) {
	l.mu.Lock()
	l.forget(c)
	l.mu.Unlock()
}

// rateLog writes a line at most once per logEvery, with how many events
// there were since the last one.
type rateLog struct {
	mu    sync.Mutex
	last  time.Time
	count int
}

// note counts one event and reports, when a line is due, how many there
// were since the last.
func (r *rateLog) note(now time.Time) (int, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.count++
	if !r.last.IsZero() && now.Sub(r.last) < logEvery {
		return 0, false
	}
	n := r.count
	r.last, r.count = now, 0
	return n, true
}

// limitListener hands the server only the connections the limiter admits,
// each wrapped (see conn), speaking TLS when tlsConfig is set.
type limitListener struct {
	net.Listener
	l         *limiter
	tlsConfig *tls.Config
}

// Accept returns the next connection the limiter admits; it closes the
// others at once (logging, at most every logEvery, how many and why).
func (ln *limitListener) Accept() (net.Conn, error) {
	for {
		raw, err := ln.Listener.Accept()
		if err != nil {
			return nil, err
		}
		c := &conn{Conn: raw, raw: raw, l: ln.l}
		c.client, c.counted = ln.l.clientKey(raw.RemoteAddr())
		c.setState(http.StateNew)
		if err := ln.l.admit(c); err != nil {
			_ = raw.Close()
			if n, ok := ln.l.refusedLog.note(time.Now()); ok {
				ln.l.log.LogAttrs(context.Background(), slog.LevelWarn, "connections refused", slog.Int("count", n),
					slog.String("remote", raw.RemoteAddr().String()), slog.String("why", err.Error()))
			}
			continue
		}
		if ln.tlsConfig != nil {
			c.tls = tls.Server(raw, ln.tlsConfig)
			c.Conn = c.tls
		}
		return c, nil
	}
}

// conn is a connection the limiter counts. It is what the http.Server
// holds (around the TLS connection, when TLS is on, so that it sees the
// plain text): it answers the errors the server writes itself (a malformed
// request, a header too large) with ErrorBody, notes the TLS handshakes
// that fail, and counts itself out when closed.
type conn struct {
	net.Conn
	raw     net.Conn
	tls     *tls.Conn // nil without TLS
	l       *limiter
	client  netip.Addr
	counted bool
	state   atomic.Int32 // an http.ConnState
	since   atomic.Int64 // when it entered that state, Unix ns
	closer  sync.Once
}

func (c *conn) setState(st http.ConnState) {
	c.state.Store(int32(st))
	c.since.Store(time.Now().UnixNano())
}

// Read reads from the connection; a TLS handshake that fails is noted for
// the log, and a plain HTTP request sent to the TLS port is answered.
func (c *conn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if err != nil && c.tls != nil && !c.tls.ConnectionState().HandshakeComplete {
		c.handshakeFailed(err)
	}
	return n, err
}

// handshakeFailed logs, at most every logEvery, that TLS handshakes failed,
// and answers a plain HTTP request sent to the TLS port.
func (c *conn) handshakeFailed(err error) {
	var rhe tls.RecordHeaderError
	if errors.As(err, &rhe) && rhe.Conn != nil && looksLikeHTTP(rhe.RecordHeader[:]) {
		_ = rhe.Conn.SetWriteDeadline(time.Now().Add(time.Second))
		_, _ = rhe.Conn.Write(c.l.goError(http.StatusBadRequest, "this port speaks HTTPS: the client sent plain HTTP"))
	}
	if n, ok := c.l.handshakeLog.note(time.Now()); ok {
		c.l.log.LogAttrs(context.Background(), slog.LevelWarn, "TLS handshakes failed", slog.Int("count", n),
			slog.String("remote", c.raw.RemoteAddr().String()), slog.String("err", err.Error()))
	}
}

// looksLikeHTTP reports whether the first bytes of a connection are an
// HTTP/1 request's.
func looksLikeHTTP(hdr []byte) bool {
	for _, m := range []string{"GET /", "HEAD ", "POST ", "PUT /", "DELET", "OPTIO", "PATCH", "CONNE"} {
		if bytes.HasPrefix(hdr, []byte(m)) {
			return true
		}
	}
	return false
}

// goErrorHeaders ends the status line of the answers net/http writes
// itself on a request it cannot read (and no handler ever writes its
// headers in this order: the server sorts them).
var goErrorHeaders = []byte("\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n")

// Write writes to the connection; an answer net/http wrote itself is
// rewritten with the limiter's errorBody.
func (c *conn) Write(b []byte) (int, error) {
	if c.l.errorBody != nil && len(b) > 12 && b[9] >= '4' && bytes.HasPrefix(b, []byte("HTTP/1.1 ")) {
		if i := bytes.Index(b, goErrorHeaders); i > 0 {
			if status, err := strconv.Atoi(string(b[9:12])); err == nil {
				text := string(b[i+len(goErrorHeaders):])
				if _, err := c.Conn.Write(c.l.goError(status, text)); err != nil {
					return 0, err
				}
				return len(b), nil
			}
		}
	}
	return c.Conn.Write(b)
}

// goError is the whole answer of status with errorBody's body for text.
func (l *limiter) goError(status int, text string) []byte {
	body := []byte(fmt.Sprintf("%d %s\n", status, http.StatusText(status)))
	contentType := "text/plain; charset=utf-8"
	if l.errorBody != nil {
		body, contentType = l.errorBody(status, text), "application/json"
	}
	return fmt.Appendf(nil, "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nCache-Control: no-store\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s",
		status, http.StatusText(status), contentType, len(body), body)
}

// Close closes the connection and counts it out.
func (c *conn) Close() error {
	err := c.Conn.Close()
	c.closer.Do(func() { c.l.release(c) })
	return err
}

// closeNow closes a connection the limiter has counted out already.
func (c *conn) closeNow() { _ = c.Close() }

// connKey holds the server's *conn in a request's context.
type connKey struct{}

// withTLSState gives a request that came over TLS its connection state
// (the server only does so itself for a *tls.Conn, which conn wraps).
func withTLSState(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c, ok := r.Context().Value(connKey{}).(*conn); ok && c.tls != nil && r.TLS == nil {
			st := c.tls.ConnectionState()
			r.TLS = &st
		}
		h.ServeHTTP(w, r)
	})
}

// trackState keeps each conn's state for the limiter.
func trackState(c net.Conn, st http.ConnState) {
	if tc, ok := c.(*conn); ok {
		tc.setState(st)
	}
}
