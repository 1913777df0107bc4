package sandbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"openvibe.network/agentsandbox/sandbox/cgroup"
	"openvibe.network/agentsandbox/sandbox/control"
)

// The pool: up to Config.Pool sandboxes started ahead, in free slots, with
// the default limits (and egress when Config.PoolEgress), never used. A
// Create that a pooled sandbox can serve takes one, gives it its limits,
// environment and time box, and returns at once; the pool refills in the
// background. Each sandbox is still single-use and wiped on delete; a
// pooled one holds a slot, so Create evicts one when it needs its slot for
// a sandbox the pool cannot serve.

// Pools of images (Config.PoolImages) work the same way: a sandbox of such
// a pool runs on its image (held for it by PoolImage.Acquire), and serves a
// Create of an image with the same digest.

// The browser pool (Config.PoolBrowser) holds browser sandboxes whose
// Chromium the filler started (as the first connection would: the init's
// child, in the sandbox's cgroup, its profile a new directory in the
// sandbox's own tmpfs) and asked for its version once, so that it answers;
// nobody else ever connected. It serves only a Create with Options.Browser
// that the pool could otherwise serve and that gives no environment (the
// init starts Chromium with the sandbox's environment, which a pooled one
// did not have yet); a Create without a browser never takes one (its
// Chromium would hold memory it never asked for).

// Which pool a pooled sandbox belongs to (sandboxState.poolIndex), beside
// an index of Config.PoolImages; poolNone is shortPool's "none is short".
const (
	poolHost    = -1
	poolBrowser = -2
	poolNone    = -3
)

// The free slots are shared in this order: the filler fills the host
// view's pool, then the browser pool, then the image pools, each up to its
// size, while slots are free (Config's validation keeps their sum within
// the capacity, so all are full on an idle runtime). A Create that needs a
// slot when none is free evicts the pooled sandbox started last, of any
// pool.

// poolRetry is how long the filler waits after a pooled sandbox failed to
// start.
const poolRetry = 5 * time.Second

// PoolImage is a pool of sandboxes of one image (Config.PoolImages).
type PoolImage struct {
	// Ref names the image (in logs).
	Ref string
	// N is how many of its sandboxes to keep started ahead.
	N int
	// Acquire holds the image for one pooled sandbox, which releases it at
	// its wipe (the worker pulls it on first use).
	Acquire func(ctx context.Context) (*RootImage, error)
}

// poolSize is the most sandboxes all the pools keep.
func (c *Config) poolSize() int {
	n := c.Pool + c.PoolBrowser
	for _, p := range c.PoolImages {
		n += p.N
	}
	return n
}

// poolKey is the pool a sandbox of opts belongs to: "" for the host's view,
// "browser" for a browser sandbox, else its image's digest (never
// "browser": a digest is algorithm:hex).
func poolKey(opts Options) string {
	switch {
	case opts.Browser:
		return "browser"
	case opts.Image == nil:
		return ""
	}
	return opts.Image.Digest
}

// poolable reports whether a pooled sandbox can serve opts: its egress
// must be the pool's, public with no rules of its own (a pooled sandbox
// was attached to the proxy with the default policy); a browser one's
// environment empty (its Chromium started without one).
func (r *Runtime) poolable(opts Options) bool {
	return r.cfg.poolSize() > 0 && !opts.SelfTest && opts.Egress == r.cfg.PoolEgress && opts.EgressPolicy.IsDefault() &&
		len(opts.Secrets) == 0 && (!opts.Browser || len(opts.Env) == 0)
}

// takePooled removes a ready pooled sandbox that serves opts (of its pool)
// from the pool, or returns nil.
func (r *Runtime) takePooled(opts Options) *sandboxState {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	key := poolKey(opts)
	for i := len(r.pool) - 1; i >= 0; i-- {
		if b := r.pool[i]; poolKey(b.opts) == key {
			r.pool = append(r.pool[:i], r.pool[i+1:]...)
			b.pooled = false
			return b
		}
	}
	return nil
}

// takeAnyPooled removes a ready pooled sandbox of any pool, or returns nil.
func (r *Runtime) takeAnyPooled() *sandboxState {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed || len(r.pool) == 0 {
		return nil
	}
	b := r.pool[len(r.pool)-1]
	r.pool = r.pool[:len(r.pool)-1]
	b.pooled = false
	return b
}

// adopt gives a pooled sandbox to a Create of opts: its limits (when they
// differ from the pool's), its environment, and the rest of Create's
// bookkeeping. On error the sandbox is wiped.
func (r *Runtime) adopt(ctx context.Context, b *sandboxState, opts Options) error {
	if opts.Limits != b.opts.Limits {
		err := b.group.Update(cgroup.Limits{
			MemoryBytes: int64(opts.Limits.MemoryMB) << 20, Pids: opts.Limits.Pids, CPUPercent: opts.Limits.CPUPercent,
		})
		if err == nil && opts.Limits.DiskMB != b.opts.Limits.DiskMB {
			err = resizeBoxDir(b.dir, int64(opts.Limits.DiskMB)<<20)
		}
		if err != nil {
			r.wipe(b, "deleted")
			return fmt.Errorf("give a pooled sandbox its limits: %w", err)
		}
	}
	if len(opts.Env) > 0 {
		c, _, end, err := r.request(ctx, b, control.Request{Op: control.OpConfigure, Env: opts.Env})
		if err == nil {
			var done control.Done
			done, err = readReply(c, nil)
			end()
			err = errors.Join(err, codeError(done))
		}
		if err != nil {
			r.wipe(b, "deleted")
			return fmt.Errorf("give a pooled sandbox its environment: %w", err)
		}
	}
	if opts.Image != nil {
		// The pooled sandbox holds its image already (the same digest): the
		// Create's hold is let go, the sandbox's kept.
		ref := opts.Image.Ref
		opts.Image.release()
		opts.Image = b.opts.Image
		b.info.Image = ref
	}
	b.opts = opts
	b.info.Limits, b.info.Egress, b.info.EgressPolicy, b.info.Browser = opts.Limits, opts.Egress, opts.EgressPolicy, opts.Browser
	b.info.CreatedAt = r.cfg.Now()
	return nil
}

// wakePool tells the filler to look at the pool.
func (r *Runtime) wakePool() {
	if r.cfg.poolSize() == 0 {
		return
	}
	select {
	case r.poolWake <- struct{}{}:
	default:
	}
}

// runPool keeps the pool full while free slots allow, until the runtime
// closes.
func (r *Runtime) runPool() {
	defer close(r.poolDone)
	for {
		select {
		case <-r.poolStop:
			return
		case <-r.poolWake:
		}
		for r.fillOne() {
		}
	}
}

// fillOne starts one pooled sandbox when the pool is short and a slot is
// free; it reports whether it did (and the filler should look again).
func (r *Runtime) fillOne() bool {
	r.mu.Lock()
	pi := r.shortPool()
	if pi != poolNone {
		r.poolStarting++
		r.poolStartingOf[pi]++
	}
	r.mu.Unlock()
	if pi == poolNone {
		return false
	}
	defer func() {
		r.mu.Lock()
		r.poolStarting--
		r.poolStartingOf[pi]--
		r.poolChange()
		r.mu.Unlock()
	}()
	opts, _ := resolve(Options{Egress: r.cfg.PoolEgress, Browser: pi == poolBrowser})
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if pi >= 0 {
		img, err := r.cfg.PoolImages[pi].Acquire(ctx)
		if err != nil {
			r.log.Error("pooled image sandbox not started: its image is unavailable", "image", r.cfg.PoolImages[pi].Ref, "err", err)
			r.pausePool()
			return true
		}
		opts.Image = img.once()
	}
	b, err := r.claim(opts)
	if err != nil {
		opts.Image.release()
		return false // no free slot: a wipe wakes the filler again
	}
	b.pooled, b.poolIndex = true, pi
	if err := r.start(ctx, b); err != nil {
		r.wipe(b, "deleted")
		r.log.Error("pooled sandbox start failed", "slot", b.slot.index, "image", b.info.Image, "err", err)
		r.pausePool()
		return true
	}
	if pi == poolBrowser {
		if err := r.warmBrowser(ctx, b); err != nil {
			r.wipe(b, "deleted")
			r.log.Error("pooled browser sandbox's Chromium did not start", "slot", b.slot.index, "err", err)
			r.pausePool()
			return true
		}
	}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		r.wipe(b, "deleted")
		return false
	}
	r.pool = append(r.pool, b)
	r.mu.Unlock()
	go r.watch(b)
	return true
}

// pausePool waits a while after a pooled sandbox could not start, or
// until the runtime closes.
func (r *Runtime) pausePool() {
	select {
	case <-r.poolStop:
	case <-time.After(poolRetry):
	}
}

// shortPool is the pool that lacks a sandbox, in the order the free slots
// go to: poolHost, poolBrowser, an index of Config.PoolImages, or poolNone
// (under mu).
func (r *Runtime) shortPool() int {
	if r.closed {
		return poolNone
	}
	have := map[int]int{}
	for _, b := range r.pool {
		have[b.poolIndex]++
	}
	if have[poolHost]+r.poolStartingOf[poolHost] < r.cfg.Pool {
		return poolHost
	}
	if have[poolBrowser]+r.poolStartingOf[poolBrowser] < r.cfg.PoolBrowser {
		return poolBrowser
	}
	for i, p := range r.cfg.PoolImages {
		if have[i]+r.poolStartingOf[i] < p.N {
			return i
		}
	}
	return poolNone
}

// poolStartingNow reports whether a pooled sandbox is being started, with a
// channel closed when that changes.
func (r *Runtime) poolStartingNow() (<-chan struct{}, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.poolChanged, r.poolStarting > 0
}

// poolChange wakes those waiting in poolStartingNow; the caller holds r.mu.
func (r *Runtime) poolChange() {
	close(r.poolChanged)
	r.poolChanged = make(chan struct{})
}

// evictPooled wipes one pooled sandbox to free its slot; false when the
// pool is empty.
func (r *Runtime) evictPooled() bool {
	b := r.takeAnyPooled()
	if b == nil {
		return false
	}
	r.wipe(b, "deleted")
	return true
}

// drainPool wipes every pooled sandbox (at Close) and stops the filler.
func (r *Runtime) drainPool() []error {
	if r.cfg.poolSize() == 0 {
		return nil
	}
	close(r.poolStop)
	<-r.poolDone
	var errs []error
	for {
		r.mu.Lock()
		if len(r.pool) == 0 {
			r.mu.Unlock()
			return errs
		}
		b := r.pool[0]
		r.pool = r.pool[1:]
		r.mu.Unlock()
		if rep := r.wipe(b, "deleted"); !rep.Verified {
			errs = append(errs, fmt.Errorf("close: wipe of pooled %s not verified: %v", b.id, rep.Leftovers))
		}
	}
}

// removePooled takes b out of the pool when it is there (its init died
// while it waited); it reports whether it was.
func (r *Runtime) removePooled(b *sandboxState) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, p := range r.pool {
		if p == b {
			r.pool = append(r.pool[:i], r.pool[i+1:]...)
			return true
		}
	}
	return false
}
