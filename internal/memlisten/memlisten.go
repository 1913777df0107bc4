// Package memlisten is a net.Listener whose connections are in-memory
// pipes: a server in this process is reached by a client in this process
// without a socket (the worker's MCP endpoint reaches its own API so).
package memlisten

import (
	"context"
	"errors"
	"net"
	"sync"
)

// Listener hands out the server ends of the pipes Dial makes. Make it with
// New; it is safe for concurrent use.
type Listener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

// New returns an open Listener.
func New() *Listener {
	return &Listener{conns: make(chan net.Conn), done: make(chan struct{})}
}

var _ net.Listener = (*Listener)(nil)

// Accept waits for the next Dial; net.ErrClosed once the listener is closed.
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close stops Accept and every later Dial; connections made stay open.
func (l *Listener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

// Addr is a name for the listener ("mem").
func (l *Listener) Addr() net.Addr { return addr{} }

// DialContext returns the client end of a new pipe once Accept took the
// other (network and address are ignored: there is one server). It fails
// with net.ErrClosed once the listener is closed, or with ctx's error.
func (l *Listener) DialContext(ctx context.Context, _, _ string) (net.Conn, error) {
	client, server := net.Pipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-l.done:
	case <-ctx.Done():
		client.Close()
		server.Close()
		return nil, ctx.Err()
	}
	client.Close()
	server.Close()
	return nil, errors.Join(net.ErrClosed, errors.New("memlisten: the listener is closed"))
}

type addr struct{}

func (addr) Network() string { return "mem" }
func (addr) String() string  { return "mem" }
