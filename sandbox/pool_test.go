package sandbox

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"openvibe.network/agentsandbox"
)

// waitPooled waits until the runtime has n sandboxes in its pool and
// returns their ids.
func waitPooled(tb testing.TB, rt *Runtime, n int) []string {
	tb.Helper()
	deadline := time.Now().Add(testTimeout)
	for {
		rt.mu.Lock()
		var ids []string
		for _, b := range rt.pool {
			ids = append(ids, b.id)
		}
		rt.mu.Unlock()
		if len(ids) == n {
			return ids
		}
		if time.Now().After(deadline) {
			tb.Fatalf("the pool holds %d sandboxes, want %d", len(ids), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestPool: a Create takes a pooled sandbox and gives it its own limits and
// environment; the pool refills; a pooled sandbox counts as free capacity
// and is evicted for a Create it cannot serve; Close wipes it.
func TestPool(t *testing.T) {
	rt := newRuntime(t, Config{Capacity: 1, Pool: 1})
	pooled := waitPooled(t, rt, 1)
	if rt.Active() != 0 || len(rt.List()) != 0 || rt.Pooled() != 1 {
		t.Fatalf("a pooled sandbox is counted as in use: active %d list %v", rt.Active(), rt.List())
	}
	info := newBox(t, rt, Options{Env: map[string]string{"GIVEN": "yes"}, Limits: agentsandbox.Limits{DiskMB: 32, MemoryMB: 300}})
	if info.ID != pooled[0] {
		t.Fatalf("Create made %s, want the pooled %s", info.ID, pooled[0])
	}
	out := shOK(t, rt, info.ID, "echo $GIVEN; df -k /workspace | tail -1 | awk '{print $2}'")
	if out != "yes\n32768\n" {
		t.Fatalf("the pooled sandbox has not its env and disk limit: %q", out)
	}
	b := mustBox(t, rt, info.ID)
	mem, err := os.ReadFile(filepath.Join(b.group.Paths()[0], memoryLimitFile(t, b.group.Paths()[0])))
	if err != nil || strings.TrimSpace(string(mem)) != "314572800" {
		t.Fatalf("memory limit %q %v, want 300 MiB", mem, err)
	}
	if _, err := rt.Delete(context.Background(), info.ID); err != nil {
		t.Fatal(err)
	}
	// Right after the delete the filler is starting the next pooled
	// sandbox in the only slot: a Create waits for it, it is not refused.
	next, err := rt.Create(context.Background(), Options{})
	if err != nil {
		t.Fatalf("a Create while the pool refills the only slot: %v", err)
	}
	if _, err := rt.Delete(context.Background(), next.ID); err != nil {
		t.Fatal(err)
	}
	again := waitPooled(t, rt, 1)
	// A Create the pool cannot serve (egress differs) evicts the pooled
	// sandbox for its slot.
	att := &fakeAttacher{attached: map[string]bool{}}
	rt.cfg.Egress = att
	egressBox := newBox(t, rt, Options{Egress: true})
	if egressBox.ID == again[0] || !egressBox.Egress {
		t.Fatalf("an egress sandbox came from the egress-less pool: %+v", egressBox)
	}
	if _, err := rt.Create(context.Background(), Options{}); !errors.Is(err, ErrCapacity) {
		t.Fatalf("a second Create on one slot: %v", err)
	}
}

func memoryLimitFile(tb testing.TB, dir string) string {
	tb.Helper()
	for _, f := range []string{"memory.max", "memory.limit_in_bytes"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			return f
		}
	}
	tb.Fatalf("no memory limit file in %s", dir)
	return ""
}

// TestPoolableEgress: a pooled sandbox serves only a Create whose egress is
// the pool's: public with no rules of its own (it was attached with the
// default policy), never one with a policy of its own.
func TestPoolableEgress(t *testing.T) {
	allow := agentsandbox.EgressPolicy{Mode: agentsandbox.EgressAllow, Allow: agentsandbox.EgressHosts("pypi.org")}
	deny := agentsandbox.EgressPolicy{Mode: agentsandbox.EgressPublic, Deny: []string{"evil.example"}}
	for _, tc := range []struct {
		name string
		cfg  Config
		opts Options
		want bool
	}{
		{"OKPublicZero", Config{Pool: 1, PoolEgress: true}, Options{Egress: true}, true},
		{"OKPublicNamed", Config{Pool: 1, PoolEgress: true}, Options{Egress: true, EgressPolicy: agentsandbox.EgressPolicy{Mode: "public"}}, true},
		{"OKNoEgressPool", Config{Pool: 1}, Options{}, true},
		{"AllowList", Config{Pool: 1, PoolEgress: true}, Options{Egress: true, EgressPolicy: allow}, false},
		{"DenyList", Config{Pool: 1, PoolEgress: true}, Options{Egress: true, EgressPolicy: deny}, false},
		{"NoEgressFromEgressPool", Config{Pool: 1, PoolEgress: true}, Options{}, false},
		{"SelfTest", Config{Pool: 1, PoolEgress: true}, Options{Egress: true, SelfTest: true}, false},
		{"NoPool", Config{PoolEgress: true}, Options{Egress: true}, false},
		{"Browser", Config{PoolBrowser: 1}, Options{Browser: true}, true},
		{"BrowserEgress", Config{PoolBrowser: 1, PoolEgress: true}, Options{Browser: true, Egress: true}, true},
		{"BrowserWithEnv", Config{PoolBrowser: 1}, Options{Browser: true, Env: map[string]string{"TZ": "UTC"}}, false},
		{"PlainWithEnv", Config{Pool: 1}, Options{Env: map[string]string{"TZ": "UTC"}}, true},
		{"BrowserAllowList", Config{PoolBrowser: 1, PoolEgress: true}, Options{Browser: true, Egress: true, EgressPolicy: allow}, false},
		{"BrowserSelfTest", Config{PoolBrowser: 1}, Options{Browser: true, SelfTest: true}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := (&Runtime{core: &core{cfg: tc.cfg}}).poolable(tc.opts); got != tc.want {
				t.Fatalf("poolable = %v, want %v", got, tc.want)
			}
		})
	}
}
