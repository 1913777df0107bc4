package worker

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"openvibe.network/agentsandbox"
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
	if got.Passed || st.Last().Passed || len(st.Last().NotRun) != len(agentsandbox.Checks()) {
		t.Errorf("a run that could not create its sandbox did not replace the last result: %+v", got)
	}
}

func TestSelfTesterEvery(t *testing.T) {
	f := newFakeBox(t)
	st := NewSelfTester(Deps{Sandboxes: f, Guard: hostGuard(t), Inspect: f.inspect, HostAddrs: testHostAddrs,
		Egress: true, ProcRoot: f.proc, MaxOpenFiles: 4096})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var waits []time.Duration
	st.Every(ctx, DefaultSelfTestInterval, func(ctx context.Context, d time.Duration) error {
		waits = append(waits, d)
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

func TestSelfTestRetriesWhenProbeDidNotRun(t *testing.T) {
	f := &flakyBox{fakeBox: newFakeBox(t)}
	res := SelfTest(context.Background(), Deps{Sandboxes: f, Guard: hostGuard(t), HostAddrs: testHostAddrs,
		Inspect: f.inspect, Egress: true, ProcRoot: f.proc})
	if !res.Passed || f.calls != 2 {
		t.Fatalf("passed %v after %d creates: %q", res.Passed, f.calls, res.Reasons)
	}
}
