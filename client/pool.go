package client

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Defaults of PoolOptions.
const (
	DefaultStatusTTL     = 2 * time.Second
	DefaultStatusTimeout = 2 * time.Second
)

// Errors of a Pool.
var (
	// ErrUnreachable: a worker did not answer (refused the connection, or
	// the connection failed): the worker is down or out of reach, and with
	// it go its sandboxes; a pool's create moves on to the next worker.
	ErrUnreachable = errors.New("worker did not answer")
	// ErrUnknownWorker: a pool id names a worker that is not in the pool.
	ErrUnknownWorker = errors.New("no such worker in the pool")
)

// PoolOptions tune a Pool. Zero fields take the defaults.
type PoolOptions struct {
	// HTTPClient is copied for each worker (see NewWorker); nil: one
	// without an overall timeout.
	HTTPClient *http.Client
	// StatusTTL is how long a worker's /v1/status is trusted before a
	// create asks again, in the background (default DefaultStatusTTL).
	StatusTTL time.Duration
	// StatusTimeout bounds one /v1/status request (default
	// DefaultStatusTimeout): a worker that does not answer in it is taken
	// as down until its status is asked again.
	StatusTimeout time.Duration
	// Now is the clock of the status cache (default time.Now).
	Now func() time.Time
}

// Pool is a client of several workers used as one pool (DESIGN.md §6): a
// create goes to the worker with the most free slots, from its /v1/status
// (asked again in the background once older than StatusTTL, and counted
// down by the pool's own creates meanwhile, so that creates made at once
// spread), and moves on to the
// next when a worker answers 429 at_capacity, cannot run sandboxes (503)
// or does not answer at all. Every sandbox stays bound to the worker that
// holds it: its pool id names the worker (see PooledSandbox.ID), so
// Sandbox(id) finds it again in any Pool of the same workers. There is no
// scheduler beyond that. A Pool is safe for concurrent use.
type Pool struct {
	members []*member
	opts    PoolOptions

	mu sync.Mutex // guards every member's free, down, asked and asking, and next
	// next rotates the start among workers with as many free slots, so
	// that equal ones share the creates.
	next int
}

// member is one worker of a pool and what the pool knows of it (guarded
// by the pool's mu).
type member struct {
	url string
	key string // PoolKey(url)
	w   *Worker
	// free is the slots the worker had free at its last status, less the
	// creates placed on it since; down is why its last status or create
	// got no answer (nil when it answered).
	free   int
	down   error
	asked  time.Time     // when its status was last asked for
	asking chan struct{} // closed when the status being asked for arrives
	known  bool          // a status (or its failure) has arrived
}

// PoolKey is the key of the worker at baseURL in pool ids: the first 8 hex
// digits of the SHA-256 of its base URL without a trailing slash. The SDKs
// derive it the same way, so an id made by one is found by another.
func PoolKey(baseURL string) string {
	sum := sha256.Sum256([]byte(strings.TrimRight(baseURL, "/")))
	return hex.EncodeToString(sum[:4])
}

// NewPool returns a client of the workers at urls (each as NewWorker
// takes it), all with token. It fails for no URL, a URL that is not an
// absolute http(s) one, or two workers with one key (the same URL twice).
func NewPool(urls []string, token string, opts PoolOptions) (*Pool, error) {
	if len(urls) == 0 {
		return nil, errors.New("new pool: no worker URL")
	}
	opts.StatusTTL = cmp.Or(opts.StatusTTL, DefaultStatusTTL)
	opts.StatusTimeout = cmp.Or(opts.StatusTimeout, DefaultStatusTimeout)
	if opts.Now == nil {
		opts.Now = time.Now
	}
	p := &Pool{opts: opts}
	seen := map[string]string{}
	for _, raw := range urls {
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("new pool: worker URL %q: want http(s)://HOST[:PORT]", raw)
		}
		base := strings.TrimRight(raw, "/")
		key := PoolKey(base)
		if other, ok := seen[key]; ok {
			return nil, fmt.Errorf("new pool: %s and %s are one worker (key %s)", other, base, key)
		}
		seen[key] = base
		hc := &http.Client{}
		if opts.HTTPClient != nil {
			cp := *opts.HTTPClient
			hc = &cp
		}
		hc.Transport = reachTransport{base: cmp.Or[http.RoundTripper](hc.Transport, http.DefaultTransport), url: base}
		p.members = append(p.members, &member{url: base, key: key, w: NewWorker(base, token, hc)})
	}
	return p, nil
}

// Workers returns the pool's worker URLs, in the order given.
func (p *Pool) Workers() []string {
	out := make([]string, len(p.members))
	for i, m := range p.members {
		out[i] = m.url
	}
	return out
}

// Worker returns the client of the pool's worker at baseURL, nil when it
// is not in the pool.
func (p *Pool) Worker(baseURL string) *Worker {
	if m := p.byKey(PoolKey(baseURL)); m != nil {
		return m.w
	}
	return nil
}

func (p *Pool) byKey(key string) *member {
	for _, m := range p.members {
		if m.key == key {
			return m
		}
	}
	return nil
}

// PooledSandbox is a handle of a sandbox of one of a pool's workers: every
// method of Sandbox, on that worker. ID is the pool id, which names the
// worker; SandboxID is the worker's own id of it.
type PooledSandbox struct {
	*Sandbox
	// Created is what the worker answered to the create (its ID the
	// worker's); empty for a handle made with Pool.Sandbox.
	Created SandboxInfo
	id      string
	worker  string
}

// ID returns the pool id, "KEY-ID": the worker's PoolKey, a dash, and the
// worker's id of the sandbox; Pool.Sandbox finds the sandbox by it.
func (ps *PooledSandbox) ID() string { return ps.id }

// SandboxID returns the worker's own id of the sandbox.
func (ps *PooledSandbox) SandboxID() string { return ps.Sandbox.ID() }

// WorkerURL returns the base URL of the worker that holds the sandbox.
func (ps *PooledSandbox) WorkerURL() string { return ps.worker }

// Sandbox returns the handle of the sandbox whose pool id is id (see
// PooledSandbox.ID). It fails with ErrUnknownWorker when the id names no
// worker of the pool, and for an id that is not a pool id; like every
// handle, it says nothing of whether the sandbox still exists.
func (p *Pool) Sandbox(id string) (*PooledSandbox, error) {
	key, sid, ok := strings.Cut(id, "-")
	if !ok || len(key) != 8 || sid == "" {
		return nil, fmt.Errorf("pool sandbox %q: not a pool id (KEY-ID)", id)
	}
	m := p.byKey(key)
	if m == nil {
		return nil, fmt.Errorf("pool sandbox %q: %w (key %s)", id, ErrUnknownWorker, key)
	}
	return &PooledSandbox{Sandbox: m.w.Sandbox(sid), id: id, worker: m.url}, nil
}

// Create makes a sandbox on the worker with the most free slots and
// returns its handle, moving on to the next worker (by free slots) when
// one answers at capacity, cannot run sandboxes (503) or does not answer;
// workers that did not answer are tried last. A refusal of the options
// themselves (400) is returned at once: every worker would refuse them.
// When no worker takes the sandbox the error says what each answered;
// errors.Is matches it to ErrCapacity when every worker was at capacity,
// and to ErrUnreachable when none answered.
func (p *Pool) Create(ctx context.Context, opts CreateOptions) (*PooledSandbox, error) {
	p.refresh(ctx)
	var tried []error
	done := map[*member]bool{}
	capacity, unreachable := 0, 0
	for m := p.pick(done); m != nil; m = p.pick(done) {
		done[m] = true
		info, err := m.w.Create(ctx, opts)
		if err == nil {
			return &PooledSandbox{Sandbox: m.w.Sandbox(info.ID), Created: info, id: m.key + "-" + info.ID, worker: m.url}, nil
		}
		var apiErr *APIError
		switch {
		case ctx.Err() != nil:
			p.settle(m, 1, nil)
			return nil, fmt.Errorf("pool create: %w", err)
		case errors.Is(err, ErrCapacity):
			p.settle(m, 0, nil)
			capacity++
		case errors.Is(err, ErrUnreachable):
			p.settle(m, 1, err)
			unreachable++
		case errors.As(err, &apiErr) && apiErr.StatusCode == http.StatusServiceUnavailable:
			p.settle(m, 0, nil)
		default:
			p.settle(m, 1, nil)
			return nil, fmt.Errorf("pool create on %s: %w", m.url, err)
		}
		tried = append(tried, fmt.Errorf("%s: %w", m.url, err))
	}
	err := errors.Join(tried...)
	switch {
	case capacity == len(p.members):
		err = fmt.Errorf("%w: %w", ErrCapacity, err)
	case unreachable == len(p.members):
		err = fmt.Errorf("%w: %w", ErrUnreachable, err)
	}
	return nil, fmt.Errorf("pool create: no worker took the sandbox: %w", err)
}

// pick returns the worker to try next, not in done: the one with the most
// free slots (the start rotating among equals), those that did not answer
// last; it counts the create against it. Nil when every worker was tried.
func (p *Pool) pick(done map[*member]bool) *member {
	p.mu.Lock()
	defer p.mu.Unlock()
	start := p.next
	p.next++
	var best *member
	for i := range p.members {
		m := p.members[(start+i)%len(p.members)]
		switch {
		case done[m]:
		case best == nil, (best.down != nil) && m.down == nil, (best.down != nil) == (m.down != nil) && m.free > best.free:
			best = m
		}
	}
	if best != nil {
		best.free--
	}
	return best
}

// settle records how a create on m ended without a sandbox: it gives back
// the slot pick counted (back 1), or marks m full (back 0: it answered at
// capacity or cannot run sandboxes), and down with why it did not answer.
func (p *Pool) settle(m *member, back int, down error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if back == 0 {
		m.free = 0
	} else {
		m.free += back
	}
	if down != nil {
		m.down = down
	}
}

// refresh makes sure each worker's status is known: one never asked is
// asked now and waited for (all at once, each bounded by StatusTimeout; a
// worker already being asked is waited for too). One older than StatusTTL
// is asked again in the background while this create goes by what is known
// (and by the creates counted since), so a create waits for no status but
// the first.
func (p *Pool) refresh(ctx context.Context) {
	var wg sync.WaitGroup
	for _, m := range p.members {
		wait, ask, known := p.due(m)
		switch {
		case ask && known:
			go p.ask(context.WithoutCancel(ctx), m)
		case ask:
			wg.Go(func() { p.ask(ctx, m) })
		case wait != nil && !known:
			wg.Go(func() {
				select {
				case <-wait:
				case <-ctx.Done():
				}
			})
		}
	}
	wg.Wait()
}

// due reports whether m's status is to be asked for now (ask, and m is
// marked as being asked), or the channel to wait on while another create
// asks; neither when it is fresh. known says a status (or its failure) was
// had before.
func (p *Pool) due(m *member) (wait <-chan struct{}, ask, known bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	known = m.known
	if m.asking != nil {
		return m.asking, false, known
	}
	now := p.opts.Now()
	if !m.asked.IsZero() && now.Sub(m.asked) < p.opts.StatusTTL {
		return nil, false, known
	}
	m.asked, m.asking = now, make(chan struct{})
	return nil, true, known
}

// ask reads m's status and records its free slots, or that it is down.
func (p *Pool) ask(ctx context.Context, m *member) {
	ctx, cancel := context.WithTimeout(ctx, p.opts.StatusTimeout)
	defer cancel()
	st, err := m.w.Status(ctx)
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		m.down = err
	} else {
		m.down, m.free = nil, max(0, st.Capacity-st.Active-len(st.SlotsOutOfUse))
	}
	m.known = true
	close(m.asking)
	m.asking = nil
}

// reachTransport marks a failed round trip to a pool's worker with its URL
// and ErrUnreachable (its sandboxes' methods fail with it too).
type reachTransport struct {
	base http.RoundTripper
	url  string
}

func (t reachTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil && req.Context().Err() == nil {
		return nil, &unreachableError{url: t.url, err: err}
	}
	return resp, err
}

// unreachableError is a worker that did not answer; errors.Is matches it
// to ErrUnreachable.
type unreachableError struct {
	url string
	err error
}

func (e *unreachableError) Error() string {
	return fmt.Sprintf("worker %s did not answer (down or out of reach; its sandboxes are lost with it): %v", e.url, e.err)
}

func (e *unreachableError) Unwrap() error { return e.err }

func (e *unreachableError) Is(target error) bool { return target == ErrUnreachable }
