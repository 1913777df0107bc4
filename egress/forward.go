package egress

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// hopHeaders are removed both ways, with every header that Connection names.
var hopHeaders = []string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

func removeHop(h http.Header) {
	for _, f := range h.Values("Connection") {
		for _, name := range strings.Split(f, ",") {
			if name = strings.TrimSpace(name); name != "" {
				h.Del(name)
			}
		}
	}
	for _, name := range hopHeaders {
		h.Del(name)
	}
}

// httpTarget returns the "host:port" of an absolute-form http request, or
// the reason it is not one. An origin-form request is addressed to the
// proxy itself and is refused with ReasonSelf.
func httpTarget(req *http.Request) (string, string, string) {
	u := req.URL
	switch {
	case req.RequestURI == "*" || strings.HasPrefix(req.RequestURI, "/"):
		return "", ReasonSelf, "origin-form request: the proxy is not a web server"
	case u.Scheme != "http":
		return "", ReasonBadRequest, fmt.Sprintf("scheme %q (use CONNECT for https)", u.Scheme)
	case u.User != nil:
		return "", ReasonNotCanonical, "userinfo in the URL"
	case u.Host == "":
		return "", ReasonNotCanonical, "empty host"
	case strings.HasSuffix(u.Host, ":"):
		return "", ReasonBadPort, "empty port"
	case u.Port() == "":
		return u.Host + ":80", "", ""
	}
	return u.Host, "", ""
}

// session serves the HTTP requests of one client connection, one after
// another, keeping both sides alive while they allow it: absolute-form
// requests through the proxy, each checked under the sandbox's policy and
// sent in origin form on an upstream connection kept for the next request
// to the same destination; or, in a tunnel to port 80 of a sandbox whose
// destinations are decided by name (fixed), origin-form requests to the
// tunnel's one upstream. When destinations are decided by name, a
// request's Host header must be the destination it was checked for
// (ReasonHostHeader). Responses are passed back as they are (redirects
// included: the proxy never follows them). Each request is one decision:
// one log line, one count.
type session struct {
	p     *Proxy
	a     *attachment
	c     *meter            // the client
	br    *bufio.Reader     // the client's requests
	lr    *io.LimitedReader // bounds each request header (nil in a tunnel)
	fixed *Verdict          // the tunnel's checked destination
	up    *upstream
	bw    *bufio.Writer // the responses to the client (made for the first)
}

// responseBuffer is the size of the buffer a response is written to the
// client through.
const responseBuffer = 8 << 10

// upstream is a kept-alive connection to one checked destination.
type upstream struct {
	target string // host:port as the client wrote it
	host   string
	port   uint16
	addr   netip.AddrPort
	conn   net.Conn
	m      *meter
	lr     *io.LimitedReader // bounds each response header
	br     *bufio.Reader
}

// upstreamBuffer is the size of the buffer an upstream's responses are
// read through; a response header must fit in it for the names its
// Connection header lists to be removed (see connectionTokens).
const upstreamBuffer = 64 << 10

func newUpstream(target string, v Verdict, addr netip.AddrPort, conn net.Conn, idle time.Duration) *upstream {
	m := &meter{Conn: conn, idle: idle}
	lr := &io.LimitedReader{R: m, N: math.MaxInt64}
	return &upstream{target: target, host: v.Host, port: v.Port, addr: addr, conn: conn, m: m, lr: lr,
		br: bufio.NewReaderSize(lr, upstreamBuffer)}
}

// close untracks and closes u (nil: nothing).
func (u *upstream) close(a *attachment) {
	if u != nil {
		a.untrack(u.conn)
	}
}

// run serves req (already read, with its Host header) and the requests
// after it, until a side closes or a request is refused; a CONNECT among
// them ends the session with its tunnel.
func (s *session) run(req *http.Request, host hostHeader) {
	defer func() { s.up.close(s.a) }()
	for {
		if req.Method == http.MethodConnect {
			rec := &record{sandbox: s.a.id, start: time.Now(), method: req.Method}
			s.p.metrics.active.Inc()
			s.p.connect(s.a, s.c.Conn, s.br, req, rec)
			s.p.metrics.active.Dec()
			s.p.finish(s.a, rec)
			return
		}
		if !s.serveOne(req, host) {
			return
		}
		var err error
		if s.lr != nil {
			s.lr.N = clientBuffer
		}
		req, host, err = readRequest(s.br, s.a.named)
		if s.lr != nil {
			s.lr.N = math.MaxInt64
		}
		if errors.Is(err, errHeaderTooLarge) {
			s.p.refuseHeader(s.a, s.c.Conn)
			return
		}
		if err != nil {
			return // the client closed, went idle, or sent what is no request
		}
	}
}

// runTunnel serves the requests in a tunnel (s.fixed), until a side closes
// or a request is refused.
func (s *session) runTunnel() {
	for {
		req, host, err := readRequest(s.br, true)
		if errors.Is(err, errHeaderTooLarge) {
			s.p.refuseHeader(s.a, s.c.Conn)
			return
		}
		if err != nil {
			return
		}
		if req.Method == http.MethodConnect || !s.serveOne(req, host) {
			return
		}
	}
}

// serveOne serves one request and reports whether the connection goes on.
func (s *session) serveOne(req *http.Request, host hostHeader) bool {
	rec := &record{sandbox: s.a.id, method: req.Method, target: req.RequestURI, start: time.Now()}
	s.p.metrics.active.Inc()
	defer func() {
		s.p.metrics.active.Dec()
		s.p.finish(s.a, rec)
	}()
	target, reason, detail := s.target(req)
	if reason != "" {
		s.p.answer(s.c.Conn, rec, reason, detail)
		return false
	}
	if s.a.named {
		if h, port, v := splitHostPort(target); v.Reason == "" {
			if ok, detail := MatchHost(strings.ToLower(h), port, host.value, host.present); !ok {
				rec.host, rec.port = strings.ToLower(h), port
				s.p.answer(s.c.Conn, rec, ReasonHostHeader, detail)
				return false
			}
		}
	}
	if !s.p.rulesOK(s.a, s.c.Conn, req, target, rec) || !s.p.plainSecretsOK(s.a, s.c.Conn, req, target, rec) {
		return false
	}
	switch {
	case s.fixed == nil:
		req.Host = req.URL.Host // absolute form: the checked name, whatever the header said
	case req.Host == "":
		req.Host = s.fixed.Host
	}
	clientClose := req.Close
	removeHop(req.Header)
	req.Close = false
	expect := strings.EqualFold(req.Header.Get("Expect"), "100-continue")
	req.Header.Del("Expect")
	resp, ok := s.exchange(req, target, rec, expect)
	if !ok {
		return false
	}
	defer resp.Body.Close()
	upClose := resp.Close
	removeHop(resp.Header)
	unbounded := resp.ContentLength < 0 && !chunked(resp.TransferEncoding) && bodyAllowed(resp.StatusCode, req.Method)
	keep := !clientClose && !unbounded
	resp.Close = !keep
	resp.ProtoMajor, resp.ProtoMinor = 1, 1
	rec.status = resp.StatusCode
	before := s.up.m.read
	err := s.writeResponse(resp)
	rec.down += s.up.m.read - before
	if err != nil || upClose {
		s.up.close(s.a) // the next request dials again
		s.up = nil
	}
	return err == nil && keep
}

// writeResponse passes resp to the client through s.bw, so that its status
// line, header and whatever of its body has already arrived leave in one
// write (Response.Write alone makes one for each piece of each header line,
// and the client may wake for each): before any read of the body that
// could wait on the upstream, what is buffered is sent, so a streamed body
// reaches the client as it comes.
func (s *session) writeResponse(resp *http.Response) error {
	if s.bw == nil {
		s.bw = bufio.NewWriterSize(s.c, responseBuffer)
	}
	if resp.Body != nil && resp.Body != http.NoBody {
		f := flushFirst{ReadCloser: resp.Body, w: s.bw}
		if !chunked(resp.TransferEncoding) {
			f.from = s.up.br
		}
		resp.Body = f
	}
	if err := resp.Write(writerOnly{s.bw}); err != nil {
		return err
	}
	return s.bw.Flush()
}

// flushFirst is a response body that flushes w before a read that could
// wait: always, unless the body is read straight from the upstream's reader
// from (nil for a chunked body, whose reader may wait for more than from
// holds) and from holds bytes already.
type flushFirst struct {
	io.ReadCloser
	w    *bufio.Writer
	from *bufio.Reader
}

func (f flushFirst) Read(p []byte) (int, error) {
	if f.w.Buffered() > 0 && (f.from == nil || f.from.Buffered() == 0) {
		if err := f.w.Flush(); err != nil {
			return 0, err
		}
	}
	return f.ReadCloser.Read(p)
}

// writerOnly hides a bufio.Writer's ReadFrom, which reads into its own
// buffer: a flushFirst read must never run while that buffer is lent out.
type writerOnly struct{ w io.Writer }

func (w writerOnly) Write(p []byte) (int, error) { return w.w.Write(p) }

// target is the destination of req: the tunnel's, or that of its
// absolute-form URL; or the reason it has none.
func (s *session) target(req *http.Request) (target, reason, detail string) {
	if s.fixed == nil {
		return httpTarget(req)
	}
	want := net.JoinHostPort(s.fixed.Host, strconv.Itoa(int(s.fixed.Port)))
	if req.URL.Host != "" { // absolute form in a tunnel: it must name the tunnel's destination
		t, reason, detail := httpTarget(req)
		if reason != "" {
			return "", reason, detail
		}
		if h, port, v := splitHostPort(t); v.Reason != "" || !strings.EqualFold(h, s.fixed.Host) || port != s.fixed.Port {
			return "", ReasonHostHeader, fmt.Sprintf("a request for %s in a tunnel to %s", clip(t), want)
		}
	}
	return want, "", ""
}

// exchange sends req to target, on the kept upstream when it leads there
// (else on a new one, checked and dialed), and reads the response. A kept
// upstream that the server closed meanwhile is replaced once for a request
// without a body. When it fails it answers the client and returns false.
func (s *session) exchange(req *http.Request, target string, rec *record, expect bool) (*http.Response, bool) {
	for attempt := 0; ; attempt++ {
		reused := s.up != nil && s.up.target == target
		switch {
		case reused:
			rec.host, rec.port, rec.address, rec.reason = s.up.host, s.up.port, s.up.addr, ReasonOK
		case s.fixed != nil:
			s.p.answer(s.c.Conn, rec, ReasonUpstream, "the tunnel's upstream closed")
			return nil, false
		default:
			s.up.close(s.a)
			s.up = nil
			conn, v, ok := s.p.open(s.a, s.c.Conn, target, rec)
			if !ok {
				return nil, false
			}
			s.up = newUpstream(target, v, rec.address, conn, s.p.idleTimeout)
		}
		if expect && attempt == 0 {
			if _, err := io.WriteString(s.c, "HTTP/1.1 100 Continue\r\n\r\n"); err != nil {
				return nil, false
			}
		}
		up := s.up
		w0, r0 := up.m.written, up.m.read
		err := req.Write(up.m)
		var resp *http.Response
		if err == nil {
			up.lr.N = maxResponseHeader
			resp, err = finalResponse(up.br, req, s.c)
			up.lr.N = math.MaxInt64
		}
		rec.up += up.m.written - w0
		rec.down += up.m.read - r0
		if err == nil {
			return resp, true
		}
		stale := reused && attempt == 0 && up.m.read == r0 && (req.Body == nil || req.Body == http.NoBody)
		up.close(s.a)
		s.up = nil
		if stale && s.fixed == nil {
			continue
		}
		s.p.answer(s.c.Conn, rec, ReasonUpstream, "exchange: "+err.Error())
		return nil, false
	}
}

// chunked reports whether a transfer coding list ends in chunked.
func chunked(te []string) bool { return len(te) > 0 && te[0] == "chunked" }

// bodyAllowed reports whether a response to method with status has a body.
func bodyAllowed(status int, method string) bool {
	return method != http.MethodHead && status >= 200 && status != http.StatusNoContent && status != http.StatusNotModified
}

// finalResponse reads the upstream response, passing informational (1xx)
// responses through to w first. A protocol switch is an error: Upgrade was
// removed from the request.
func finalResponse(br *bufio.Reader, req *http.Request, w io.Writer) (*http.Response, error) {
	for {
		named := connectionTokens(br)
		resp, err := http.ReadResponse(br, req)
		if err != nil {
			return nil, err
		}
		for _, name := range named {
			resp.Header.Del(name)
		}
		switch {
		case resp.StatusCode == http.StatusSwitchingProtocols:
			resp.Body.Close()
			return nil, errors.New("unrequested protocol switch")
		case resp.StatusCode >= 100 && resp.StatusCode < 200:
			removeHop(resp.Header)
			if _, err := fmt.Fprintf(w, "HTTP/1.1 %s\r\n", resp.Status); err != nil {
				return nil, err
			}
			if err := resp.Header.Write(w); err != nil {
				return nil, err
			}
			if _, err := io.WriteString(w, "\r\n"); err != nil {
				return nil, err
			}
		default:
			return resp, nil
		}
	}
}

// connectionTokens returns the header names that the Connection header of
// the response waiting in br lists. http.ReadResponse drops a Connection
// header that says close, and the names with it, so they are read from the
// raw header block first (br must hold a whole header block).
func connectionTokens(br *bufio.Reader) []string {
	var block []byte
	for {
		b, _ := br.Peek(br.Buffered())
		if end := bytes.Index(b, []byte("\r\n\r\n")); end >= 0 {
			block = b[:end]
			break
		}
		if br.Buffered() == br.Size() {
			return nil
		}
		if _, err := br.Peek(br.Buffered() + 1); err != nil {
			return nil
		}
	}
	var names []string
	for _, line := range strings.Split(string(block), "\r\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || !strings.EqualFold(strings.TrimSpace(k), "Connection") {
			continue
		}
		for _, name := range strings.Split(v, ",") {
			if name = strings.TrimSpace(name); name != "" && !strings.EqualFold(name, "close") {
				names = append(names, name)
			}
		}
	}
	return names
}
