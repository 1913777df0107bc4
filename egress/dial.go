package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"syscall"
	"time"
)

// DialFunc connects to one address that the guard has checked.
type DialFunc func(ctx context.Context, addr netip.AddrPort) (net.Conn, error)

// ErrRefusedAtDial is returned (wrapped) by Control, and so by Dial, when the
// socket's destination is not an allowed public address.
var ErrRefusedAtDial = errors.New("egress: destination refused at connect time")

// Control is a net.Dialer.Control that re-checks the destination of every
// socket at connect time, whatever path reached it: it returns an error
// wrapping ErrRefusedAtDial unless the address is public, not the proxy's own,
// and its port allowed.
func (g *Guard) Control(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: %s %q: %v", ErrRefusedAtDial, network, address, err)
	}
	if !slices.Contains(g.ports, ap.Port()) {
		return fmt.Errorf("%w: %s port %d", ErrRefusedAtDial, network, ap.Port())
	}
	// A mapped address on a tcp6 socket is IPv4 traffic to the embedded address.
	if v := g.CheckAddr(ap.Addr().Unmap()); !v.Allowed {
		return fmt.Errorf("%w: %s %s", ErrRefusedAtDial, v.Reason, v.Detail)
	}
	return nil
}

// Dial connects to addr with a net.Dialer whose Control is g.Control. It
// never resolves. Errors: ErrRefusedAtDial (wrapped) for a refused address,
// or the dial error.
func (g *Guard) Dial(ctx context.Context, addr netip.AddrPort) (net.Conn, error) {
	d := net.Dialer{Control: g.Control, KeepAlive: 30 * time.Second}
	network := "tcp4"
	if addr.Addr().Is6() {
		network = "tcp6"
	}
	c, err := d.DialContext(ctx, network, addr.String())
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	return c, nil
}

// dialVerdict connects to the addresses of an allowed verdict, in order,
// through dial, re-checking each with the guard first so that dial (even an
// injected one) never sees an address the guard refuses. It returns the
// address it connected to.
func (g *Guard) dialVerdict(ctx context.Context, v Verdict, dial DialFunc) (net.Conn, netip.AddrPort, error) {
	if !v.Allowed || len(v.Addresses) == 0 {
		return nil, netip.AddrPort{}, fmt.Errorf("%w: verdict %s", ErrRefusedAtDial, v.Reason)
	}
	var errs []error
	for _, a := range v.Addresses {
		ap := netip.AddrPortFrom(a, v.Port)
		if cv := g.CheckAddr(a); !cv.Allowed || !slices.Contains(g.ports, v.Port) {
			return nil, ap, fmt.Errorf("%w: %s", ErrRefusedAtDial, ap)
		}
		c, err := dial(ctx, ap)
		if err == nil {
			return c, ap, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, netip.AddrPort{}, errors.Join(errs...)
}
