package httpapi

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// portConn is a connection to a sandbox's port. It closes itself once no
// byte moved either way for idle (its reads and writes then fail with
// errIdle). Its Close returns at once, but the connection's slot (gone,
// called once) is given back only when the init has let go of the
// sandbox's end: Close ends the writing, reads what is left until the
// init's end (or closeWait), then closes. So the sandbox never holds more
// connections from the worker than the worker counts.
type portConn struct {
	net.Conn
	idle   atomic.Int64 // the idle bound (a time.Duration)
	start  time.Time    // the origin of last (monotonic)
	last   atomic.Int64 // when a byte last moved, after start
	timer  *time.Timer
	idled  atomic.Bool // closed for being idle
	closed atomic.Bool
	gone   func()
}

// closeWait bounds how long a closed connection waits for the init's end.
const closeWait = 5 * time.Second

// newPortConn watches c for idle; gone is called once c ended.
func newPortConn(c net.Conn, idle time.Duration, gone func()) *portConn {
	pc := &portConn{Conn: c, start: time.Now(), gone: gone}
	pc.idle.Store(int64(idle))
	pc.timer = time.AfterFunc(idle, pc.check)
	return pc
}

// setIdle changes the idle bound (counted from when a byte last moved).
func (c *portConn) setIdle(idle time.Duration) {
	c.idle.Store(int64(idle))
	c.moved()
	if !c.closed.Load() {
		c.timer.Reset(idle)
	}
}

// check closes the connection when it has been idle long enough, else
// looks again when it would have.
func (c *portConn) check() {
	idle := time.Duration(c.idle.Load())
	since := time.Since(c.start) - time.Duration(c.last.Load())
	if since >= idle {
		c.idled.Store(true)
		c.Close()
		return
	}
	if !c.closed.Load() {
		c.timer.Reset(idle - since)
	}
}

// moved notes that bytes moved now.
func (c *portConn) moved() { c.last.Store(int64(time.Since(c.start))) }

func (c *portConn) Read(p []byte) (int, error) {
	if c.closed.Load() {
		return 0, c.closedErr()
	}
	n, err := c.Conn.Read(p)
	if c.closed.Load() { // what comes after Close is not the caller's
		return 0, c.closedErr()
	}
	if n > 0 {
		c.moved()
	}
	return n, err
}

func (c *portConn) Write(p []byte) (int, error) {
	if c.closed.Load() {
		return 0, c.closedErr()
	}
	n, err := c.Conn.Write(p)
	if err != nil && c.closed.Load() {
		return n, c.closedErr()
	}
	if n > 0 {
		c.moved()
	}
	return n, err
}

// closedErr is the error of a read or write after Close.
func (c *portConn) closedErr() error {
	if c.idled.Load() {
		return errIdle
	}
	return net.ErrClosed
}

// Close ends the connection: reads and writes fail from now on; its end
// is waited for in the background (see portConn).
func (c *portConn) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	c.timer.Stop()
	cw, ok := c.Conn.(interface{ CloseWrite() error })
	if !ok || cw.CloseWrite() != nil {
		err := c.Conn.Close()
		c.gone()
		return err
	}
	go func() {
		_ = c.Conn.SetReadDeadline(time.Now().Add(closeWait))
		_, _ = io.Copy(io.Discard, c.Conn)
		c.Conn.Close()
		c.gone()
	}()
	return nil
}

// idleError is errIdle's type: a timeout, as net.Error says.
type idleError struct{}

func (idleError) Error() string   { return "no byte moved either way for the idle timeout" }
func (idleError) Timeout() bool   { return true }
func (idleError) Temporary() bool { return false }

// errIdle fails the reads and writes of a portConn closed for being idle.
var errIdle net.Error = idleError{}

// portWriter is the response writer of a forwarded request: each write to
// the client must be taken within timeout, and so must each write to a
// connection taken over by a protocol switch (WebSocket).
type portWriter struct {
	http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	set     bool // a deadline was set (done clears it)
}

func newPortWriter(w http.ResponseWriter, timeout time.Duration) *portWriter {
	return &portWriter{ResponseWriter: w, rc: http.NewResponseController(w), timeout: timeout}
}

func (w *portWriter) Write(p []byte) (int, error) {
	w.set = w.rc.SetWriteDeadline(time.Now().Add(w.timeout)) == nil || w.set
	return w.ResponseWriter.Write(p)
}

// done clears the write deadline, so that the connection's next request
// (keep-alive) does not inherit it.
func (w *portWriter) done() {
	if w.set {
		_ = w.rc.SetWriteDeadline(time.Time{})
	}
}

// Hijack hands over the client's connection, its writes bounded.
func (w *portWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, brw, err := w.rc.Hijack()
	if err != nil {
		return nil, nil, err
	}
	w.set = false // the connection is no longer the server's
	return &writeBoundConn{Conn: c, timeout: w.timeout}, brw, nil
}

// Unwrap lets http.ResponseController reach the connection (flushes).
func (w *portWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// writeBoundConn is a client's connection after a protocol switch: each
// write must be taken within timeout. It has no CloseWrite: the proxy ends
// both ways once either side ends.
type writeBoundConn struct {
	net.Conn
	timeout time.Duration
}

func (c *writeBoundConn) Write(p []byte) (int, error) {
	_ = c.SetWriteDeadline(time.Now().Add(c.timeout))
	return c.Conn.Write(p)
}

// bufferPool lends the proxies their copy buffers.
type bufferPool struct{ p sync.Pool }

// portBuffer is the size of a copy buffer.
const portBuffer = 64 << 10

func (b *bufferPool) Get() []byte {
	if v, ok := b.p.Get().(*[]byte); ok {
		return *v
	}
	return make([]byte, portBuffer)
}

func (b *bufferPool) Put(p []byte) {
	if cap(p) == portBuffer {
		p = p[:portBuffer]
		b.p.Put(&p)
	}
}
