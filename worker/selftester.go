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
}

// NewSelfTester returns a SelfTester for deps.
func NewSelfTester(deps Deps) *SelfTester { return &SelfTester{deps: deps} }

// Run runs a self-test now (after any running one finishes), keeps it as the
// last result and returns it.
func (s *SelfTester) Run(ctx context.Context) Result {
	s.run.Lock()
	defer s.run.Unlock()
	res := SelfTest(ctx, s.deps)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.last = &res
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

// Every runs a self-test every interval, or every RetryFailed while the last
// one failed, until ctx is done (the first one after a wait: run one at start
// with Run). sleep is the clock (nil: a timer).
func (s *SelfTester) Every(ctx context.Context, interval time.Duration, sleep func(context.Context, time.Duration) error) {
	if sleep == nil {
		sleep = sleepTimer
	}
	for sleep(ctx, s.next(interval)) == nil {
		s.Run(ctx)
	}
}

func (s *SelfTester) next(interval time.Duration) time.Duration {
	if last := s.Last(); last != nil && !last.Passed {
		return min(interval, RetryFailed)
	}
	return interval
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
