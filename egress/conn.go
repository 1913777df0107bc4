package egress

import (
	"bufio"
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

// maxHeaderBytes bounds the request line and header of a request, and the
// status line and header of a response (net/http's default).
const maxHeaderBytes = 1 << 20

// answerTimeout bounds the write of a refusal to a client that does not read.
const answerTimeout = 5 * time.Second

// record is what the one log line of a connection says.
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

// serve handles one connection of a sandbox: one request, then close. A
// connection that is not a proxy request is closed at once, unanswered, and
// nothing it sent is logged (not its bytes, not the parser's quote of
// them).
func (p *Proxy) serve(a *attachment, c net.Conn) {
	rec := &record{sandbox: a.id, start: time.Now()}
	_ = c.SetReadDeadline(time.Now().Add(requestTimeout))
	mc := &meter{Conn: c}
	lr := &io.LimitedReader{R: mc, N: maxHeaderBytes}
	br := bufio.NewReader(lr)
	req, err := readRequest(br)
	lr.N = math.MaxInt64 // the header is read; the body is not bounded here
	mc.idle = p.idleTimeout
	_ = c.SetReadDeadline(time.Time{})
	if errors.Is(err, io.EOF) {
		return // closed before a byte: a probe, not a request
	}
	if err != nil {
		rec.reason, rec.detail = ReasonBadRequest, "not an HTTP proxy request"
		p.finish(a, rec)
		return
	}
	rec.method = req.Method
	p.metrics.active.Inc()
	if req.Method == http.MethodConnect {
		p.connect(a, c, br, req, rec)
	} else {
		p.forward(a, mc, req, rec)
	}
	p.metrics.active.Dec()
	p.finish(a, rec)
}

// errNotHTTP is returned by readRequest for a connection that does not
// start with an HTTP method and a space.
var errNotHTTP = errors.New("not an HTTP request")

// maxMethod bounds the method token readRequest looks at.
const maxMethod = 16

// readRequest reads a request, giving up at once on a connection that does
// not start like one (an upper-case method, then a space): binary data is
// refused at its first bytes instead of being read up to a line end.
func readRequest(br *bufio.Reader) (*http.Request, error) {
	for i := 0; ; i++ {
		b, err := br.Peek(i + 1)
		if err != nil {
			if i == 0 {
				return nil, err
			}
			return nil, errNotHTTP
		}
		c := b[i]
		if i > 0 && c == ' ' {
			break
		}
		if c < 'A' || c > 'Z' || i == maxMethod {
			return nil, errNotHTTP
		}
	}
	return http.ReadRequest(br)
}

// connect answers a CONNECT: check, dial, 200, then a tunnel.
func (p *Proxy) connect(a *attachment, c net.Conn, br *bufio.Reader, req *http.Request, rec *record) {
	up, ok := p.open(a, c, req.RequestURI, rec)
	if !ok {
		return
	}
	defer a.untrack(up)
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection Established\r\n\r\n"); err != nil {
		return
	}
	rec.status = http.StatusOK
	if n := br.Buffered(); n > 0 {
		b, _ := br.Peek(n)
		w, err := up.Write(b)
		rec.up += int64(w)
		if err != nil {
			return
		}
	}
	upBytes, downBytes := tunnel.Join(c, up, p.idleTimeout)
	rec.up += upBytes
	rec.down += downBytes
}

// open checks target ("host:port") and dials the checked address; when it
// cannot, it answers the client and returns false.
func (p *Proxy) open(a *attachment, c net.Conn, target string, rec *record) (net.Conn, bool) {
	rec.target = target
	ctx, cancel := context.WithTimeout(a.ctx, p.dialTimeout)
	defer cancel()
	v := p.guard.Check(ctx, target)
	rec.host, rec.port = v.Host, v.Port
	if !v.Allowed {
		p.answer(c, rec, v.Reason, v.Detail)
		return nil, false
	}
	up, addr, err := p.guard.dialVerdict(ctx, v, p.dial)
	rec.address = addr
	if err != nil {
		reason := ReasonDialFailed
		var ne net.Error
		switch {
		case errors.Is(err, ErrRefusedAtDial):
			reason = ReasonPrivate
		case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
			reason = ReasonDialTimeout
		}
		p.answer(c, rec, reason, err.Error())
		return nil, false
	}
	if !a.track(up) {
		_ = up.Close()
		return nil, false
	}
	rec.reason = ReasonOK
	return up, true
}

// statusFor maps a reason to the status of the proxy's answer.
func statusFor(reason string) int {
	switch reason {
	case ReasonResolve, ReasonDialFailed, ReasonUpstream:
		return http.StatusBadGateway
	case ReasonDialTimeout:
		return http.StatusGatewayTimeout
	case ReasonBadRequest:
		return http.StatusBadRequest
	case ReasonConnLimit:
		return http.StatusTooManyRequests
	default:
		return http.StatusForbidden
	}
}

// verdictOf names the outcome of a reason for logs and metrics: allowed,
// refused (by policy) or failed (the destination could not be reached).
func verdictOf(reason string) string {
	switch statusFor(reason) {
	case http.StatusBadGateway, http.StatusGatewayTimeout:
		return "failed"
	}
	if reason == ReasonOK {
		return "allowed"
	}
	return "refused"
}

// answer writes the proxy's own answer for reason: the status of statusFor,
// the reason in X-Egress-Refused, and a short body. The detail is logged,
// never sent (it may name internal addresses).
func (p *Proxy) answer(c net.Conn, rec *record, reason, detail string) {
	rec.reason, rec.detail = reason, detail
	rec.status = statusFor(reason)
	body := fmt.Sprintf("egress %s: %s (%q)\n", verdictOf(reason), reason, clip(rec.target))
	_ = c.SetWriteDeadline(time.Now().Add(answerTimeout))
	_, _ = fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nX-Egress-Refused: %s\r\nContent-Type: text/plain; charset=utf-8\r\n"+
		"Content-Length: %d\r\nConnection: close\r\n\r\n%s",
		rec.status, http.StatusText(rec.status), reason, len(body), body)
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
