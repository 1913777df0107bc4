// Package fakeclock is a settable clock for tests, safe for concurrent use:
// pass its Now wherever a component takes an injectable clock.
package fakeclock

import (
	"sync"
	"time"
)

// Clock is a clock that moves only when told to.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// New returns a clock that reads start.
func New(start time.Time) *Clock { return &Clock{now: start} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Set moves the clock to t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}
