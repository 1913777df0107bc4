package egress

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"openvibe.network/agentsandbox/internal/tunnel"
)

// clientBuffer is the size of the buffer a client's requests are read
// through, and so the bound of a request's line and header (MaxHeaderBytes):
// every request header is seen whole in it before it is parsed, in every
// mode, so that a sandbox's connections make the worker hold at most this
// much of their headers each (MaxConns × clientBuffer per sandbox).
const clientBuffer = MaxHeaderBytes

// MaxHeaderBytes bounds a request's line and header as a sandbox sends it
// to the proxy; a longer one is answered 431 (ReasonHeaderTooLarge).
const MaxHeaderBytes = 16 << 10

// maxResponseHeader bounds the status line and header of an upstream's
// response: the size of the buffer it is read through (upstreamBuffer),
// where its Connection header is looked at whole (see connectionTokens).
const maxResponseHeader = upstreamBuffer

// answerTimeout bounds the write of a refusal to a client that does not read.
const answerTimeout = 5 * time.Second

// record is what the one log line of a decision (a CONNECT, or one HTTP
// request) says.
type record struct {
	sandbox, method, target string
	host                    string
	port                    uint16
	address                 netip.AddrPort
	reason, detail          string
	status                  int
	up, down                int64
	start                   time.Time
}

// requestTimeout bounds the reading of a request's line and header: a
// client that sends nothing for that long is closed.
const requestTimeout = 10 * time.Second

// serve handles one connection of a sandbox: a CONNECT (then a tunnel), or
// HTTP requests in absolute form, kept alive (see session). A connection
// that is not a proxy request is closed at once, unanswered, and nothing
// it sent is logged (not its bytes, not the parser's quote of them).
func (p *Proxy) serve(a *attachment, c net.Conn) {
	_ = c.SetReadDeadline(time.Now().Add(requestTimeout))
	c, first, ok := p.takeOver(a, c)
	if !ok {
		return
	}
	defer a.untrack(c)
	mc := &meter{Conn: c}
	lr := &io.LimitedReader{R: mc, N: clientBuffer}
	var src io.Reader = lr
	if len(first) > 0 {
		src = io.MultiReader(bytes.NewReader(first), lr)
	}
	br := bufio.NewReaderSize(src, clientBuffer)
	req, host, err := readRequest(br, a.named)
	lr.N = math.MaxInt64 // the header is read; the body is not bounded here
	mc.idle = p.idleTimeout
	_ = c.SetReadDeadline(time.Time{})
	if errors.Is(err, io.EOF) {
		return // closed before a byte: a probe, not a request
	}
	if errors.Is(err, errHeaderTooLarge) {
		p.refuseHeader(a, c)
		return
	}
	if err != nil {
		p.finish(a, &record{sandbox: a.id, start: time.Now(), reason: ReasonBadRequest, detail: "not an HTTP proxy request"})
		return
	}
	if req.Method == http.MethodConnect {
		rec := &record{sandbox: a.id, start: time.Now(), method: req.Method}
		p.metrics.active.Inc()
		p.connect(a, c, br, req, rec)
		p.metrics.active.Dec()
		p.finish(a, rec)
		return
	}
	s := &session{p: p, a: a, c: mc, br: br, lr: lr}
	s.run(req, host)
}

// takeOver reads the first byte of a sandbox's connection c. When the
// in-sandbox bridge handed a client's connection over with it
// (tunnel.Hand), the client is served directly (no byte of it then
// crosses the bridge) and c, its carrier, is closed; else c is served,
// the byte read first. A refused handoff is counted and logged as a bad
// request; a connection closed before a byte is not. ok is false when
// there is nothing to serve.
func (p *Proxy) takeOver(a *attachment, c net.Conn) (served net.Conn, first []byte, ok bool) {
	uc, isUnix := c.(*net.UnixConn)
	if !isUnix {
		return c, nil, true
	}
	handed, first, err := tunnel.Take(uc)
	switch {
	case errors.Is(err, tunnel.ErrHandoff):
		p.finish(a, &record{sandbox: a.id, start: time.Now(), reason: ReasonBadRequest, detail: err.Error()})
		return nil, nil, false
	case err != nil:
		return nil, nil, false
	case handed == nil:
		return c, first, true
	}
	a.untrack(c) // the carrier is done: it holds no descriptor of the worker's
	if !a.track(handed) {
		_ = handed.Close()
		return nil, nil, false
	}
	_ = handed.SetReadDeadline(time.Now().Add(requestTimeout))
	return handed, nil, true
}

// refuseHeader answers a request whose header is over MaxHeaderBytes (431)
// and logs it; the connection then closes. A TCP client (handed over by the
// bridge) is given a moment to read the answer before the close: the rest
// of its header, still arriving, would otherwise make the close a reset
// that can discard the answer.
func (p *Proxy) refuseHeader(a *attachment, c net.Conn) {
	rec := &record{sandbox: a.id, start: time.Now()}
	p.answer(c, rec, ReasonHeaderTooLarge, fmt.Sprintf("a request header over %d bytes", MaxHeaderBytes))
	p.finish(a, rec)
	if tc, ok := c.(*net.TCPConn); ok && tc.CloseWrite() == nil {
		_ = tc.SetReadDeadline(time.Now().Add(lingerTime))
		_, _ = io.CopyN(io.Discard, tc, lingerBytes)
	}
}

// lingerTime and lingerBytes bound what refuseHeader reads of a refused
// client after its answer.
const (
	lingerTime  = time.Second
	lingerBytes = 256 << 10
)

// errHeaderTooLarge is returned by readRequest for a request whose line
// and header do not fit in its reader's buffer.
var errHeaderTooLarge = errors.New("request header too large")

// errNotHTTP is returned by readRequest for a connection that does not
// start with an HTTP method and a space.
var errNotHTTP = errors.New("not an HTTP request")

// maxMethod bounds the method token readRequest looks at.
const maxMethod = 16

// hostHeader is a request's Host header as the client sent it, which
// http.ReadRequest does not keep.
type hostHeader struct {
	value   string
	present bool
}

// readRequest reads a request, giving up at once on a connection that does
// not start like one (an upper-case method, then a space): binary data is
// refused at its first bytes instead of being read up to a line end. The
// header block is then waited for in br's buffer, so that it is parsed only
// once it is whole; one larger than the buffer is refused
// (errHeaderTooLarge) and the worker never holds more of it. With
// withHost, its Host header is returned.
func readRequest(br *bufio.Reader, withHost bool) (*http.Request, hostHeader, error) {
	for i := 0; ; i++ {
		b, err := br.Peek(i + 1)
		if err != nil {
			if i == 0 {
				return nil, hostHeader{}, err
			}
			return nil, hostHeader{}, errNotHTTP
		}
		c := b[i]
		if i > 0 && c == ' ' {
			break
		}
		if c < 'A' || c > 'Z' || i == maxMethod {
			return nil, hostHeader{}, errNotHTTP
		}
	}
	block, err := peekHeader(br)
	if err != nil {
		return nil, hostHeader{}, err
	}
	var h hostHeader
	if withHost {
		h = findHost(block)
	}
	req, err := http.ReadRequest(br)
	return req, h, err
}

// peekHeader returns the header block waiting in br (its lines, without
// the blank line that ends it) without consuming it. Each wait for more
// bytes looks only at what came since the last (and the 3 bytes before), so
// a header sent a byte at a time costs its length, not its square. Errors:
// errHeaderTooLarge when it does not fit in br, or the read error.
func peekHeader(br *bufio.Reader) ([]byte, error) {
	from := 0
	for {
		b, _ := br.Peek(br.Buffered())
		if end := headerEnd(b, from); end >= 0 {
			return b[:end], nil
		}
		if len(b) == br.Size() {
			return nil, errHeaderTooLarge
		}
		from = max(0, len(b)-3)
		if _, err := br.Peek(len(b) + 1); err != nil { // wait for more
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF // a header cut short is no probe
			}
			return nil, err
		}
	}
}

// headerEnd returns the length of the header lines in b, up to the blank
// line ("\n\n" or "\n\r\n") that ends them, looking for it from b[from:];
// -1 when b holds none.
func headerEnd(b []byte, from int) int {
	for i := from; i < len(b); i++ {
		if b[i] != '\n' {
			continue
		}
		rest := b[i+1:]
		if len(rest) >= 1 && rest[0] == '\n' || len(rest) >= 2 && rest[0] == '\r' && rest[1] == '\n' {
			return i + 1
		}
	}
	return -1
}

// findHost returns the Host header of a raw header block.
func findHost(block []byte) hostHeader {
	lines := strings.Split(string(block), "\n")
	for _, l := range lines[1:] { // the first is the request line
		k, v, ok := strings.Cut(strings.TrimSuffix(l, "\r"), ":")
		if ok && strings.EqualFold(k, "Host") {
			return hostHeader{value: strings.TrimSpace(v), present: true}
		}
	}
	return hostHeader{}
}

// connect answers a CONNECT: an intercepted host is served by intercept;
// a host whose methods and paths cannot be checked on its port is refused
// (ReasonRuleDenied); else check, dial, 200, then a tunnel. When the
// sandbox's destinations are decided by name, the tunnel's first bytes
// must name the same destination: on port 80 every request in the tunnel
// is read and its Host checked (see session), on any other port the TLS
// ClientHello's SNI must be the name (see MatchSNI); a mismatch ends the
// tunnel with a TLS alert.
func (p *Proxy) connect(a *attachment, c net.Conn, br *bufio.Reader, req *http.Request, rec *record) {
	if a.broker != nil && p.intercept(a, c, br, req, rec) {
		return
	}
	if h, port, v := splitHostPort(req.RequestURI); v.Reason == "" && port != 80 && a.policy.HTTPRulesFor(strings.ToLower(h), port) {
		rec.target, rec.host, rec.port = req.RequestURI, strings.ToLower(h), port
		p.answer(c, rec, ReasonRuleDenied, fmt.Sprintf("%s:%d has methods or paths, which are checked over HTTPS on port 443 and HTTP on port 80 only", rec.host, port))
		return
	}
	up, v, ok := p.open(a, c, req.RequestURI, rec)
	if !ok {
		return
	}
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection Established\r\n\r\n"); err != nil {
		a.untrack(up)
		return
	}
	rec.status = http.StatusOK
	if a.named && v.Port == 80 {
		s := &session{p: p, a: a, c: &meter{Conn: c, idle: p.idleTimeout}, br: br, fixed: &v,
			up: newUpstream(req.RequestURI, v, rec.address, up, p.idleTimeout)}
		s.runTunnel() // each request is logged and counted, bytes included
		s.up.close(a)
		return
	}
	defer a.untrack(up)
	var first []byte
	if n := br.Buffered(); n > 0 {
		first, _ = br.Peek(n)
	}
	if a.named {
		_ = c.SetReadDeadline(time.Now().Add(requestTimeout))
		early := bytes.NewReader(first)
		hello, sni, err := readClientHello(io.MultiReader(early, c))
		_ = c.SetReadDeadline(time.Time{})
		hello = append(hello, first[len(first)-early.Len():]...) // early data after the hello
		ok, detail := MatchSNI(v.Host, sni)
		if err != nil {
			ok, detail = false, "reading the TLS ClientHello: "+err.Error()
		}
		if !ok {
			rec.reason, rec.detail, rec.status = ReasonSNI, detail, http.StatusForbidden
			_ = c.SetWriteDeadline(time.Now().Add(answerTimeout))
			_, _ = c.Write(alertAccessDenied())
			return
		}
		first = hello
	}
	if len(first) > 0 {
		w, err := up.Write(first)
		rec.up += int64(w)
		if err != nil {
			return
		}
	}
	upBytes, downBytes := tunnel.Join(c, up, p.idleTimeout)
	rec.up += upBytes
	rec.down += downBytes
}

// open checks target ("host:port") under the sandbox's policy and dials the
// checked address; when it cannot, it answers the client and returns false.
func (p *Proxy) open(a *attachment, c net.Conn, target string, rec *record) (net.Conn, Verdict, bool) {
	rec.target = target
	ctx, cancel := context.WithTimeout(a.ctx, p.dialTimeout)
	defer cancel()
	v := p.guard.CheckPolicy(ctx, target, a.policy)
	rec.host, rec.port = v.Host, v.Port
	if !v.Allowed {
		p.answer(c, rec, v.Reason, v.Detail)
		return nil, v, false
	}
	up, addr, err := p.guard.dialVerdict(ctx, v, p.dial)
	rec.address = addr
	if err != nil {
		p.answer(c, rec, dialFailure(err), err.Error())
		return nil, v, false
	}
	if !a.track(up) {
		_ = up.Close()
		return nil, v, false
	}
	rec.reason = ReasonOK
	return up, v, true
}

// wireReason is the reason the sandbox is told for reason: those that
// would say what a destination's addresses are become ReasonRefused (see
// there).
func wireReason(reason string) string {
	switch reason {
	case ReasonPrivate, ReasonHostSelf, ReasonSelf, ReasonResolve:
		return ReasonRefused
	}
	return reason
}

// statusFor maps a reason the sandbox is told to the status of the proxy's
// answer.
func statusFor(wire string) int {
	switch wire {
	case ReasonDialFailed, ReasonUpstream:
		return http.StatusBadGateway
	case ReasonDialTimeout:
		return http.StatusGatewayTimeout
	case ReasonBadRequest:
		return http.StatusBadRequest
	case ReasonConnLimit:
		return http.StatusTooManyRequests
	case ReasonHeaderTooLarge:
		return http.StatusRequestHeaderFieldsTooLarge
	default:
		return http.StatusForbidden
	}
}

// verdictOf names the outcome of a reason for logs and metrics: allowed,
// refused (by policy) or failed (the destination could not be reached).
func verdictOf(reason string) string {
	switch reason {
	case ReasonOK:
		return "allowed"
	case ReasonResolve, ReasonDialFailed, ReasonDialTimeout, ReasonUpstream:
		return "failed"
	}
	return "refused"
}

// answer writes the proxy's own answer for reason: the wire reason (see
// wireReason) in X-Egress-Refused, its status, and a short body. The
// precise reason and the detail are logged, never sent (they may say what
// a name resolves to, or name internal addresses).
func (p *Proxy) answer(c net.Conn, rec *record, reason, detail string) {
	rec.reason, rec.detail = reason, detail
	wire := wireReason(reason)
	rec.status = statusFor(wire)
	body := fmt.Sprintf("egress %s: %s (%q)\n", verdictOf(wire), wire, clip(rec.target))
	if wire == ReasonRefused {
		body = fmt.Sprintf("egress refused (%q): not a public destination this sandbox may reach\n", clip(rec.target))
	}
	_ = c.SetWriteDeadline(time.Now().Add(answerTimeout))
	_, _ = fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nX-Egress-Refused: %s\r\nContent-Type: text/plain; charset=utf-8\r\n"+
		"Content-Length: %d\r\nConnection: close\r\n\r\n%s",
		rec.status, http.StatusText(rec.status), wire, len(body), body)
}

// meter counts the bytes through a conn and refreshes its idle deadline at
// every read and write. It is used by one goroutine at a time.
type meter struct {
	net.Conn
	idle          time.Duration
	read, written int64
}

func (m *meter) Read(b []byte) (int, error) {
	if m.idle > 0 {
		_ = m.Conn.SetReadDeadline(time.Now().Add(m.idle))
	}
	n, err := m.Conn.Read(b)
	m.read += int64(n)
	return n, err
}

func (m *meter) Write(b []byte) (int, error) {
	if m.idle > 0 {
		_ = m.Conn.SetWriteDeadline(time.Now().Add(m.idle))
	}
	n, err := m.Conn.Write(b)
	m.written += int64(n)
	return n, err
}

// clip bounds a client-supplied string before it is logged.
func clip(s string) string {
	if len(s) > 256 {
		return s[:256]
	}
	return strings.ToValidUTF8(s, "?")
}

// dialFailure is the refusal reason of a failed upstream dial: the guard's
// refusal at dial time (an address it refuses), a timeout, or any other
// failure.
func dialFailure(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, ErrRefusedAtDial):
		return ReasonPrivate
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return ReasonDialTimeout
	}
	return ReasonDialFailed
}
