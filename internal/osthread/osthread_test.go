package osthread

import (
	"errors"
	"os"
	"strconv"
	"syscall"
	"testing"
)

// TestRun: f runs on a locked thread; its error is returned; a thread f
// reports clean is reused, one it does not is kept alive and never runs
// anything else.
func TestRun(t *testing.T) {
	failed := errors.New("f failed")
	var dirty int
	if err := Run(func() (bool, error) { dirty = syscall.Gettid(); return false, failed }); !errors.Is(err, failed) {
		t.Fatalf("Run = %v, want f's error", err)
	}
	for range 200 {
		if err := Run(func() (bool, error) {
			if syscall.Gettid() == dirty {
				return true, errors.New("ran on the thread left dirty")
			}
			return true, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat("/proc/self/task/" + strconv.Itoa(dirty)); err != nil {
		t.Fatalf("the thread left dirty ended: %v", err)
	}
}
