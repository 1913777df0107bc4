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

// poolRetry is how long the filler waits after a pooled sandbox failed to
// start.
const poolRetry = 5 * time.Second

// poolable reports whether a pooled sandbox can serve opts: its egress
// must be the pool's, public with no rules of its own (a pooled sandbox
// was attached to the proxy with the default policy).
func (r *Runtime) poolable(opts Options) bool {
	return r.cfg.Pool > 0 && !opts.SelfTest && opts.Egress == r.cfg.PoolEgress && opts.EgressPolicy.IsDefault()
}

// takePooled removes a ready pooled sandbox from the pool, or returns nil.
func (r *Runtime) takePooled() *sandboxState {
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
	b.opts = opts
	b.info.Limits, b.info.Egress, b.info.EgressPolicy, b.info.Browser = opts.Limits, opts.Egress, opts.EgressPolicy, opts.Browser
	b.info.CreatedAt = r.cfg.Now()
	return nil
}

// wakePool tells the filler to look at the pool.
func (r *Runtime) wakePool() {
	if r.cfg.Pool == 0 {
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
	short := !r.closed && len(r.pool)+r.poolStarting < r.cfg.Pool
	if short {
		r.poolStarting++
	}
	r.mu.Unlock()
	if !short {
		return false
	}
	defer func() {
		r.mu.Lock()
		r.poolStarting--
		r.poolChange()
		r.mu.Unlock()
	}()
	opts, _ := resolve(Options{Egress: r.cfg.PoolEgress})
	b, err := r.claim(opts)
	if err != nil {
		return false // no free slot: a wipe wakes the filler again
	}
	b.pooled = true
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if err := r.start(ctx, b); err != nil {
		r.wipe(b, "deleted")
		r.log.Error("pooled sandbox start failed", "slot", b.slot.index, "err", err)
		select {
		case <-r.poolStop:
		case <-time.After(poolRetry):
		}
		return true
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
	b := r.takePooled()
	if b == nil {
		return false
	}
	r.wipe(b, "deleted")
	return true
}

// drainPool wipes every pooled sandbox (at Close) and stops the filler.
func (r *Runtime) drainPool() []error {
	if r.cfg.Pool == 0 {
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
