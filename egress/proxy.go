package egress

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"openvibe.network/agentsandbox/sandbox"
)

// Defaults of ProxyConfig.
const (
	DefaultMaxConns    = 64
	DefaultIdleTimeout = 2 * time.Minute
	DefaultDialTimeout = 10 * time.Second
)

// ErrClosed is returned by Attach once the Proxy is closed.
var ErrClosed = errors.New("egress: proxy is closed")

// ProxyConfig configures a Proxy. Guard is required.
type ProxyConfig struct {
	// Guard decides every destination.
	Guard *Guard
	// TestDial, when set, replaces the guarded dialer (Guard.Dial, whose
	// net.Dialer.Control re-checks each socket at connect time). It exists
	// for tests only, to map a "public" address to a loopback server: it is
	// the one way around the connect-time check. The guard's verdict is still
	// applied first, so TestDial is only ever given checked public addresses.
	TestDial DialFunc
	// Logger gets one line per connection (default: discard).
	Logger *slog.Logger
	// Registerer gets the metrics (nil: a private registry).
	Registerer prometheus.Registerer
	// MaxConns bounds the concurrent connections of one sandbox (default
	// DefaultMaxConns); more are answered 429.
	MaxConns int
	// IdleTimeout ends a connection with no traffic either way for this long
	// (default DefaultIdleTimeout).
	IdleTimeout time.Duration
	// DialTimeout bounds the resolution and the dial of one destination
	// (default DefaultDialTimeout); a dial that runs out is answered 504.
	DialTimeout time.Duration
}

// Proxy is the egress proxy: HTTP absolute-form and CONNECT, served on one
// unix socket per attached sandbox. It is safe for concurrent use.
type Proxy struct {
	guard       *Guard
	dial        DialFunc
	log         *slog.Logger
	metrics     *metrics
	maxConns    int
	idleTimeout time.Duration
	dialTimeout time.Duration

	mu       sync.Mutex
	closed   bool
	attached map[*attachment]struct{}
}

var _ sandbox.EgressAttacher = (*Proxy)(nil)

// NewProxy returns a Proxy for cfg. Errors: a nil Guard, or metrics that
// cannot be registered (already registered on cfg.Registerer).
func NewProxy(cfg ProxyConfig) (*Proxy, error) {
	if cfg.Guard == nil {
		return nil, errors.New("new proxy: no guard")
	}
	p := &Proxy{
		guard:       cfg.Guard,
		dial:        cfg.TestDial,
		log:         cfg.Logger,
		maxConns:    cfg.MaxConns,
		idleTimeout: cfg.IdleTimeout,
		dialTimeout: cfg.DialTimeout,
		attached:    map[*attachment]struct{}{},
	}
	if p.dial == nil {
		p.dial = cfg.Guard.Dial
	}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	if p.maxConns <= 0 {
		p.maxConns = DefaultMaxConns
	}
	if p.idleTimeout <= 0 {
		p.idleTimeout = DefaultIdleTimeout
	}
	if p.dialTimeout <= 0 {
		p.dialTimeout = DefaultDialTimeout
	}
	reg := cfg.Registerer
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("new proxy: %w", err)
	}
	p.metrics = m
	return p, nil
}

// attachment is one sandbox's socket and its live connections.
type attachment struct {
	id     string
	ln     *net.UnixListener
	sem    chan struct{}
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once

	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

// Attach serves the proxy for sandbox id on a new unix socket at socketPath,
// owned by uid with mode 0600 (the parent directory should not be writable
// by others). A stale socket at socketPath is replaced. ctx bounds only the
// setup; the socket lives until detach (idempotent), which closes the
// listener and every connection of the sandbox and removes the socket.
// Errors: ErrClosed, a listen, chown or chmod failure.
func (p *Proxy) Attach(ctx context.Context, id, socketPath string, uid int) (func(), error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("attach %s: %w", id, err)
	}
	if fi, err := os.Lstat(socketPath); err == nil && fi.Mode()&os.ModeSocket != 0 {
		_ = os.Remove(socketPath)
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: socketPath, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("attach %s: %w", id, err)
	}
	ln.SetUnlinkOnClose(true)
	// Attach runs before the sandbox starts, but never follow a symlink put
	// in the socket's place anyway: change only the socket just made.
	if fi, err := os.Lstat(socketPath); err != nil || fi.Mode()&os.ModeSocket == 0 {
		_ = ln.Close()
		return nil, fmt.Errorf("attach %s: %s is no longer the proxy's socket", id, socketPath)
	}
	if err := os.Chmod(socketPath, 0o600); err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("attach %s: %w", id, err)
	}
	if err := os.Lchown(socketPath, uid, -1); err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("attach %s: %w", id, err)
	}
	a := &attachment{id: id, ln: ln, sem: make(chan struct{}, p.maxConns), conns: map[net.Conn]struct{}{}}
	a.ctx, a.cancel = context.WithCancel(context.Background())
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		_ = ln.Close()
		return nil, ErrClosed
	}
	p.attached[a] = struct{}{}
	p.mu.Unlock()
	p.metrics.attached.Inc()
	a.wg.Add(1)
	go p.accept(a)
	return func() { p.detach(a) }, nil
}

func (p *Proxy) accept(a *attachment) {
	defer a.wg.Done()
	for {
		c, err := a.ln.Accept()
		if a.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
			if c != nil {
				_ = c.Close()
			}
			return
		}
		if err != nil {
			p.log.Error("egress accept", "sandbox", a.id, "err", err)
			time.Sleep(acceptPause)
			continue
		}
		if !a.track(c) {
			_ = c.Close()
			return
		}
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			defer a.untrack(c)
			p.serve(a, c)
		}()
	}
}

// track registers a live connection so that detach can close it; false
// once the attachment is detached.
func (a *attachment) track(c net.Conn) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.ctx.Err() != nil {
		return false
	}
	a.conns[c] = struct{}{}
	return true
}

func (a *attachment) untrack(c net.Conn) {
	a.mu.Lock()
	delete(a.conns, c)
	a.mu.Unlock()
	_ = c.Close()
}

func (p *Proxy) detach(a *attachment) {
	a.once.Do(func() {
		a.mu.Lock()
		a.cancel()
		for c := range a.conns {
			_ = c.Close()
		}
		a.mu.Unlock()
		_ = a.ln.Close()
		a.wg.Wait()
		p.mu.Lock()
		delete(p.attached, a)
		p.mu.Unlock()
		p.metrics.attached.Dec()
	})
}

// Close detaches every sandbox and refuses later Attach calls. It always
// returns nil.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	as := make([]*attachment, 0, len(p.attached))
	for a := range p.attached {
		as = append(as, a)
	}
	p.mu.Unlock()
	for _, a := range as {
		p.detach(a)
	}
	return nil
}
