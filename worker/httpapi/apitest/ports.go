package apitest

import (
	"context"
	"fmt"
	"net"
	"strconv"

	"openvibe.network/agentsandbox/sandbox"
)

// ServePort makes the fake's port of sandbox id reach addr, a server of the
// test's own on loopback (the real runtime reaches a server inside the
// sandbox).
func (f *Fake) ServePort(id string, port int, addr string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ports == nil {
		f.ports = map[string]string{}
	}
	f.ports[id+" "+strconv.Itoa(port)] = addr
}

// DialPort connects to the address ServePort gave port of sandbox id.
// Errors: sandbox.ErrNotFound, sandbox.ErrInvalid, sandbox.ErrPortClosed.
func (f *Fake) DialPort(ctx context.Context, id string, port int) (net.Conn, error) {
	if port < 1 || port > 65535 {
		return nil, fmt.Errorf("port %d: %w", port, sandbox.ErrInvalid)
	}
	if _, err := f.get(id); err != nil {
		return nil, err
	}
	f.mu.Lock()
	addr, ok := f.ports[id+" "+strconv.Itoa(port)]
	f.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("nothing listens on port %d: %w", port, sandbox.ErrPortClosed)
	}
	var d net.Dialer
	return d.DialContext(ctx, "tcp", addr)
}
