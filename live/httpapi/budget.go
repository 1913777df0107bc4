package httpapi

import (
	"context"
	"sync"
	"time"
)

// budget is a context with a deadline, as context.WithDeadline makes, that
// arms a timer only when something asks for its Done channel. A store call
// that only reads its deadline and its error (SQLite's writer, on the path
// every check-in takes) then costs no timer; one that waits on Done (pgx,
// PostgreSQL's batches) gets the same timer as context.WithDeadline's.
// Once Err reports the deadline, Done is closed too.
type budget struct {
	parent   context.Context
	deadline time.Time

	mu       sync.Mutex
	done     chan struct{}
	err      error
	timer    *time.Timer
	unparent func() bool // stops watching the parent
}

// withBudget returns a context that ends at the earlier of parent's end and
// now + d; its cancel must be called.
func withBudget(parent context.Context, d time.Duration) *budget {
	b := &budget{parent: parent, deadline: time.Now().Add(d)}
	if pd, ok := parent.Deadline(); ok && pd.Before(b.deadline) {
		b.deadline = pd
	}
	return b
}

// cancel ends the budget (Canceled) and releases its timer, if any.
func (b *budget) cancel() { b.end(context.Canceled) }

// Deadline returns the budget's end.
func (b *budget) Deadline() (time.Time, bool) { return b.deadline, true }

// Value returns the parent's value.
func (b *budget) Value(key any) any { return b.parent.Value(key) }

// Done returns a channel closed when the budget ends; the first call arms
// the timer (and a watch on the parent).
func (b *budget) Done() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.done != nil {
		return b.done
	}
	b.done = make(chan struct{})
	if b.err != nil {
		close(b.done)
		return b.done
	}
	b.timer = time.AfterFunc(time.Until(b.deadline), func() { b.end(context.DeadlineExceeded) })
	b.unparent = context.AfterFunc(b.parent, func() { b.end(b.parent.Err()) })
	return b.done
}

// Err returns why the budget ended, nil while it has not: its parent's
// error, DeadlineExceeded at its deadline, Canceled once cancelled.
func (b *budget) Err() error {
	b.mu.Lock()
	err := b.err
	b.mu.Unlock()
	if err != nil {
		return err
	}
	if perr := b.parent.Err(); perr != nil {
		b.end(perr)
	} else if !time.Now().Before(b.deadline) {
		b.end(context.DeadlineExceeded)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}

// end ends the budget with err, once: it closes Done (if made) and stops
// the timer and the watch on the parent.
func (b *budget) end(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err != nil {
		return
	}
	b.err = err
	if b.done != nil {
		close(b.done)
	}
	if b.timer != nil {
		b.timer.Stop()
	}
	if b.unparent != nil {
		b.unparent()
	}
}
