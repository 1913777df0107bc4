package httpapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"time"

	"golang.org/x/net/http/httpguts"
)

// The exchange of one forwarded request with a sandbox's port, on one
// goroutine (the handler's) but for a request body, which is written
// beside the answer's reading: the request's head is written, the answer's
// head read (within HeaderTimeout and MaxResponseHeader), its body passed
// on as it comes, and the connection kept for the port's next request when
// both sides allow it. A protocol switch (101) hands both connections to
// two copies until either ends.

// hopHeaders are removed both ways, with every header Connection names.
var hopHeaders = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// removeHop removes the hop-by-hop headers of h.
func removeHop(h http.Header) {
	for _, f := range h["Connection"] {
		for name := range strings.SplitSeq(f, ",") {
			if name = strings.TrimSpace(name); name != "" {
				h.Del(name)
			}
		}
	}
	for _, name := range hopHeaders {
		h.Del(name)
	}
}

// upgradeType is the protocol a request or answer switches to, or "".
func upgradeType(h http.Header) string {
	if !httpguts.HeaderValuesContainsToken(h["Connection"], "Upgrade") {
		return ""
	}
	return h.Get("Upgrade")
}

// errHeadTooLarge is an answer whose head is over MaxResponseHeader.
var errHeadTooLarge = errors.New("the answer's head is over the worker's bound")

// errSwitched is a 101 that the request did not ask for.
var errSwitched = errors.New("the server switched protocols without being asked to")

// outgoing is the request that enters the sandbox for r.
func (f *portForwarder) outgoing(r *http.Request, t *portTarget) *http.Request {
	out := &http.Request{Method: r.Method, URL: &url.URL{Path: t.path, RawPath: t.rawPath, RawQuery: t.query},
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: r.Header.Clone(), Host: r.Host, ContentLength: r.ContentLength}
	if out.Host == "" {
		out.Host = fmt.Sprintf("localhost:%d", t.port)
	}
	if r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0 {
		out.Body = r.Body
	} else {
		out.ContentLength = 0
	}
	h := out.Header
	up := upgradeType(h)
	trailers := httpguts.HeaderValuesContainsToken(h["Te"], "trailers")
	removeHop(h)
	if up != "" {
		h.Set("Connection", "Upgrade")
		h.Set("Upgrade", up)
	}
	if trailers {
		h.Set("Te", "trailers")
	}
	h.Del("Expect") // the worker's server answered it for the client
	for _, name := range []string{"Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "X-Forwarded-Prefix"} {
		h.Del(name)
	}
	if ip, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		h.Set("X-Forwarded-For", ip)
	}
	h.Set("X-Forwarded-Host", r.Host)
	h.Set("X-Forwarded-Proto", t.proto)
	if t.prefix != "" {
		h.Set("X-Forwarded-Prefix", t.prefix)
	}
	if t.preview {
		stripCookie(h, previewCookieNames...)
	} else {
		h.Del("Authorization")
	}
	if _, ok := h["User-Agent"]; !ok {
		h["User-Agent"] = []string{""} // none, not Go's
	}
	return out
}

// exchange forwards r to t and passes the answer on to w. It returns the
// error to answer when nothing was written yet (nil when there is nobody
// to answer); a failure once the answer began cuts it off
// (http.ErrAbortHandler).
func (f *portForwarder) exchange(ctx context.Context, w *portWriter, r *http.Request, t *portTarget) error {
	out := f.outgoing(r, t)
	for attempt := 0; ; attempt++ {
		b, err := f.backend(ctx, t, attempt > 0)
		if err != nil {
			return f.fail(ctx, t, err)
		}
		stop := context.AfterFunc(ctx, func() { b.conn.Close() })
		resp, wrote, err := f.roundTrip(b, out)
		if err != nil {
			stop()
			b.conn.Close()
			if b.reused && attempt == 0 && idempotent(out) && retryable(err) {
				continue // the kept connection had ended: a new one
			}
			addLog(ctx, attrPortError(err))
			return f.fail(ctx, t, err)
		}
		if resp.StatusCode == http.StatusSwitchingProtocols {
			defer func() { stop(); b.conn.Close(); <-wrote }()
			return f.switchProtocols(ctx, w, t, out, resp, b)
		}
		return f.finish(ctx, w, r, t, resp, b, stop, wrote)
	}
}

// finish passes the answer on, then keeps b for the port's next exchange
// when the answer and the request both ended as HTTP/1.1 allows, or closes
// it (also when the answer is cut off).
func (f *portForwarder) finish(ctx context.Context, w *portWriter, r *http.Request, t *portTarget, resp *http.Response, b *backend, stop func() bool, wrote <-chan error) (err error) {
	whole := false
	defer func() {
		reusable := stop() && whole && !resp.Close && ctx.Err() == nil
		var werr error
		select {
		case werr = <-wrote:
		default: // answered before the request was all written: it never will be
			reusable = false
			b.conn.Close()
			werr = <-wrote
		}
		if reusable && werr == nil {
			f.keep(b)
			return
		}
		b.conn.Close()
		if err == nil && !whole && werr != nil {
			err = f.fail(ctx, t, werr)
		}
	}()
	err = f.answer(w, r, t, resp)
	if errors.Is(err, errClientGone) {
		return nil
	}
	whole = err == nil
	return err
}

// idempotent reports whether out may be sent again: a method without
// effects, and no body.
func idempotent(out *http.Request) bool {
	return out.Body == nil && (out.Method == http.MethodGet || out.Method == http.MethodHead || out.Method == http.MethodOptions)
}

// retryable reports whether err, of a kept connection, means the server
// had closed it before this request (nothing of an answer came).
func retryable(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// roundTrip writes out on b (its body beside) and reads the answer's head.
// wrote gets the writing's end (nil, or why it failed) once it ended; the
// caller must take it unless roundTrip failed.
func (f *portForwarder) roundTrip(b *backend, out *http.Request) (resp *http.Response, wrote <-chan error, err error) {
	done := make(chan error, 1)
	write := func() error {
		if err := out.Write(b.bw); err != nil {
			return err
		}
		return b.bw.Flush()
	}
	if out.Body == nil {
		if err := write(); err != nil {
			return nil, nil, err
		}
		done <- nil
	} else {
		body := &readError{ReadCloser: out.Body}
		out.Body = body
		go func() {
			err := write()
			if err != nil {
				b.conn.Close() // the answer's read ends too
				err = errWriteRequest
				if body.err != nil {
					err = body.err // the client's body failed
				}
			}
			done <- err
		}()
	}
	_ = b.conn.SetReadDeadline(time.Now().Add(f.cfg.HeaderTimeout))
	b.lr.N = f.cfg.MaxResponseHeader
	for {
		resp, err = http.ReadResponse(b.br, out)
		if err != nil || resp.StatusCode >= 200 || resp.StatusCode == http.StatusSwitchingProtocols {
			break
		}
		b.lr.N = f.cfg.MaxResponseHeader // an interim answer (100, 103): the next
	}
	headLeft := b.lr.N
	b.lr.N = math.MaxInt64
	_ = b.conn.SetReadDeadline(time.Time{})
	if err != nil {
		if out.Body != nil {
			b.conn.Close() // the writing ends too, if it has not
			if werr := <-done; werr != nil && !errors.Is(werr, errWriteRequest) {
				return nil, nil, werr // why the answer did not come
			}
		}
		if headLeft == 0 {
			return nil, nil, errHeadTooLarge
		}
		return nil, nil, err
	}
	return resp, done, nil
}

// errWriteRequest is a request body the sandbox's server did not take
// whole (it closed, or the exchange ended first).
var errWriteRequest = errors.New("the request's body could not be written to the sandbox's server")

// readError is a request body that keeps its read error (http.Request.Write
// reports the errors of reading its body and writing the request alike).
type readError struct {
	io.ReadCloser
	err error
}

func (r *readError) Read(p []byte) (int, error) {
	n, err := r.ReadCloser.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		r.err = err
	}
	return n, err
}

// answer passes resp on to w. Its errors: one to answer (nothing was
// written), or nil once the client went away; a failure of the sandbox's
// side once the answer began cuts it off (http.ErrAbortHandler).
func (f *portForwarder) answer(w *portWriter, r *http.Request, t *portTarget, resp *http.Response) error {
	defer resp.Body.Close()
	if resp.ContentLength > f.cfg.MaxResponseBody {
		return f.fail(r.Context(), t, errResponseTooLarge)
	}
	removeHop(resp.Header)
	h := w.Header()
	for k, vv := range resp.Header {
		h[k] = vv
	}
	if loc := h.Get("Location"); loc != "" && t.prefix != "" {
		h.Set("Location", prefixLocation(loc, t.prefix, r.Host))
	}
	w.WriteHeader(resp.StatusCode)
	flush := resp.ContentLength < 0 // streamed: pass each part on as it comes
	body := &boundedAnswer{ReadCloser: resp.Body, left: f.cfg.MaxResponseBody}
	buf := f.buffers.Get()
	defer f.buffers.Put(buf)
	for {
		n, rerr := body.Read(buf)
		if n > 0 {
			if _, err := w.Write(buf[:n]); err != nil {
				return errClientGone
			}
			if flush {
				_ = w.rc.Flush()
			}
		}
		if errors.Is(rerr, io.EOF) {
			break
		}
		if rerr != nil {
			addLog(r.Context(), attrPortError(rerr))
			panic(http.ErrAbortHandler) // cut off: the client must not take a part for the whole
		}
	}
	for k, vv := range resp.Trailer {
		h[http.TrailerPrefix+k] = vv
	}
	return nil
}

// errClientGone ends an exchange whose client stopped taking its answer.
var errClientGone = errors.New("the client went away")

// switchProtocols completes a protocol switch (a WebSocket): the answer's
// head to the client, then bytes both ways until either side ends, ctx
// ends, or no byte moved for IdleTimeout.
func (f *portForwarder) switchProtocols(ctx context.Context, w *portWriter, t *portTarget, out *http.Request, resp *http.Response, b *backend) error {
	defer b.conn.Close()
	want, got := upgradeType(out.Header), upgradeType(resp.Header)
	if want == "" || !strings.EqualFold(want, got) {
		return f.fail(ctx, t, errSwitched)
	}
	client, brw, err := w.Hijack()
	if err != nil {
		return fmt.Errorf("switch protocols: %w", err)
	}
	defer client.Close()
	removeHop(resp.Header)
	resp.Header.Set("Connection", "Upgrade")
	resp.Header.Set("Upgrade", got)
	if _, err := fmt.Fprintf(brw, "HTTP/1.1 101 %s\r\n", http.StatusText(http.StatusSwitchingProtocols)); err != nil {
		return nil
	}
	if err := resp.Header.Write(brw); err != nil {
		return nil
	}
	if _, err := brw.WriteString("\r\n"); err != nil || brw.Flush() != nil {
		return nil
	}
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(b.conn, brw.Reader); done <- struct{}{} }()
	go func() { _, _ = io.Copy(client, b.br); done <- struct{}{} }()
	select {
	case <-done:
	case <-ctx.Done():
	}
	client.Close()
	b.conn.Close()
	<-done
	<-done
	addLog(ctx, attrSwitched(got))
	return nil
}
