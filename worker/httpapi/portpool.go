package httpapi

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"time"
)

// The connections to the sandboxes' ports: each counted from its dial
// until the init let go of the sandbox's end, within MaxConns per sandbox,
// and kept between exchanges, a few per port.

// backend is a connection to one port of one sandbox, kept alive between
// exchanges.
type backend struct {
	key, id string // key: "ID PORT"
	conn    *portConn
	lr      *io.LimitedReader // bounds an answer's head
	br      *bufio.Reader
	bw      *bufio.Writer
	reused  bool // it served an exchange before
}

// Sizes of a backend's buffers, and how many idle backends one port keeps.
const (
	backendBuffer  = 64 << 10
	maxIdlePerPort = 8
	// poolIdle closes a kept connection nobody used for that long.
	poolIdle = 90 * time.Second
)

// errTooManyConns is a dial of a sandbox that has MaxConns connections
// open, none of them idle, for slotWait.
var errTooManyConns = errors.New("the sandbox has as many connections to its ports as the worker allows")

// slotWait bounds a dial's wait for one of its sandbox's connections to
// end.
const slotWait = 5 * time.Second

// takeConn counts a new connection of sandbox id, within MaxConns: at the
// bound, it closes id's kept connections and waits for one of its
// connections to end. Connections are counted from their dial until the
// init let go of the sandbox's end (see portConn), so the sandbox never
// sees more than MaxConns of them.
func (f *portForwarder) takeConn(ctx context.Context, id string) error {
	timer := time.NewTimer(slotWait)
	defer timer.Stop()
	for closed := false; ; closed = true {
		f.mu.Lock()
		if f.open[id] < f.cfg.MaxConns {
			f.open[id]++
			f.mu.Unlock()
			return nil
		}
		ended := f.ended
		f.mu.Unlock()
		if !closed {
			f.closeIdle(id)
		}
		select {
		case <-ended:
		case <-ctx.Done():
			return errTooManyConns
		case <-timer.C:
			return errTooManyConns
		}
	}
}

// giveConn counts the end of a connection of sandbox id.
func (f *portForwarder) giveConn(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.open[id]--; f.open[id] <= 0 {
		delete(f.open, id)
	}
	close(f.ended)
	f.ended = make(chan struct{})
}

// backend returns a kept connection to t's port (unless fresh), or a new
// one.
func (f *portForwarder) backend(ctx context.Context, t *portTarget, fresh bool) (*backend, error) {
	key := fmt.Sprintf("%s %d", t.id, t.port)
	f.mu.Lock()
	for kept := f.idle[key]; len(kept) > 0 && !fresh; kept = f.idle[key] {
		b := kept[len(kept)-1]
		f.dropIdleLocked(b)
		if !b.conn.closed.Load() {
			f.mu.Unlock()
			b.conn.setIdle(f.cfg.IdleTimeout)
			b.reused = true
			return b, nil
		}
	}
	f.mu.Unlock()
	if err := f.takeConn(ctx, t.id); err != nil {
		return nil, err
	}
	c, err := f.rt.DialPort(ctx, t.id, t.port)
	if err != nil {
		f.giveConn(t.id)
		return nil, err
	}
	b := &backend{key: key, id: t.id}
	b.conn = newPortConn(c, f.cfg.IdleTimeout, func() {
		f.mu.Lock()
		f.dropIdleLocked(b)
		f.mu.Unlock()
		f.giveConn(t.id)
	})
	b.lr = &io.LimitedReader{R: b.conn, N: math.MaxInt64}
	b.br = bufio.NewReaderSize(b.lr, backendBuffer)
	b.bw = bufio.NewWriterSize(b.conn, 4<<10)
	return b, nil
}

// keep keeps b for its port's next exchange (or closes it, past
// maxIdlePerPort).
func (f *portForwarder) keep(b *backend) {
	f.mu.Lock()
	if len(f.idle[b.key]) >= maxIdlePerPort {
		f.mu.Unlock()
		b.conn.Close()
		return
	}
	f.idle[b.key] = append(f.idle[b.key], b)
	f.mu.Unlock()
	b.conn.setIdle(poolIdle)
}

// dropIdleLocked removes b from the kept connections (f.mu held).
func (f *portForwarder) dropIdleLocked(b *backend) {
	kept := f.idle[b.key]
	for i, k := range kept {
		if k == b {
			kept = append(kept[:i], kept[i+1:]...)
			break
		}
	}
	if len(kept) == 0 {
		delete(f.idle, b.key)
	} else {
		f.idle[b.key] = kept
	}
}

// closeIdle closes the kept connections of sandbox id.
func (f *portForwarder) closeIdle(id string) {
	f.mu.Lock()
	var kept []*backend
	for key, bs := range f.idle {
		if strings.HasPrefix(key, id+" ") {
			kept = append(kept, bs...)
		}
	}
	f.mu.Unlock()
	for _, b := range kept {
		b.conn.Close()
	}
}
