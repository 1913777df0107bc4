package egress

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// DefaultHostRefresh is how often HostAddrs re-reads its sources even when
// no netlink notification came.
const DefaultHostRefresh = 5 * time.Second

// HostAddrsConfig configures NewHostAddrs.
type HostAddrsConfig struct {
	// Interfaces lists the host's interface addresses (default
	// InterfacePrefixes); tests inject prefixes.
	Interfaces func() ([]netip.Prefix, error)
	// Extra, when set, adds addresses of the worker's own (the Live URLs it
	// checks in with) at every refresh; it must return quickly (cache what
	// it resolves).
	Extra func(ctx context.Context) []netip.Prefix
	// Static are the host's own addresses that are on no interface, which
	// the operator names (--egress-host-address): e.g. the public address
	// a cloud maps 1:1 to the host's private one.
	Static []netip.Prefix
	// InstanceData, when set, is the path of cloud-init's instance data
	// (production passes DefaultInstanceData): the public addresses it
	// names are the host's too (see InstanceDataAddrs). It is read again
	// when it changes; no metadata service is ever asked.
	InstanceData string
	// Every is the re-read interval (default DefaultHostRefresh).
	Every time.Duration
	// Netlink subscribes to the kernel's address changes, so that a new
	// address is refused as soon as it is configured, not at the next
	// re-read. Off in tests that inject Interfaces.
	Netlink bool
	// Logger gets a line when a refresh fails or the set changes (default:
	// discard).
	Logger *slog.Logger
}

// HostAddrs is the set of the host's own addresses that the guard refuses
// (ReasonHostSelf): every address of every interface, re-read every few
// seconds and at each netlink notification of an address change, plus the
// configured extras, the operator's static addresses and the public
// addresses cloud-init's instance data names. A refresh that fails keeps the last set (an address
// that went away stays refused a little longer). Its methods are safe for concurrent use; a nil *HostAddrs holds nothing.
type HostAddrs struct {
	cfg  HostAddrsConfig
	data *instanceData // nil without InstanceData
	cur  atomic.Pointer[[]netip.Prefix]
	stop context.CancelFunc
	wg   sync.WaitGroup
	once sync.Once
	nl   *os.File
}

// NewHostAddrs reads the host's addresses once and keeps them fresh until
// Close. Errors: the first read failed.
func NewHostAddrs(cfg HostAddrsConfig) (*HostAddrs, error) {
	if cfg.Interfaces == nil {
		cfg.Interfaces = InterfacePrefixes
	}
	if cfg.Every <= 0 {
		cfg.Every = DefaultHostRefresh
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	h := &HostAddrs{cfg: cfg}
	if cfg.InstanceData != "" {
		h.data = &instanceData{path: cfg.InstanceData}
	}
	ctx, cancel := context.WithCancel(context.Background())
	h.stop = cancel
	if err := h.Refresh(ctx); err != nil {
		cancel()
		return nil, fmt.Errorf("host addresses: %w", err)
	}
	changed := make(chan struct{}, 1)
	if cfg.Netlink {
		nl, err := subscribeAddrs()
		if err != nil {
			cfg.Logger.Warn("no netlink subscription to address changes; re-reading every interval only", "err", err)
		} else {
			h.nl = nl
			h.wg.Go(func() { readNotifications(nl, changed) })
		}
	}
	h.wg.Go(func() { h.run(ctx, changed) })
	return h, nil
}

// run refreshes at every notification and every interval until ctx ends.
func (h *HostAddrs) run(ctx context.Context, changed <-chan struct{}) {
	t := time.NewTicker(h.cfg.Every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-changed:
		}
		if err := h.Refresh(ctx); err != nil {
			h.cfg.Logger.Warn("host addresses: refresh failed; keeping the last set", "err", err)
		}
	}
}

// Refresh re-reads the sources now. Errors: the interfaces could not be
// listed (the last set is kept). Instance data that cannot be read is
// logged, and its last addresses kept.
func (h *HostAddrs) Refresh(ctx context.Context) error {
	ps, err := h.cfg.Interfaces()
	if err != nil {
		return err
	}
	if h.cfg.Extra != nil {
		ps = append(ps, h.cfg.Extra(ctx)...)
	}
	ps = append(ps, h.cfg.Static...)
	if h.data != nil {
		cloud, err := h.data.prefixes()
		if err != nil {
			h.cfg.Logger.Warn("host addresses: cloud-init's instance data unreadable; keeping its last addresses", "err", err)
		}
		ps = append(ps, cloud...)
	}
	ps = slices.DeleteFunc(ps, func(p netip.Prefix) bool { return !p.IsValid() })
	for i, p := range ps {
		ps[i] = unmapPrefix(p)
	}
	slices.SortFunc(ps, func(a, b netip.Prefix) int { return a.Addr().Compare(b.Addr()) })
	ps = slices.Compact(ps)
	if old := h.cur.Load(); old == nil || !slices.Equal(*old, ps) {
		h.cfg.Logger.Info("host addresses refused by the egress guard", "addresses", len(ps))
	}
	h.cur.Store(&ps)
	return nil
}

// unmapPrefix turns an IPv4-mapped prefix into the IPv4 one it covers.
func unmapPrefix(p netip.Prefix) netip.Prefix {
	if p.Addr().Is4In6() && p.Bits() >= 96 {
		p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
	}
	return p.Masked()
}

// Contains reports whether a is one of the host's addresses.
func (h *HostAddrs) Contains(a netip.Addr) bool {
	if h == nil {
		return false
	}
	ps := h.cur.Load()
	if ps == nil {
		return false
	}
	for _, p := range *ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// Prefixes returns the current set. The slice is the caller's own.
func (h *HostAddrs) Prefixes() []netip.Prefix {
	if h == nil || h.cur.Load() == nil {
		return nil
	}
	return slices.Clone(*h.cur.Load())
}

// Close stops the refreshes. It is idempotent and always returns nil.
func (h *HostAddrs) Close() error {
	if h == nil {
		return nil
	}
	h.once.Do(func() {
		h.stop()
		if h.nl != nil {
			_ = h.nl.Close()
		}
		h.wg.Wait()
	})
	return nil
}

// subscribeAddrs opens a netlink socket that receives the kernel's IPv4
// and IPv6 address notifications (nothing is sent on it).
func subscribeAddrs() (*os.File, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("netlink socket: %w", err)
	}
	sa := &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: unix.RTMGRP_IPV4_IFADDR | unix.RTMGRP_IPV6_IFADDR}
	if err := unix.Bind(fd, sa); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("netlink bind: %w", err)
	}
	return os.NewFile(uintptr(fd), "netlink-route"), nil
}

// readNotifications signals changed (without blocking) at each message,
// until f is closed.
func readNotifications(f *os.File, changed chan<- struct{}) {
	buf := make([]byte, 64<<10)
	for {
		_, err := f.Read(buf)
		if errors.Is(err, os.ErrClosed) {
			return
		}
		if err != nil && !errors.Is(err, unix.ENOBUFS) { // ENOBUFS: missed some; re-read anyway
			time.Sleep(acceptPause)
		}
		select {
		case changed <- struct{}{}:
		default:
		}
	}
}

// InterfacePrefixes returns every address of this machine's interfaces as a
// single-address prefix. Errors: the interface addresses cannot be listed.
func InterfacePrefixes() ([]netip.Prefix, error) {
	as, err := net.InterfaceAddrs()
	if err != nil {
		return nil, fmt.Errorf("interface addresses: %w", err)
	}
	var out []netip.Prefix
	for _, a := range as {
		ipn, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		if addr, ok := netip.AddrFromSlice(ipn.IP); ok {
			addr = addr.Unmap()
			out = append(out, netip.PrefixFrom(addr, addr.BitLen()))
		}
	}
	return out, nil
}
