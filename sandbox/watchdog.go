package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"openvibe.network/agentsandbox/sandbox/control"
)

// DefaultControlTimeout is Config.ControlTimeout's default.
const DefaultControlTimeout = 10 * time.Second

// The control calls' deadline. A call to a sandbox's init that hears
// nothing from it for a ControlTimeout asks the init, on a connection of
// its own, whether it still answers (a ping). One that does not answer
// within a ControlTimeout either is stalled (stopped, out of descriptors,
// wedged): the sandbox is marked broken, every call waiting on its init
// fails with ErrBroken at once, and every later one without trying. Only
// Delete (or the time box) ends a broken sandbox; its wipe does not need
// the init. A call that waits on a command (an exec without output, a
// follow) goes on as long as the init answers its pings.

// markBroken marks b broken for why (the first reason is kept) and logs it
// once.
func (r *Runtime) markBroken(b *sandboxState, why string) {
	b.mu.Lock()
	first := b.broken == ""
	if first {
		b.broken = why
	}
	b.mu.Unlock()
	if first {
		r.log.Warn("sandbox broken: its init does not answer; it takes no more calls until deleted", "sandbox", b.id, "why", why)
	}
}

// brokenErr returns ErrBroken (with why) when b is marked broken, else nil.
func (b *sandboxState) brokenErr() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.broken == "" {
		return nil
	}
	return fmt.Errorf("sandbox %s: %s: %w", b.id, b.broken, ErrBroken)
}

// stalled reports whether b's init fails to answer a ping within the
// control timeout: connecting to it, sending the ping or reading its answer
// takes longer. An init that is gone (the sandbox ended) is not stalled: the
// caller's own error says what happened.
func (r *Runtime) stalled(b *sandboxState) bool {
	ctx, cancel := context.WithTimeout(context.Background(), r.cfg.ControlTimeout)
	defer cancel()
	c, err := r.dialInit(ctx, b)
	if err != nil {
		return ctx.Err() != nil
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	if err := control.NewWriter(c).JSON(control.FrameRequest, control.Request{Op: control.OpPing}); err != nil {
		return ctx.Err() != nil
	}
	if _, err := readReply(c, nil); err != nil {
		return ctx.Err() != nil
	}
	return false
}

// watchedConn is a control connection under the watchdog (see
// Runtime.watch): reads mark it alive; once the watchdog found the init
// stalled, it is closed and its errors are ErrBroken.
type watchedConn struct {
	net.Conn
	heard  atomic.Bool // something was read since the watchdog last looked
	broken atomic.Bool
	once   sync.Once
	closed chan struct{}
}

func (c *watchedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.heard.Store(true)
	}
	return n, c.wrap(err)
}

func (c *watchedConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	return n, c.wrap(err)
}

func (c *watchedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { close(c.closed) })
	return err
}

// wrap makes err an ErrBroken once the watchdog closed the connection.
func (c *watchedConn) wrap(err error) error {
	if err != nil && c.broken.Load() {
		return fmt.Errorf("%w: %w", ErrBroken, err)
	}
	return err
}

// watchConn puts c, a connection to b's init, under the watchdog until it is
// closed: after each control timeout in which nothing was read from it, the
// init is pinged; when it is stalled, b is marked broken and c closed.
func (r *Runtime) watchConn(b *sandboxState, c net.Conn) *watchedConn {
	wc := &watchedConn{Conn: c, closed: make(chan struct{})}
	go func() {
		t := time.NewTicker(r.cfg.ControlTimeout)
		defer t.Stop()
		for {
			select {
			case <-wc.closed:
				return
			case <-b.exited:
				return
			case <-t.C:
			}
			if wc.heard.Swap(false) {
				continue
			}
			if b.brokenErr() == nil && !r.stalled(b) {
				continue
			}
			r.markBroken(b, fmt.Sprintf("its init did not answer within %v", r.cfg.ControlTimeout))
			wc.broken.Store(true)
			wc.Close()
			return
		}
	}()
	return wc
}

// unixConnOf returns the unix socket under c (a watched connection's own),
// for what needs its descriptor passing; reads on it are not heard by the
// watchdog, which then pings the init, and its errors are not ErrBroken
// (ask the sandbox's brokenErr).
func unixConnOf(c net.Conn) (*net.UnixConn, bool) {
	if wc, ok := c.(*watchedConn); ok {
		c = wc.Conn
	}
	uc, ok := c.(*net.UnixConn)
	return uc, ok
}

// isBroken reports whether err says the sandbox is broken.
func isBroken(err error) bool { return errors.Is(err, ErrBroken) }
