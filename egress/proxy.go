package egress

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"

	"openvibe.network/agentsandbox"
	"openvibe.network/agentsandbox/egress/policy"
	"openvibe.network/agentsandbox/internal/metrics"
	"openvibe.network/agentsandbox/internal/unixsock"
)

// Defaults of ProxyConfig.
const (
	DefaultMaxConns    = 64
	DefaultIdleTimeout = 2 * time.Minute
	DefaultDialTimeout = 10 * time.Second
)

// acceptPause is how long the accept loop waits after a failed accept.
const acceptPause = 50 * time.Millisecond

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
	// Metrics gets the proxy's metric families (nil: a private registry).
	// One registry takes one proxy's families.
	Metrics *metrics.Registry
	// MaxConns bounds the concurrent connections of one sandbox (default
	// DefaultMaxConns): more wait in a queue of that length, and past it
	// the sandbox's connects fail at once (its bridge answers 429).
	MaxConns int
	// Now is the clock of the log limiter (default time.Now).
	Now func() time.Time
	// IdleTimeout ends a connection with no traffic either way for this long
	// (default DefaultIdleTimeout).
	IdleTimeout time.Duration
	// DialTimeout bounds the resolution and the dial of one destination
	// (default DefaultDialTimeout); a dial that runs out is answered 504.
	DialTimeout time.Duration
	// UpstreamRoots verify the certificates of the hosts the credential
	// broker intercepts (see UpstreamRoots; nil: the host's trust store).
	UpstreamRoots *x509.CertPool
	// MaxPolicyEntries bounds the allow and deny entries of one sandbox's
	// policy (default policy.DefaultMaxEntries).
	MaxPolicyEntries int
}

// AttachOptions are the settings of one sandbox's attachment: its Policy
// (the zero value: public mode; mode none is refused, since a sandbox
// without egress is not attached at all).
type AttachOptions = agentsandbox.EgressAttachOptions

// Proxy is the egress proxy: HTTP absolute-form and CONNECT, served on one
// unix socket per attached sandbox. It is safe for concurrent use.
type Proxy struct {
	guard       *Guard
	dial        DialFunc
	log         *slog.Logger
	metrics     *proxyMetrics
	now         func() time.Time
	maxConns    int
	idleTimeout time.Duration
	dialTimeout time.Duration
	limits      policy.Limits
	// upstreamRoots and secrets serve the credential broker (broker.go).
	upstreamRoots *x509.CertPool
	secrets       *metrics.CounterVec

	mu       sync.Mutex
	closed   bool
	attached map[*attachment]struct{}
}

// NewProxy returns a Proxy for cfg. Errors: a nil Guard. It panics when
// cfg.Metrics already holds a proxy's families (a wiring error).
func NewProxy(cfg ProxyConfig) (*Proxy, error) {
	if cfg.Guard == nil {
		return nil, errors.New("new proxy: no guard")
	}
	p := &Proxy{
		guard:         cfg.Guard,
		dial:          cfg.TestDial,
		log:           cfg.Logger,
		maxConns:      cfg.MaxConns,
		now:           cfg.Now,
		idleTimeout:   cfg.IdleTimeout,
		dialTimeout:   cfg.DialTimeout,
		limits:        policy.Limits{Ports: cfg.Guard.Ports(), MaxEntries: cfg.MaxPolicyEntries},
		upstreamRoots: cfg.UpstreamRoots,
		attached:      map[*attachment]struct{}{},
	}
	if p.dial == nil {
		p.dial = cfg.Guard.Dial
	}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	if p.now == nil {
		p.now = time.Now
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
	reg := cfg.Metrics
	if reg == nil {
		reg = metrics.NewRegistry()
	}
	p.metrics = newProxyMetrics(reg)
	p.secrets = newSecretsCounter(reg)
	return p, nil
}

// attachment is one sandbox's socket and its live connections.
type attachment struct {
	id     string
	ln     *net.UnixListener
	sem    chan struct{} // one token per connection being served
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
	logs   *logLimiter
	// policy is the sandbox's own (nil: public mode with no rules); named
	// says whether its destinations are decided by name (see Guard.Named).
	policy *policy.Policy
	named  bool
	mode   string
	// broker is the sandbox's credential broker (nil: no secrets and no
	// methods or paths), and
	// icpt the interceptor its intercepted connections share (made at the
	// first).
	broker   *broker
	icptOnce sync.Once
	icpt     *interceptor

	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

// CheckPolicy validates a sandbox's policy against this proxy's ports and
// size limit, as Attach will. Errors: *policy.Error, saying what to fix.
func (p *Proxy) CheckPolicy(pol agentsandbox.EgressPolicy) (agentsandbox.EgressPolicy, error) {
	c, err := p.compile(pol)
	if err != nil {
		return agentsandbox.EgressPolicy{}, err
	}
	if c == nil {
		return agentsandbox.EgressPolicy{Mode: agentsandbox.EgressPublic}, nil
	}
	return c.Spec(), nil
}

// compile compiles pol; nil for public mode with no rules (the fast path).
func (p *Proxy) compile(pol agentsandbox.EgressPolicy) (*policy.Policy, error) {
	if pol.IsDefault() {
		return nil, nil
	}
	return policy.Compile(pol, p.limits)
}

// Attach serves the proxy for sandbox id, under opts.Policy, on a new unix
// socket that only uid may connect to. The socket is bound at tempPath (in a
// directory only root can write) just long enough to take an O_PATH
// descriptor of it, which is returned: the sandbox connects through that
// descriptor (its init holds a copy at /proc/self/fd/N), and no name on
// disk leads to the socket. The caller closes sock once it has handed it
// on. At most MaxConns connections of the sandbox are accepted at a time;
// more wait in a queue of MaxConns and, past it, are refused by the
// kernel, so a sandbox can never make the worker hold more descriptors
// than that. ctx bounds only the setup; the socket lives until detach
// (idempotent), which closes the listener and every connection of the
// sandbox. Errors: ErrClosed; an invalid policy or mode none
// (*policy.Error); or the socket could not be made.
func (p *Proxy) Attach(ctx context.Context, id, tempPath string, uid int, opts AttachOptions) (sock *os.File, detach func(), err error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, fmt.Errorf("attach %s: %w", id, err)
	}
	pol, err := p.compile(opts.Policy)
	if err == nil && pol != nil && pol.Mode() == agentsandbox.EgressNone {
		err = &policy.Error{Field: "mode", Message: "a sandbox in mode none is not attached to the proxy"}
	}
	if err != nil {
		return nil, nil, fmt.Errorf("attach %s: %w", id, err)
	}
	br, err := newBroker(opts, pol)
	if err != nil {
		return nil, nil, fmt.Errorf("attach %s: secrets: %w", id, err)
	}
	h, err := unixsock.Listen(tempPath, p.maxConns, uid)
	if err != nil {
		return nil, nil, fmt.Errorf("attach %s: %w", id, err)
	}
	fl, err := net.FileListener(h.Listener)
	h.Listener.Close() // FileListener holds its own copy
	if err != nil {
		h.Path.Close()
		return nil, nil, fmt.Errorf("attach %s: %w", id, err)
	}
	ln := fl.(*net.UnixListener)
	a := &attachment{id: id, ln: ln, sem: make(chan struct{}, p.maxConns), conns: map[net.Conn]struct{}{},
		logs: newLogLimiter(p.now), policy: pol, named: p.guard.Named(pol), mode: agentsandbox.EgressPublic, broker: br}
	if pol != nil {
		a.mode = pol.Mode()
	}
	a.ctx, a.cancel = context.WithCancel(context.Background())
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		_ = ln.Close()
		h.Path.Close()
		return nil, nil, ErrClosed
	}
	p.attached[a] = struct{}{}
	p.mu.Unlock()
	p.metrics.attached.With(a.mode).Inc()
	a.wg.Add(1)
	go p.accept(a)
	return h.Path, func() { p.detach(a) }, nil
}

// accept serves a's connections, taking a connection only once one of the
// sandbox's MaxConns tokens is free: until then the sandbox's connections
// wait in the listen queue, which costs the worker nothing.
func (p *Proxy) accept(a *attachment) {
	defer a.wg.Done()
	for {
		select {
		case a.sem <- struct{}{}:
		case <-a.ctx.Done():
			return
		}
		c, err := a.ln.Accept()
		if a.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
			if c != nil {
				_ = c.Close()
			}
			<-a.sem
			return
		}
		if err != nil {
			<-a.sem
			p.log.Error("egress accept", "sandbox", a.id, "err", err)
			time.Sleep(acceptPause)
			continue
		}
		if !a.track(c) {
			_ = c.Close()
			<-a.sem
			return
		}
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			defer func() { <-a.sem }()
			defer a.untrack(c)
			p.serve(a, c) // a connection the bridge handed over on c holds c's token
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
		a.dropBroker()
		if s := a.logs.flush(); len(s) > 0 {
			p.logSuppressed(a.id, s)
		}
		p.mu.Lock()
		delete(p.attached, a)
		p.mu.Unlock()
		p.metrics.attached.With(a.mode).Dec()
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
