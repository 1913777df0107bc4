package sandbox

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"openvibe.network/agentsandbox"
	"openvibe.network/agentsandbox/internal/cdp"
	"openvibe.network/agentsandbox/sandbox/control"
)

// pooledOf returns the ids of the sandboxes waiting in pool pi.
func pooledOf(rt *Runtime, pi int) []string {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	var ids []string
	for _, b := range rt.pool {
		if b.poolIndex == pi {
			ids = append(ids, b.id)
		}
	}
	return ids
}

// waitPooledOf waits until pool pi holds one sandbox other than not, and
// returns its id.
func waitPooledOf(tb testing.TB, rt *Runtime, pi int, not string) string {
	tb.Helper()
	for deadline := time.Now().Add(testTimeout); ; time.Sleep(5 * time.Millisecond) {
		if ids := pooledOf(rt, pi); len(ids) == 1 && ids[0] != not {
			return ids[0]
		}
		if time.Now().After(deadline) {
			tb.Fatalf("pool %d holds %v, want one sandbox other than %q", pi, pooledOf(rt, pi), not)
		}
	}
}

// pooledMemory is the memory charged to the cgroup of pooled sandbox id.
func pooledMemory(tb testing.TB, rt *Runtime, id string) int64 {
	tb.Helper()
	rt.mu.Lock()
	var b *sandboxState
	for _, p := range rt.pool {
		if p.id == id {
			b = p
		}
	}
	rt.mu.Unlock()
	if b == nil {
		tb.Fatalf("%s is not pooled", id)
	}
	u, err := b.group.Usage()
	if err != nil {
		tb.Fatal(err)
	}
	return u.MemoryBytes
}

// browserProcess returns sandbox id's Chromium from its process table.
func browserProcess(tb testing.TB, rt *Runtime, id string) (Process, bool) {
	tb.Helper()
	procs, err := rt.Processes(context.Background(), id)
	if err != nil {
		tb.Fatal(err)
	}
	for _, p := range procs {
		if len(p.Argv) > 0 && p.Argv[0] == rt.cfg.Browser && p.Running {
			return p, true
		}
	}
	return Process{}, false
}

// TestPoolBrowser: the browser pool keeps a sandbox whose Chromium runs
// before any Create (its memory charged to the sandbox's cgroup); a Create
// without a browser never takes it, one with a browser does and its first
// connection loads a page served on the sandbox's loopback; the pool
// refills in the freed slot with a fresh profile (nothing the last tenant
// left in its profile); a browser Create with an environment, which the
// pooled Chromium did not start with, gets a cold sandbox; the pools count
// as free capacity.
func TestPoolBrowser(t *testing.T) {
	rt := newRuntime(t, Config{Capacity: 2, Pool: 1, PoolBrowser: 1, Browser: requireBrowser(t)})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	plain := waitPooledOf(t, rt, poolHost, "")
	warm := waitPooledOf(t, rt, poolBrowser, "")
	if rt.Active() != 0 || rt.Pooled() != 2 || len(rt.List()) != 0 {
		t.Fatalf("pooled sandboxes counted as in use: active %d pooled %d list %v", rt.Active(), rt.Pooled(), rt.List())
	}
	// Chromium's memory is the pooled sandbox's, not the worker's.
	if b, p := pooledMemory(t, rt, warm), pooledMemory(t, rt, plain); b < p+30<<20 {
		t.Errorf("the pooled browser sandbox's cgroup holds %d MiB, a plain one's %d: Chromium is not charged to it", b>>20, p>>20)
	}

	// A Create without a browser takes the plain pooled sandbox.
	other := newBox(t, rt, Options{})
	if other.ID != plain || other.Browser {
		t.Fatalf("a Create without a browser got %s (browser %v), want the plain pooled %s", other.ID, other.Browser, plain)
	}
	if _, ok := browserProcess(t, rt, other.ID); ok {
		t.Fatalf("a sandbox created without a browser runs Chromium")
	}
	if ids := pooledOf(rt, poolBrowser); len(ids) != 1 || ids[0] != warm {
		t.Fatalf("the browser pool holds %v after a plain Create, want [%s]", ids, warm)
	}
	if _, err := rt.Delete(ctx, other.ID); err != nil {
		t.Fatal(err)
	}

	info := newBox(t, rt, Options{Browser: true, Limits: agentsandbox.Limits{MemoryMB: 1024}})
	if info.ID != warm || !info.Browser {
		t.Fatalf("a browser Create got %s (browser %v), want the pooled %s", info.ID, info.Browser, warm)
	}
	proc, ok := browserProcess(t, rt, info.ID)
	if !ok || time.Unix(0, proc.Started).After(info.CreatedAt) {
		t.Fatalf("the pooled sandbox's Chromium did not run before the Create (%+v, created %v)", proc, info.CreatedAt)
	}
	if rt.Active() != 1 {
		t.Errorf("active %d after taking the pooled browser sandbox, want 1", rt.Active())
	}
	navigate(t, rt, info.ID, "page of tenant A")
	if proc2, _ := browserProcess(t, rt, info.ID); proc2.Pid != proc.Pid {
		t.Errorf("the first connection started another Chromium (pid %d, the pooled one %d)", proc2.Pid, proc.Pid)
	}
	// What a tenant leaves in its profile goes with its sandbox.
	shOK(t, rt, info.ID, "echo secret > "+BrowserProfile+"/tenant-a; ls "+BrowserProfile+"/Default >/dev/null")
	if _, err := rt.Delete(ctx, info.ID); err != nil {
		t.Fatal(err)
	}

	// The pool refills (a plain one first: both take the freed slots).
	next := waitPooledOf(t, rt, poolBrowser, warm)
	fresh := newBox(t, rt, Options{Browser: true})
	if fresh.ID != next {
		t.Fatalf("the second browser Create got %s, want the refilled %s", fresh.ID, next)
	}
	if out := shOK(t, rt, fresh.ID, "ls -A "+BrowserProfile+"; cat "+BrowserProfile+"/tenant-a 2>&1 || true"); strings.Contains(out, "secret") ||
		!strings.Contains(out, "Default") || !strings.Contains(out, "No such file") {
		t.Fatalf("the refilled browser sandbox's profile is not fresh and its own:\n%s", out)
	}
	navigate(t, rt, fresh.ID, "page of tenant B")

	// A browser Create with an environment: cold, in the slot of the plain
	// pooled sandbox it evicts.
	waitPooledOf(t, rt, poolHost, "")
	cold := newBox(t, rt, Options{Browser: true, Env: map[string]string{"TZ": "UTC"}})
	if cold.ID == next || !cold.Browser {
		t.Fatalf("a browser Create with an environment got %+v", cold)
	}
	if _, ok := browserProcess(t, rt, cold.ID); ok {
		t.Fatalf("a cold browser sandbox runs Chromium before its first connection")
	}
	if rt.Pooled() != 0 || rt.Active() != 2 {
		t.Fatalf("pooled %d active %d with both slots in use, want 0 and 2", rt.Pooled(), rt.Active())
	}
	if _, err := rt.Create(ctx, Options{Browser: true}); !errors.Is(err, ErrCapacity) {
		t.Fatalf("a third Create on two slots: %v", err)
	}
}

// TestPoolBrowserSelfTest: on a runtime with a browser pool, the
// self-test's browser sandbox (never pooled: its egress policy is its own)
// has its Chromium started the pool's way before Create returns, so that
// the self-test's browser check proves a browser started ahead; without a
// browser pool it starts at the first connection, as tenants' do.
func TestPoolBrowserSelfTest(t *testing.T) {
	for _, tc := range []struct {
		name    string
		pool    int
		running bool
	}{{"BrowserPool", 1, true}, {"NoBrowserPool", 0, false}} {
		t.Run(tc.name, func(t *testing.T) {
			rt := newRuntime(t, Config{Capacity: 1, SelfTestSlot: true, PoolBrowser: tc.pool, Browser: requireBrowser(t)})
			view := rt.SelfTest()
			info := newBox(t, view, Options{Browser: true, SelfTest: true})
			if _, running := browserProcess(t, view, info.ID); running != tc.running {
				t.Fatalf("Chromium running at create: %v, want %v", running, tc.running)
			}
			navigate(t, view, info.ID, "the self-test's page")
		})
	}
}

// navigate loads a page served on sandbox id's loopback (by the init's
// page server, with text) in its browser and checks its text.
func navigate(tb testing.TB, rt *Runtime, id, text string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if _, err := rt.Start(ctx, id, agentsandbox.ExecRequest{Argv: []string{control.InitPath, control.ServeMarker, "127.0.0.1:8000", text}}); err != nil {
		tb.Fatalf("start the page server: %v", err)
	}
	bc, err := rt.Browser(ctx, id)
	if err != nil {
		tb.Fatalf("Browser: %v", err)
	}
	defer bc.Close()
	page, err := cdp.New(bc).FirstPage()
	if err != nil {
		tb.Fatalf("FirstPage: %v", err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) { // the server may still be starting
		errText, err := page.Navigate("http://127.0.0.1:8000/")
		if err != nil {
			tb.Fatalf("Navigate: %v", err)
		}
		if errText == "" {
			break
		}
		if time.Now().After(deadline) {
			tb.Fatalf("the page did not load: %s", errText)
		}
	}
	if got, err := page.Text(); err != nil || got != text {
		tb.Fatalf("the page's text %q (%v), want %q", got, err, text)
	}
}

// TestPoolConfig: the pools' sizes are checked against the capacity, each
// and together, and a browser pool needs a browser; errors say what to
// give.
func TestPoolConfig(t *testing.T) {
	chromium := FindBrowser()
	if chromium == "" {
		chromium = "/usr/bin/env" // any program under /usr passes the path's check
	}
	for _, tc := range []struct {
		name    string
		cfg     Config
		wantErr string
	}{
		{"OK", Config{Capacity: 3, Pool: 1, PoolBrowser: 2, Browser: chromium}, ""},
		{"BrowserAlone", Config{Capacity: 2, PoolBrowser: 2, Browser: chromium}, ""},
		{"Negative", Config{Capacity: 2, PoolBrowser: -1, Browser: chromium}, "new runtime: browser pool -1 is not in 0..2 (the capacity)"},
		{"OverCapacity", Config{Capacity: 2, PoolBrowser: 3, Browser: chromium}, "new runtime: browser pool 3 is not in 0..2 (the capacity)"},
		{"Together", Config{Capacity: 2, Pool: 1, PoolBrowser: 2, Browser: chromium},
			"new runtime: the pools hold 3 sandboxes (1 + 2 browser + 0 of images), more than the capacity (2)"},
		{"NoBrowser", Config{Capacity: 2, PoolBrowser: 1},
			"new runtime: a browser pool of 1 needs Config.Browser (Chromium's binary); give it or a browser pool of 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Bwrap = "/bin/true"
			err := tc.cfg.defaults()
			if got := errString(err); got != tc.wantErr {
				t.Fatalf("defaults() = %q, want %q", got, tc.wantErr)
			}
		})
	}
}

// errString is err's text, "" for nil.
func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
