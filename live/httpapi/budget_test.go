package httpapi

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestBudget: a budget ends as context.WithDeadline's context does (at its
// deadline, with its parent, when cancelled), whether or not its Done
// channel was asked for first.
func TestBudget(t *testing.T) {
	closed := func(ch <-chan struct{}) bool {
		select {
		case <-ch:
			return true
		case <-time.After(2 * time.Second):
			return false
		}
	}
	t.Run("DeadlineWithDone", func(t *testing.T) {
		ctx := withBudget(context.Background(), 50*time.Millisecond)
		cancel := ctx.cancel
		defer cancel()
		if ctx.Err() != nil {
			t.Fatal("ended at once")
		}
		if !closed(ctx.Done()) || !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			t.Fatalf("Done not closed at the deadline, or Err %v", ctx.Err())
		}
	})
	t.Run("DeadlineWithoutDone", func(t *testing.T) {
		ctx := withBudget(context.Background(), 20*time.Millisecond)
		cancel := ctx.cancel
		defer cancel()
		time.Sleep(40 * time.Millisecond)
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) || !closed(ctx.Done()) {
			t.Fatalf("Err %v after the deadline, or Done not closed", ctx.Err())
		}
	})
	t.Run("Parent", func(t *testing.T) {
		type key struct{}
		parent, stop := context.WithCancel(context.WithValue(context.Background(), key{}, "v"))
		ctx := withBudget(parent, time.Hour)
		cancel := ctx.cancel
		defer cancel()
		done := ctx.Done()
		stop()
		if !closed(done) || !errors.Is(ctx.Err(), context.Canceled) || ctx.Value(key{}) != "v" {
			t.Fatalf("the parent's end: Err %v", ctx.Err())
		}
		ctx2 := withBudget(parent, time.Hour)
		cancel2 := ctx2.cancel
		defer cancel2()
		if !errors.Is(ctx2.Err(), context.Canceled) || !closed(ctx2.Done()) {
			t.Fatal("a budget of an ended parent has not ended")
		}
	})
	t.Run("EarlierParentDeadline", func(t *testing.T) {
		parent, stop := context.WithTimeout(context.Background(), time.Minute)
		defer stop()
		ctx := withBudget(parent, time.Hour)
		cancel := ctx.cancel
		defer cancel()
		if d, _ := ctx.Deadline(); d.After(time.Now().Add(time.Minute)) {
			t.Fatalf("deadline %v is after the parent's", d)
		}
	})
	t.Run("Cancel", func(t *testing.T) {
		ctx := withBudget(context.Background(), time.Hour)
		cancel := ctx.cancel
		done := ctx.Done()
		cancel()
		if !closed(done) || !errors.Is(ctx.Err(), context.Canceled) {
			t.Fatalf("after cancel: Err %v", ctx.Err())
		}
	})
}
