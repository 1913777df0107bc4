package worker

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"openvibe.network/agentsandbox/sandbox"
)

// DefaultSelfTestInterval is how often the daemon repeats the self-test.
const DefaultSelfTestInterval = 5 * time.Minute

// SelfTester runs the self-test one at a time and keeps the last result. It
// is safe for concurrent use.
type SelfTester struct {
	deps Deps
	run  sync.Mutex // one self-test at a time
	mu   sync.Mutex
	last *Result
	// ended is when the last self-test ended (by Deps.Now); kept is closed,
	// and replaced, each time a result is kept.
	ended time.Time
	kept  chan struct{}
}

// NewSelfTester returns a SelfTester for deps.
func NewSelfTester(deps Deps) *SelfTester {
	if deps.Now == nil {
		deps.Now = time.Now
	}
	return &SelfTester{deps: deps, kept: make(chan struct{})}
}

// Run runs a self-test now (after any running one finishes), keeps it as the
// last result and returns it.
func (s *SelfTester) Run(ctx context.Context) Result {
	s.run.Lock()
	defer s.run.Unlock()
	res := SelfTest(ctx, s.deps)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.last, s.ended = &res, s.deps.Now()
	close(s.kept)
	s.kept = make(chan struct{})
	return res
}

// Last returns a copy of the last result, nil before the first one.
func (s *SelfTester) Last() *Result {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.last == nil {
		return nil
	}
	r := *s.last
	return &r
}

// RetryFailed is how soon Every runs the self-test again after one that
// failed (when shorter than its interval): a worker that could not prove a
// fact is not registered with Live until it can.
const RetryFailed = 30 * time.Second

// Every runs a self-test interval after the last one ended, or RetryFailed
// after one that failed, until ctx is done (the first one after a wait: run
// one at start with Run). Whoever ran the last one counts: a self-test run
// on demand (Run) while Every waits ends the wait, and the next wait is
// chosen from that result, so a failure in the middle of a long wait is
// retried RetryFailed after it, not when the long wait would have ended.
// sleep waits on the clock of Deps.Now and returns ctx's error when ctx
// ends first (nil: a timer).
func (s *SelfTester) Every(ctx context.Context, interval time.Duration, sleep func(context.Context, time.Duration) error) {
	if sleep == nil {
		sleep = sleepTimer
	}
	start := s.deps.Now()
	for ctx.Err() == nil {
		wait, kept := s.next(interval, start)
		if wait > 0 {
			wctx, cancel := context.WithCancel(ctx)
			go func() {
				select {
				case <-kept: // a result arrived meanwhile: choose again
					cancel()
				case <-wctx.Done():
				}
			}()
			err := sleep(wctx, wait)
			cancel()
			if err != nil {
				continue
			}
		}
		s.Run(ctx)
	}
}

// next is how long Every waits from now for the next self-test (0 or less:
// none), and the channel closed when a result arrives before that; start
// is when Every began, which counts as the last end before any result.
func (s *SelfTester) next(interval time.Duration, start time.Time) (time.Duration, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	from, gap := start, interval
	if s.last != nil {
		from = s.ended
		if !s.last.Passed {
			gap = min(interval, RetryFailed)
		}
	}
	return from.Add(gap).Sub(s.deps.Now()), s.kept
}

// GlobInspector returns a Deps.Inspect that finds a sandbox on the host by
// the sandbox runtime's layout: its directory stateDir/rt-*/ID and its
// cgroup directories PARENT/rt-*/ID for each of cgroupParents (the cgroup
// directories every runtime's groups live under: one on v2, one per
// controller on v1). Its error says when either is not found.
func GlobInspector(stateDir string, cgroupParents []string) func(sandbox.Info) (HostView, error) {
	return func(info sandbox.Info) (HostView, error) {
		id := filepath.Base(info.ID)
		dirs, _ := filepath.Glob(filepath.Join(stateDir, "rt-*", id))
		v := HostView{UID: info.HostUID, Dirs: dirs}
		for _, p := range cgroupParents {
			cg, _ := filepath.Glob(filepath.Join(p, "rt-*", id))
			v.Cgroups = append(v.Cgroups, cg...)
		}
		switch {
		case len(v.Dirs) == 0:
			return v, fmt.Errorf("inspect sandbox: no sandbox directory under %s", stateDir)
		case len(v.Cgroups) == 0:
			return v, fmt.Errorf("inspect sandbox: no cgroup under %s", strings.Join(cgroupParents, ", "))
		case v.UID <= 0:
			return v, fmt.Errorf("inspect sandbox: host uid %d", v.UID)
		}
		return v, nil
	}
}
