package worker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"openvibe.network/agentsandbox/egress"
	"openvibe.network/agentsandbox/sandbox"
)

func TestSelfTesterKeepsLastWhenBusy(t *testing.T) {
	f := newFakeBox(t)
	st := NewSelfTester(Deps{Sandboxes: f, Guard: egress.NewGuard(egress.GuardConfig{}), Inspect: f.inspect,
		Egress: true, ProcRoot: f.proc})
	if st.Last() != nil {
		t.Fatal("a result before any run")
	}
	first := st.Run(context.Background())
	if !first.Passed {
		t.Fatalf("first run: %q", first.Reasons)
	}
	f.failCreate = fmt.Errorf("create sandbox: %w", sandbox.ErrCapacity)
	if got := st.Run(context.Background()); !got.Passed || !got.CheckedAt.Equal(first.CheckedAt) {
		t.Errorf("busy run replaced the last result: %+v", got)
	}
	f.failCreate = fmt.Errorf("create sandbox: bubblewrap failed")
	if got := st.Run(context.Background()); got.Passed || st.Last().Passed {
		t.Errorf("a broken runtime must replace the last result: %+v", got)
	}
}

func TestSelfTesterEvery(t *testing.T) {
	f := newFakeBox(t)
	st := NewSelfTester(Deps{Sandboxes: f, Guard: egress.NewGuard(egress.GuardConfig{}), Inspect: f.inspect,
		Egress: true, ProcRoot: f.proc})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n := 0
	st.Every(ctx, DefaultSelfTestInterval, func(ctx context.Context, d time.Duration) error {
		if d != DefaultSelfTestInterval {
			t.Errorf("interval %v", d)
		}
		n++
		if n == 3 {
			cancel()
			return ctx.Err()
		}
		return nil
	})
	if st.Last() == nil || n != 3 {
		t.Fatalf("ran %d sleeps, last %v", n, st.Last())
	}
}
