package egress

import (
	"sync"
	"time"
)

// The log budget of one sandbox: a burst of logBurst lines, refilled at
// logRate lines per second. A sandbox that connects faster gets one
// summary line (with counts by verdict and reason) in place of the lines
// it would have had, at most once per summaryEvery; the metrics count
// every connection either way. One sandbox cannot fill the worker's log.
const (
	logBurst     = 50
	logRate      = 5
	summaryEvery = time.Second
)

// logLimiter is a token bucket for one sandbox's log lines. It is safe for
// concurrent use.
type logLimiter struct {
	now func() time.Time

	mu          sync.Mutex
	tokens      float64
	last        time.Time
	lastSummary time.Time
	suppressed  map[string]int
}

func newLogLimiter(now func() time.Time) *logLimiter {
	t := now()
	return &logLimiter{now: now, tokens: logBurst, last: t, lastSummary: t}
}

// allow reports whether a line of kind may be written now. When one may not,
// it is counted; summary, when not nil, holds the counts to write now (the
// summary is due), which are then reset.
func (l *logLimiter) allow(kind string) (ok bool, summary map[string]int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	l.tokens = min(logBurst, l.tokens+now.Sub(l.last).Seconds()*logRate)
	l.last = now
	if l.tokens >= 1 {
		l.tokens--
		ok = true
	} else {
		if l.suppressed == nil {
			l.suppressed = map[string]int{}
		}
		l.suppressed[kind]++
	}
	if len(l.suppressed) > 0 && (ok || now.Sub(l.lastSummary) >= summaryEvery) {
		summary, l.suppressed, l.lastSummary = l.suppressed, nil, now
	}
	return ok, summary
}

// flush returns the counts not yet summarised, and resets them.
func (l *logLimiter) flush() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.suppressed
	l.suppressed = nil
	return s
}
