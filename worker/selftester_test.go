package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"openvibe.network/agentsandbox"
	"openvibe.network/agentsandbox/internal/fakeclock"
	"openvibe.network/agentsandbox/sandbox"
)

// TestSelfTesterRecordsEveryRun: every run replaces the last result, a run
// that could not create its sandbox too (the self-test has a slot of its
// own, so "busy" is a failure to report, not an old pass to keep).
func TestSelfTesterRecordsEveryRun(t *testing.T) {
	f := newFakeBox(t)
	st := NewSelfTester(Deps{Sandboxes: f, Guard: hostGuard(t), Inspect: f.inspect, HostAddrs: testHostAddrs,
		Egress: true, ProcRoot: f.proc, MaxOpenFiles: 4096})
	if st.Last() != nil {
		t.Fatal("a result before any run")
	}
	first := st.Run(context.Background())
	if !first.Passed {
		t.Fatalf("first run: %q", first.Reasons)
	}
	f.failCreate = fmt.Errorf("create sandbox: %w", sandbox.ErrCapacity)
	got := st.Run(context.Background())
	if got.Passed || st.Last().Passed || len(st.Last().NotRun) != len(agentsandbox.Checks())+1 { // credentials_brokered too
		t.Errorf("a run that could not create its sandbox did not replace the last result: %+v", got)
	}
}

func TestSelfTesterEvery(t *testing.T) {
	clock := fakeclock.New(time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC))
	f := newFakeBox(t)
	st := NewSelfTester(Deps{Sandboxes: f, Guard: hostGuard(t), Inspect: f.inspect, HostAddrs: testHostAddrs,
		Egress: true, ProcRoot: f.proc, MaxOpenFiles: 4096, Now: clock.Now})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var waits []time.Duration
	st.Every(ctx, DefaultSelfTestInterval, func(ctx context.Context, d time.Duration) error {
		waits = append(waits, d)
		clock.Advance(d)
		if len(waits) == 2 {
			f.failCreate = errors.New("bubblewrap failed") // the second run fails
		}
		if len(waits) == 4 {
			cancel()
			return ctx.Err()
		}
		return nil
	})
	want := []time.Duration{DefaultSelfTestInterval, DefaultSelfTestInterval, RetryFailed, RetryFailed}
	if fmt.Sprint(waits) != fmt.Sprint(want) {
		t.Fatalf("waits %v, want %v (sooner after a failure)", waits, want)
	}
	if st.Last() == nil || st.Last().Passed {
		t.Fatalf("last %+v", st.Last())
	}
}

// fakeSleeper is Every's sleep on a fake clock: each call is handed to the
// test (asked), which either lets it pass (the clock moves on by the wait)
// or sees it end early, when Every's context for it ends.
type fakeSleeper struct {
	clock *fakeclock.Clock
	asked chan time.Duration
	pass  chan struct{}
}

func (f *fakeSleeper) sleep(ctx context.Context, d time.Duration) error {
	f.asked <- d
	select {
	case <-f.pass:
		f.clock.Advance(d)
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// next returns the wait Every asks for next, or fails after a while.
func (f *fakeSleeper) next(t *testing.T) time.Duration {
	t.Helper()
	select {
	case d := <-f.asked:
		return d
	case <-time.After(10 * time.Second):
		t.Fatal("Every asked for no wait in 10 s")
		return 0
	}
}

// TestSelfTesterEveryRetriesAFailureInBetween: a self-test that fails
// while Every waits (one run on demand) is retried RetryFailed after it,
// not when the long wait chosen before would have ended; a pass then goes
// back to the interval.
func TestSelfTesterEveryRetriesAFailureInBetween(t *testing.T) {
	clock := fakeclock.New(time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC))
	f := newFakeBox(t)
	st := NewSelfTester(Deps{Sandboxes: f, Guard: hostGuard(t), Inspect: f.inspect, HostAddrs: testHostAddrs,
		Egress: true, ProcRoot: f.proc, MaxOpenFiles: 4096, Now: clock.Now})
	if first := st.Run(context.Background()); !first.Passed {
		t.Fatalf("first run: %q", first.Reasons)
	}
	sl := &fakeSleeper{clock: clock, asked: make(chan time.Duration), pass: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { st.Every(ctx, DefaultSelfTestInterval, sl.sleep); close(done) }()
	defer func() { cancel(); <-done }()

	var waits []time.Duration
	waits = append(waits, sl.next(t)) // after the pass: the interval
	clock.Advance(time.Minute)
	f.failCreate = errors.New("bubblewrap failed")
	if res := st.Run(context.Background()); res.Passed { // on demand, a minute in
		t.Fatal("the run on demand passed")
	}
	waits = append(waits, sl.next(t)) // woken: the retry, from the failure
	sl.pass <- struct{}{}             // the retry runs, and fails again
	waits = append(waits, sl.next(t))
	f.failCreate = nil
	sl.pass <- struct{}{} // the retry passes
	waits = append(waits, sl.next(t))
	want := []time.Duration{DefaultSelfTestInterval, RetryFailed, RetryFailed, DefaultSelfTestInterval}
	if fmt.Sprint(waits) != fmt.Sprint(want) {
		t.Fatalf("waits %v, want %v", waits, want)
	}
	if last := st.Last(); last == nil || !last.Passed || !last.CheckedAt.Equal(clock.Now()) {
		t.Fatalf("last %+v at %v", last, clock.Now())
	}
}

// flakyBox fails its first Create: the runtime's failure, not a property's.
type flakyBox struct {
	*fakeBox
	calls int
}

func (f *flakyBox) Create(ctx context.Context, o sandbox.Options) (sandbox.Info, error) {
	f.calls++
	if f.calls == 1 {
		return sandbox.Info{}, errors.New("start sandbox: signal: killed")
	}
	return f.fakeBox.Create(ctx, o)
}

// TestResultJSON: a self-test's JSON (selftest --json) always holds every
// key the docs list, not_run as [] when every check ran.
func TestResultJSON(t *testing.T) {
	f := newFakeBox(t)
	res := SelfTest(context.Background(), Deps{Sandboxes: f, Guard: hostGuard(t), Inspect: f.inspect, HostAddrs: testHostAddrs,
		Egress: true, ProcRoot: f.proc, MaxOpenFiles: 4096})
	if !res.Passed {
		t.Fatalf("self-test: %q", res.Reasons)
	}
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]json.RawMessage
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"checks", "not_run", "reasons", "checked_at", "passed"} {
		if _, ok := got[k]; !ok {
			t.Errorf("%s has no %q", b, k)
		}
	}
	if string(got["not_run"]) != "[]" {
		t.Errorf("not_run is %s, want []", got["not_run"])
	}
}

func TestSelfTestRetriesWhenProbeDidNotRun(t *testing.T) {
	f := &flakyBox{fakeBox: newFakeBox(t)}
	res := SelfTest(context.Background(), Deps{Sandboxes: f, Guard: hostGuard(t), HostAddrs: testHostAddrs,
		Inspect: f.inspect, Egress: true, ProcRoot: f.proc})
	if !res.Passed || f.calls != 2 {
		t.Fatalf("passed %v after %d creates: %q", res.Passed, f.calls, res.Reasons)
	}
}
