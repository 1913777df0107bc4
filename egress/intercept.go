package egress

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/http/httputil"
	"net/netip"
	"strings"
	"sync"
	"time"

	"openvibe.network/agentsandbox"
)

// interceptor serves the requests of one sandbox's intercepted TLS
// connections (see Proxy.intercept): the sandbox's half terminated with a
// leaf of its CA, each request checked and given its secrets, then sent to
// the real host over TLS verified against the worker's trust store.
type interceptor struct {
	p         *Proxy
	a         *attachment
	transport *http.Transport
	// canary is the self-test's upstream (see broker.canary): when set,
	// the only host this interceptor reaches.
	canary *agentsandbox.EgressCanary
}

// newInterceptor returns a's interceptor: its transport dials through the
// guard (each dial checked under a's policy, resolve-once, the checked
// address dialed) and verifies upstream certificates against the proxy's
// upstream roots (nil: the host's trust store). For the self-test's probe
// sandbox (a canary) it dials only the canary, through its hook, and
// verifies against the canary's roots only.
func newInterceptor(p *Proxy, a *attachment) *interceptor {
	in := &interceptor{p: p, a: a, canary: a.broker.canary}
	roots := p.upstreamRoots
	if in.canary != nil {
		roots = in.canary.Roots
	}
	in.transport = &http.Transport{
		DialContext:            in.dial,
		TLSClientConfig:        &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout:    p.dialTimeout,
		IdleConnTimeout:        p.idleTimeout,
		MaxIdleConnsPerHost:    8,
		MaxResponseHeaderBytes: maxResponseHeader,
		DisableCompression:     true,
	}
	return in
}

// checkedConn is an upstream connection of the interceptor: the address
// the guard checked, tracked by its attachment until closed.
type checkedConn struct {
	net.Conn
	addr netip.AddrPort
	a    *attachment
	once sync.Once
}

func (c *checkedConn) Close() error {
	c.once.Do(func() { c.a.untrack(c.Conn) })
	return nil
}

// dialError is a refused or failed dial of the interceptor, with the
// reason the sandbox is told.
type dialError struct {
	reason, detail string
}

func (e *dialError) Error() string { return e.reason + ": " + e.detail }

// dial checks addr under the sandbox's policy and connects to a checked
// address through the proxy's dialer.
func (in *interceptor) dial(ctx context.Context, _, addr string) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, in.p.dialTimeout)
	defer cancel()
	var (
		c   net.Conn
		ap  netip.AddrPort
		err error
	)
	if in.canary != nil {
		c, ap, err = in.dialCanary(ctx, addr)
	} else {
		v := in.p.guard.CheckPolicy(ctx, addr, in.a.policy)
		if !v.Allowed {
			return nil, &dialError{v.Reason, v.Detail}
		}
		c, ap, err = in.p.guard.dialVerdict(ctx, v, in.p.dial)
	}
	if err != nil {
		var de *dialError
		if errors.As(err, &de) {
			return nil, de
		}
		return nil, &dialError{dialFailure(err), err.Error()}
	}
	if !in.a.track(c) {
		_ = c.Close()
		return nil, ErrClosed
	}
	return &checkedConn{Conn: c, addr: ap, a: in.a}, nil
}

// dialCanary connects to the self-test's canary through its hook when
// addr is its host on port 443, and refuses any other address: the probe
// sandbox reaches nothing else through interception, and never the guard
// or DNS for the canary's name.
func (in *interceptor) dialCanary(ctx context.Context, addr string) (net.Conn, netip.AddrPort, error) {
	h, port, err := net.SplitHostPort(addr)
	if err != nil || !in.a.broker.isCanary(strings.ToLower(h)) || port != "443" {
		return nil, netip.AddrPort{}, &dialError{ReasonRefused, fmt.Sprintf("the self-test's probe sandbox reaches only its canary, not %s", addr)}
	}
	c, err := in.canary.Dial(ctx)
	if err != nil {
		return nil, netip.AddrPort{}, fmt.Errorf("dial the self-test's canary: %w", err)
	}
	ap, _ := netip.ParseAddrPort(c.RemoteAddr().String())
	return c, ap, nil
}

// intercept serves a CONNECT to a host the sandbox's broker intercepts
// and reports true; false (nothing done) for any other. The host is
// checked under the sandbox's policy first (a refusal is answered as for
// any CONNECT); then the sandbox's TLS is terminated with a leaf of its
// CA for exactly that name (SNI must be it; ALPN h2 or http/1.1) and its
// requests are served until it closes.
func (p *Proxy) intercept(a *attachment, c net.Conn, br *bufio.Reader, req *http.Request, rec *record) bool {
	h, port, sv := splitHostPort(req.RequestURI)
	host := strings.ToLower(h)
	if sv.Reason != "" || !a.broker.intercepts(host, port) {
		return false
	}
	rec.target, rec.host, rec.port = req.RequestURI, host, port
	if !a.broker.isCanary(host) { // the self-test's canary is reached by its hook only (interceptor.dialCanary)
		ctx, cancel := context.WithTimeout(a.ctx, p.dialTimeout)
		v := p.guard.CheckHost(ctx, host, port, a.policy)
		cancel()
		if !v.Allowed {
			p.answer(c, rec, v.Reason, v.Detail)
			return true
		}
	}
	leaf, err := a.broker.minter.Leaf(host)
	if err != nil {
		p.answer(c, rec, ReasonUpstream, err.Error())
		return true
	}
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection Established\r\n\r\n"); err != nil {
		return true
	}
	rec.reason, rec.status, rec.detail = ReasonOK, http.StatusOK, "intercepted"
	var sniProblem string
	tc := tls.Server(&readerConn{Conn: c, r: br}, &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"h2", "http/1.1"},
		GetCertificate: func(hi *tls.ClientHelloInfo) (*tls.Certificate, error) {
			if ok, detail := MatchSNI(host, hi.ServerName); !ok {
				sniProblem = detail
				return nil, errors.New(detail)
			}
			return leaf, nil
		},
	})
	hctx, hcancel := context.WithTimeout(a.ctx, requestTimeout)
	err = tc.HandshakeContext(hctx)
	hcancel()
	if err != nil {
		rec.reason, rec.status, rec.detail = ReasonBadRequest, http.StatusForbidden, "TLS handshake with the sandbox: "+err.Error()
		if sniProblem != "" {
			rec.reason, rec.detail = ReasonSNI, sniProblem
		}
		return true
	}
	in := a.interceptor(p)
	var handlers sync.WaitGroup
	done := make(chan struct{})
	var once sync.Once
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			handlers.Add(1)
			defer handlers.Done()
			in.serve(w, r, host)
		}),
		ReadHeaderTimeout: requestTimeout,
		IdleTimeout:       p.idleTimeout,
		MaxHeaderBytes:    MaxHeaderBytes,
		ErrorLog:          log.New(io.Discard, "", 0),
		ConnState: func(_ net.Conn, s http.ConnState) {
			if s == http.StateClosed || s == http.StateHijacked {
				once.Do(func() { close(done) })
			}
		},
	}
	_ = srv.Serve(&oneConnListener{c: tc, done: done, stop: a.ctx.Done()})
	handlers.Wait()
	return true
}

// serve checks one request on an intercepted connection to host (its
// Host header, the methods and paths of its allow entry, the placeholders
// it carries), puts the secrets for host in place of their placeholders,
// and passes it to the real host: one log line and one count per request.
func (in *interceptor) serve(w http.ResponseWriter, r *http.Request, host string) {
	p, a := in.p, in.a
	rec := &record{sandbox: a.id, method: r.Method, target: "https://" + host + r.URL.RequestURI(), host: host,
		port: brokerPort, start: time.Now()}
	p.metrics.active.Inc()
	defer func() {
		p.metrics.active.Dec()
		p.finish(a, rec)
	}()
	if r.Host != "" && !hostIs(r.Host, host) {
		p.refuse(w, rec, ReasonHostHeader, fmt.Sprintf("Host %q on a request for %s:%d", clip(r.Host), host, brokerPort))
		return
	}
	if a.policy.HasHTTPRules() {
		if ok, detail := a.policy.CheckRequest(host, brokerPort, r.Method, r.URL.EscapedPath()); !ok {
			p.refuse(w, rec, ReasonRuleDenied, detail)
			return
		}
	}
	refused, used := a.broker.substitute(host, brokerPort, true, r.Header, r.URL.RequestURI())
	if refused != "" {
		p.secrets.With("refused").Inc()
		p.refuse(w, rec, ReasonSecretHost, fmt.Sprintf("the placeholder of secret %s sent to %s:%d, which is not among its hosts", refused, host, brokerPort))
		return
	}
	if len(used) > 0 {
		p.secrets.With("substituted").Add(float64(len(used)))
		rec.detail = "secrets " + strings.Join(used, ",")
	}
	// A body may stream both ways at once (an upstream may answer before
	// it has read the request's whole body).
	_ = http.NewResponseController(w).EnableFullDuplex()
	cw := &countingWriter{ResponseWriter: w}
	if r.Body != nil && r.Body != http.NoBody {
		cb := &countingBody{ReadCloser: r.Body}
		r.Body = cb
		defer func() { rec.up += cb.n }()
	}
	trace := &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) {
		if tc, ok := info.Conn.(*tls.Conn); ok {
			if cc, ok := tc.NetConn().(*checkedConn); ok {
				rec.address = cc.addr
			}
		}
	}}
	r = r.WithContext(httptrace.WithClientTrace(r.Context(), trace))
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host, pr.Out.Host = "https", host, host
		},
		Transport:     in.transport,
		FlushInterval: -1,
		ErrorLog:      log.New(io.Discard, "", 0),
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			var de *dialError
			switch {
			case errors.As(err, &de):
				p.refuse(w, rec, de.reason, de.detail)
			case certProblem(err) != "":
				p.refuse(w, rec, ReasonUpstreamCert, certProblem(err))
			default:
				p.refuse(w, rec, ReasonUpstream, "exchange: "+err.Error())
			}
		},
	}
	rp.ServeHTTP(cw, r)
	if rec.reason == "" {
		rec.reason, rec.status = ReasonOK, cw.status
	}
	rec.down += cw.n
}

// hostIs reports whether a Host header names host on port 443 (or no
// port).
func hostIs(header, host string) bool {
	h, port, err := splitHostDefault(header, "443")
	return err == nil && strings.EqualFold(h, host) && port == "443"
}

// refuse answers an intercepted request with the proxy's refusal for
// reason (see answer); for ReasonUpstreamCert the body says what is wrong
// with the certificate, which helps the sandbox's user and tells nothing
// of the host's.
func (p *Proxy) refuse(w http.ResponseWriter, rec *record, reason, detail string) {
	rec.reason, rec.detail = reason, detail
	wire := wireReason(reason)
	rec.status = statusFor(wire)
	if reason == ReasonUpstreamCert {
		rec.status = http.StatusBadGateway
	}
	body := fmt.Sprintf("egress %s: %s (%q)\n", verdictOf(wire), wire, clip(rec.target))
	switch wire {
	case ReasonRefused:
		body = fmt.Sprintf("egress refused (%q): not a public destination this sandbox may reach\n", clip(rec.target))
	case ReasonUpstreamCert:
		body = fmt.Sprintf("egress failed: %s (%q): %s\n", wire, clip(rec.target), detail)
	}
	w.Header().Set("X-Egress-Refused", wire)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Connection", "close")
	w.WriteHeader(rec.status)
	_, _ = io.WriteString(w, body)
}

// readerConn is a conn whose reads come from r (the bytes the proxy had
// already buffered, then the conn).
type readerConn struct {
	net.Conn
	r io.Reader
}

func (c *readerConn) Read(b []byte) (int, error) { return c.r.Read(b) }

// oneConnListener hands out one connection, then waits until it is done
// (or stop) and reports the listener closed.
type oneConnListener struct {
	c          net.Conn
	done, stop <-chan struct{}
	mu         sync.Mutex
	given      bool
}

func (l *oneConnListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	given := l.given
	l.given = true
	l.mu.Unlock()
	if !given {
		return l.c, nil
	}
	select {
	case <-l.done:
	case <-l.stop:
		_ = l.c.Close()
	}
	return nil, net.ErrClosed
}

func (l *oneConnListener) Close() error   { return nil }
func (l *oneConnListener) Addr() net.Addr { return l.c.LocalAddr() }

// countingWriter records the status and counts the body bytes of a
// response; Unwrap lets http.ResponseController flush and hijack.
type countingWriter struct {
	http.ResponseWriter
	status int
	n      int64
}

func (w *countingWriter) WriteHeader(code int) {
	if w.status == 0 && code >= 200 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *countingWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	w.n += int64(n)
	return n, err
}

func (w *countingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// countingBody counts the bytes of a request body.
type countingBody struct {
	io.ReadCloser
	n int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n += int64(n)
	return n, err
}

// UpstreamRoots returns the pool intercepted hosts' certificates are
// verified against: the host's trust store plus the PEM certificates of
// extra (an operator's own PKI, --egress-upstream-ca-file). Errors: the
// trust store could not be read, or extra holds no certificate.
func UpstreamRoots(extra []byte) (*x509.CertPool, error) {
	pool, err := x509.SystemCertPool()
	if err != nil {
		return nil, fmt.Errorf("upstream roots: %w", err)
	}
	if len(extra) > 0 && !pool.AppendCertsFromPEM(extra) {
		return nil, errors.New("upstream roots: the CA file holds no PEM certificate")
	}
	return pool, nil
}

// interceptor returns a's interceptor, made at the first call.
func (a *attachment) interceptor(p *Proxy) *interceptor {
	a.icptOnce.Do(func() { a.icpt = newInterceptor(p, a) })
	return a.icpt
}

// dropBroker closes the interceptor's idle upstream connections and drops
// the broker (its secrets' values and its CA's key) once every
// connection of the sandbox has ended.
func (a *attachment) dropBroker() {
	a.icptOnce.Do(func() {}) // no interceptor is made after this
	if a.icpt != nil {
		a.icpt.transport.CloseIdleConnections()
	}
	a.mu.Lock() // UpdateSecrets reads the broker under it
	a.broker, a.icpt = nil, nil
	a.mu.Unlock()
}
