package httpapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"openvibe.network/agentsandbox/sandbox"
)

// What a sandbox serves on its own loopback, reached through the worker:
//
//	ANY …/ports/{port}/{path…}   an HTTP request (WebSocket upgrades too)
//	                             forwarded to 127.0.0.1:{port} inside the
//	                             sandbox, the answer streamed back
//	POST …/ports/{port}/preview  a signed URL for a person's browser, on the
//	                             preview listener (see preview.go)
//
// The worker reaches the port through the sandbox's init (Ports.DialPort):
// the sandbox has no address anyone could reach, and forwarding goes only
// into it. The worker's token (the API's Authorization) and a preview's
// cookie never reach the sandbox; X-Forwarded-For, -Proto, -Host (and, for
// the API, -Prefix) say what the original request was; the Host header is
// the original one. Each sandbox has at most PortsConfig.MaxConns exchanges
// at once (429 beyond); an exchange ends when its server has not begun to
// answer within HeaderTimeout (504), when no byte moved either way for
// IdleTimeout, or after Timeout in all; request bodies over MaxRequestBody
// are refused (413), answers whose head is over MaxResponseHeader are a 502,
// and an answer's body is cut off past MaxResponseBody. A client that does
// not take a write within Config.WriteTimeout is cut off.

// Ports is what the API needs of a runtime for the sandboxes' own ports
// (see sandbox.Runtime.DialPort): a connection to port inside sandbox id.
// Errors: sandbox.ErrNotFound, sandbox.ErrInvalid, sandbox.ErrPortClosed.
type Ports interface {
	DialPort(ctx context.Context, id string, port int) (net.Conn, error)
}

// Defaults of PortsConfig.
const (
	DefaultPortMaxConns       = 64
	DefaultPortHeaderTimeout  = time.Minute
	DefaultPortIdleTimeout    = 5 * time.Minute
	DefaultPortTimeout        = 30 * time.Minute
	DefaultPortMaxRequestBody = 1 << 30
	DefaultPortMaxResponse    = 4 << 30
	DefaultPortMaxHeader      = 16 << 10 // as the egress proxy's request heads
)

// PortsConfig bounds the forwarding to the sandboxes' ports and configures
// the previews. Zero fields take the defaults.
type PortsConfig struct {
	// MaxConns bounds the exchanges (requests and WebSockets) with one
	// sandbox's ports at once, through the API and previews together.
	MaxConns int
	// HeaderTimeout bounds the wait for a server's answer head once the
	// request was sent.
	HeaderTimeout time.Duration
	// IdleTimeout ends an exchange (a WebSocket too) on which no byte moved
	// either way for that long.
	IdleTimeout time.Duration
	// Timeout bounds an exchange in all.
	Timeout time.Duration
	// MaxRequestBody bounds the body of a forwarded request (bytes).
	MaxRequestBody int64
	// MaxResponseBody bounds the body of an answer (bytes): the answer is
	// cut off there.
	MaxResponseBody int64
	// MaxResponseHeader bounds an answer's head (bytes).
	MaxResponseHeader int64
	// PreviewBaseURL is the preview listener's URL with `{port}` and `{id}`
	// in its host name, one origin per sandbox and port (e.g.
	// https://{port}-{id}.preview.example). Empty: no previews (the
	// preview route answers 501).
	PreviewBaseURL string
	// Now is the clock of the previews' expiry (default time.Now).
	Now func() time.Time
}

// withDefaults fills the zero fields of c.
func (c PortsConfig) withDefaults() PortsConfig {
	def := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	def64 := func(v *int64, d int64) {
		if *v <= 0 {
			*v = d
		}
	}
	if c.MaxConns <= 0 {
		c.MaxConns = DefaultPortMaxConns
	}
	def(&c.HeaderTimeout, DefaultPortHeaderTimeout)
	def(&c.IdleTimeout, DefaultPortIdleTimeout)
	def(&c.Timeout, DefaultPortTimeout)
	def64(&c.MaxRequestBody, DefaultPortMaxRequestBody)
	def64(&c.MaxResponseBody, DefaultPortMaxResponse)
	def64(&c.MaxResponseHeader, DefaultPortMaxHeader)
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// portForwarder forwards requests to the sandboxes' ports.
type portForwarder struct {
	cfg          PortsConfig
	rt           Ports
	writeTimeout time.Duration
	previews     *previewer // nil without PreviewBaseURL
	buffers      bufferPool

	mu    sync.Mutex
	conns map[string]int        // exchanges open per sandbox
	open  map[string]int        // connections open per sandbox (see takeConn)
	ended chan struct{}         // closed (and replaced) when a connection ended
	idle  map[string][]*backend // kept connections per "ID PORT"
}

// newPortForwarder makes the forwarder of cfg over rt.
func newPortForwarder(cfg PortsConfig, rt Ports, writeTimeout time.Duration) (*portForwarder, error) {
	cfg = cfg.withDefaults()
	f := &portForwarder{cfg: cfg, rt: rt, writeTimeout: writeTimeout, conns: map[string]int{}, open: map[string]int{}, ended: make(chan struct{}),
		idle: map[string][]*backend{}}
	if cfg.PreviewBaseURL != "" {
		p, err := newPreviewer(cfg.PreviewBaseURL, cfg.Now)
		if err != nil {
			return nil, err
		}
		f.previews = p
	}
	return f, nil
}

// portTarget is where one forwarded request goes, and how.
type portTarget struct {
	id   string
	port int
	// path, rawPath and query are the request's in the sandbox.
	path, rawPath, query string
	// prefix is the path the API put before the request's own (the API's
	// route; "" for a preview): X-Forwarded-Prefix, and put before the
	// sandbox's redirects to its own paths.
	prefix string
	// proto is X-Forwarded-Proto.
	proto string
	// preview strips the preview cookie instead of the API's token.
	preview bool
}

// parsePort reads a port of the URL: a decimal 1..65535 as written.
func parsePort(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != s {
		return 0, badRequest("port %q: give the sandbox's TCP port as a number, 1 to 65535", s)
	}
	return n, nil
}

// portForward handles ANY /v1/sandboxes/{id}/ports/{port}/{path…}.
func (s *Server) portForward(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	port, err := parsePort(r.PathValue("port"))
	if err != nil {
		return err
	}
	prefix := "/v1/sandboxes/" + id + "/ports/" + strconv.Itoa(port)
	t := &portTarget{id: id, port: port, prefix: prefix, path: "/" + r.PathValue("path"), query: r.URL.RawQuery, proto: "http"}
	if raw, ok := strings.CutPrefix(r.URL.EscapedPath(), prefix); ok && raw != t.path {
		if p, err := url.PathUnescape(raw); err == nil && p == t.path {
			t.rawPath = raw
		}
	}
	if r.TLS != nil {
		t.proto = "https"
	}
	return s.ports.forward(w, r, t)
}

// forward passes r on to t within the bounds. It returns the error to
// answer, if there is one and nothing was written yet (see exchange).
func (f *portForwarder) forward(w http.ResponseWriter, r *http.Request, t *portTarget) error {
	if r.ContentLength > f.cfg.MaxRequestBody {
		return newError(CodeBodyTooLarge, "the request body is %d bytes; this worker forwards at most %d to a sandbox's port", r.ContentLength, f.cfg.MaxRequestBody)
	}
	if !f.acquire(t.id) {
		return &Error{Status: statusOf(CodeTooManyConns), Code: CodeTooManyConns, RetryAfter: 1,
			Message: fmt.Sprintf("sandbox %s has %d exchanges with its ports open, the most this worker allows; wait for one to end", t.id, f.cfg.MaxConns)}
	}
	defer f.release(t.id)
	addLog(r.Context(), slog.Int("port", t.port))
	if r.Body != nil && r.Body != http.NoBody {
		r.Body = http.MaxBytesReader(w, r.Body, f.cfg.MaxRequestBody)
	}
	ctx, cancel := context.WithTimeout(r.Context(), f.cfg.Timeout)
	defer cancel()
	pw := newPortWriter(w, f.writeTimeout)
	defer pw.done()
	return f.exchange(ctx, pw, r, t)
}

// acquire takes one of sandbox id's exchanges, unless it has them all.
func (f *portForwarder) acquire(id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.conns[id] >= f.cfg.MaxConns {
		return false
	}
	f.conns[id]++
	return true
}

// release gives back one of sandbox id's exchanges.
func (f *portForwarder) release(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.conns[id]--; f.conns[id] <= 0 {
		delete(f.conns, id)
	}
}

// prefixLocation puts prefix before the path of a redirect to the
// sandbox's own paths: an absolute path, or an absolute URL of host.
func prefixLocation(loc, prefix, host string) string {
	if strings.HasPrefix(loc, "/") && !strings.HasPrefix(loc, "//") && !strings.HasPrefix(loc, "/\\") {
		return prefix + loc
	}
	for _, scheme := range []string{"http://", "https://"} {
		origin := scheme + host
		if len(loc) >= len(origin) && strings.EqualFold(loc[:len(origin)], origin) {
			rest := loc[len(origin):]
			switch {
			case rest == "":
				return loc + prefix + "/"
			case rest[0] == '/':
				return loc[:len(origin)] + prefix + rest
			case rest[0] == '?' || rest[0] == '#':
				return loc[:len(origin)] + prefix + "/" + rest
			}
		}
	}
	return loc
}

// errResponseTooLarge is an answer whose body is over MaxResponseBody.
var errResponseTooLarge = errors.New("the answer's body is over the worker's bound")

// boundedAnswer is an answer's body that fails past left bytes (the proxy
// then cuts the client's answer off).
type boundedAnswer struct {
	io.ReadCloser
	left int64
}

func (b *boundedAnswer) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, errResponseTooLarge
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	return n, err
}

// portError is the answer to an exchange with t that failed with err; nil
// when the client went away (nobody to answer).
func (f *portForwarder) portError(ctx context.Context, t *portTarget, err error) *Error {
	var tooBig *http.MaxBytesError
	var ne net.Error
	switch {
	case errors.Is(err, sandbox.ErrNotFound):
		return errSandboxNotFound(t.id)
	case errors.Is(err, errTooManyConns):
		return &Error{Status: statusOf(CodeTooManyConns), Code: CodeTooManyConns, RetryAfter: 1,
			Message: fmt.Sprintf("sandbox %s has %d connections to its ports open, the most this worker allows; wait for one to end", t.id, f.cfg.MaxConns)}
	case errors.Is(err, sandbox.ErrPortClosed):
		return newError(CodePortClosed, "nothing listens on port %d in sandbox %s; start a server on 127.0.0.1:%d (or 0.0.0.0:%d) in it", t.port, t.id, t.port, t.port)
	case errors.As(err, &tooBig):
		return newError(CodeBodyTooLarge, "the request body is over %d bytes, the most this worker forwards to a sandbox's port", tooBig.Limit)
	case errors.Is(err, errResponseTooLarge):
		return newError(CodePortFailed, "the server on port %d of sandbox %s answered with a body over %d bytes, the most this worker passes on", t.port, t.id, f.cfg.MaxResponseBody)
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return newError(CodePortTimeout, "the exchange with port %d of sandbox %s took longer than this worker allows (%v)", t.port, t.id, f.cfg.Timeout)
	case ctx.Err() != nil:
		return nil
	case errors.Is(err, errIdle):
		return newError(CodePortTimeout, "no byte moved between the worker and port %d of sandbox %s for %v", t.port, t.id, f.cfg.IdleTimeout)
	case errors.As(err, &ne) && ne.Timeout():
		return newError(CodePortTimeout, "the server on port %d of sandbox %s did not answer within %v", t.port, t.id, f.cfg.HeaderTimeout)
	case errors.Is(err, errHeadTooLarge):
		return newError(CodePortFailed, "the server on port %d of sandbox %s sent an answer head over %d bytes, the most this worker reads", t.port, t.id, f.cfg.MaxResponseHeader)
	case errors.Is(err, errSwitched):
		return newError(CodePortFailed, "the server on port %d of sandbox %s switched protocols without being asked to", t.port, t.id)
	}
	return newError(CodePortFailed, "the server on port %d of sandbox %s closed the connection or did not answer with HTTP/1.1", t.port, t.id)
}

// fail is the error exchange returns for err: portError's answer, nil when
// there is nobody to answer.
func (f *portForwarder) fail(ctx context.Context, t *portTarget, err error) error {
	if e := f.portError(ctx, t, err); e != nil {
		return e
	}
	return nil
}

// attrPortError is the log attribute of a failed exchange.
func attrPortError(err error) slog.Attr { return slog.String("port_error", err.Error()) }

// attrSwitched is the log attribute of a protocol switch.
func attrSwitched(proto string) slog.Attr { return slog.String("switched_to", proto) }

// stripCookie removes the cookies named names from h's Cookie headers,
// leaving the others as they were written.
func stripCookie(h http.Header, names ...string) {
	vals := h.Values("Cookie")
	if len(vals) == 0 {
		return
	}
	var kept []string
	for _, v := range vals {
		var parts []string
		for part := range strings.SplitSeq(v, ";") {
			name, _, _ := strings.Cut(strings.TrimSpace(part), "=")
			if !slices.Contains(names, name) {
				parts = append(parts, strings.TrimSpace(part))
			}
		}
		if len(parts) > 0 {
			kept = append(kept, strings.Join(parts, "; "))
		}
	}
	h.Del("Cookie")
	if len(kept) > 0 {
		h.Set("Cookie", strings.Join(kept, "; "))
	}
}

// The routes of the ports.
const (
	portRoute    = "/v1/sandboxes/{id}/ports/{port}/{path...}"
	previewRoute = "/v1/sandboxes/{id}/ports/{port}/preview"
)
