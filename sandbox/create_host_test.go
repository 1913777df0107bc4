package sandbox

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// TestCreateOnAnUnfitHost: while the host cannot run sandboxes
// (Config.HostProblems) every create, the self-test's too, fails with
// ErrHost naming each problem, and no bubblewrap is started.
func TestCreateOnAnUnfitHost(t *testing.T) {
	problems := []string{"the worker lacks CAP_SYS_ADMIN (…): add it", "/proc is masked (…): unmask it"}
	rt := newRuntime(t, Config{Capacity: 1, SelfTestSlot: true, Pool: 1, HostProblems: problems})
	for _, r := range []*Runtime{rt, rt.SelfTest()} {
		_, err := r.Create(context.Background(), Options{SelfTest: r != rt})
		if !errors.Is(err, ErrHost) || !strings.Contains(err.Error(), strings.Join(problems, "; ")) {
			t.Errorf("create: %v, want ErrHost naming %q", err, problems)
		}
	}
	if n := rt.Active(); n != 0 {
		t.Errorf("%d sandboxes active", n)
	}
}
