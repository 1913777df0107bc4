package fakeclock

import (
	"testing"
	"time"
)

func TestClock(t *testing.T) {
	t0 := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	c := New(t0)
	if got := c.Now(); !got.Equal(t0) {
		t.Fatalf("Now = %v, want %v", got, t0)
	}
	c.Advance(1500 * time.Millisecond)
	if got := c.Now(); !got.Equal(t0.Add(1500 * time.Millisecond)) {
		t.Fatalf("after Advance, Now = %v", got)
	}
	c.Set(t0)
	if got := c.Now(); !got.Equal(t0) {
		t.Fatalf("after Set, Now = %v", got)
	}
}
