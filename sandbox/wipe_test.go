package sandbox

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"openvibe.network/agentsandbox/internal/testenv"
	"openvibe.network/agentsandbox/sandbox/cgroup"
)

// TestWipeVerifies proves that the wipe's verification can fail: a process
// of the slot's uid that escaped the cgroup (started here from the host, as
// a stand-in for any leak) makes the wipe unverified, names the process,
// and keeps the slot out of use.
func TestWipeVerifies(t *testing.T) {
	rt := newRuntime(t, Config{Capacity: 1})
	info, err := rt.Create(context.Background(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	leak := exec.Command("sleep", "300")
	uid := uint32(info.HostUID)
	leak.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid, Groups: []uint32{}}}
	if err := leak.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = leak.Process.Kill(); _ = leak.Wait() }()

	rep, err := rt.Delete(context.Background(), info.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := "process " + strconv.Itoa(leak.Process.Pid) + " of uid " + strconv.Itoa(info.HostUID)
	if rep.Verified || !strings.Contains(strings.Join(rep.Leftovers, "\n"), want) {
		t.Fatalf("wipe with a leaked process: verified %v, leftovers %q", rep.Verified, rep.Leftovers)
	}
	if b := rt.Broken(); len(b) != 1 || rt.Active() != 1 {
		t.Fatalf("broken %q active %d, want the slot kept out of use", b, rt.Active())
	}
	if _, err := rt.Create(context.Background(), Options{}); err == nil {
		t.Fatal("Create used the slot of an unverified wipe")
	}
	// Close reports nothing new (the sandbox is gone); the runtime dir and
	// uid lock go with it.
	_ = leak.Process.Kill()
}

// TestRemoveStale proves that a new runtime removes the directory of a
// runtime that ended without Close, and keeps a live one's.
func TestRemoveStale(t *testing.T) {
	testenv.RequireSandbox(t)
	state, err := os.MkdirTemp("/run", "codes-sandbox-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(state) })
	if err := os.Chmod(state, 0o755); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-2 * staleAge)
	for _, name := range []string{"rt-stale", "rt-live"} {
		if err := os.MkdirAll(filepath.Join(state, name, "abc"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	live, err := lockFile(filepath.Join(state, "rt-live", "lock"))
	if err != nil || live == nil {
		t.Fatalf("lock: %v", err)
	}
	defer live.Close()
	for _, name := range []string{"rt-stale", "rt-live"} {
		if err := os.Chtimes(filepath.Join(state, name), old, old); err != nil {
			t.Fatal(err)
		}
	}
	newRuntime(t, Config{Capacity: 1, StateDir: state})
	if _, err := os.Stat(filepath.Join(state, "rt-stale")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("stale runtime dir kept: %v", err)
	}
	if _, err := os.Stat(filepath.Join(state, "rt-live", "abc")); err != nil {
		t.Fatalf("live runtime dir removed: %v", err)
	}
}

// heldAttacher holds each sandbox's start in Attach until release is closed,
// then attaches as fakeAttacher does.
type heldAttacher struct {
	fakeAttacher
	attaching chan struct{} // one value per Attach, sent before it waits
	release   chan struct{}
}

func (h *heldAttacher) Attach(ctx context.Context, id, socketPath string, uid int) (func(), error) {
	h.attaching <- struct{}{}
	select {
	case <-h.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return h.fakeAttacher.Attach(ctx, id, socketPath, uid)
}

// TestCloseWaitsForStart proves that Close waits for a sandbox still
// starting: its Create fails, the sandbox is wiped, and only then are the
// uid and the runtime's files released.
func TestCloseWaitsForStart(t *testing.T) {
	testenv.RequireSandbox(t)
	att := &heldAttacher{
		fakeAttacher: fakeAttacher{attached: map[string]bool{}},
		attaching:    make(chan struct{}, 1),
		release:      make(chan struct{}),
	}
	rt, err := NewRuntime(Config{Capacity: 1, Egress: att})
	if err != nil {
		t.Fatalf("NewRuntime: %v", err)
	}
	uid := rt.slots[0].uid
	created := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		_, err := rt.Create(ctx, Options{Egress: true})
		created <- err
	}()
	<-att.attaching
	closed := make(chan error, 1)
	go func() { closed <- rt.Close() }()
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) while a sandbox was starting", err)
	case <-time.After(200 * time.Millisecond): // a correct Close cannot return before the release
	}
	close(att.release)
	if err := <-created; err == nil || !strings.Contains(err.Error(), "runtime is closed") {
		t.Fatalf("Create during Close: %v, want runtime is closed", err)
	}
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}
	if pids, err := uidProcesses(uid); err != nil || len(pids) > 0 {
		t.Fatalf("processes of uid %d left after Close: %v (%v)", uid, pids, err)
	}
	if _, err := os.Stat(rt.dir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("runtime dir %s left after Close (%v)", rt.dir, err)
	}
	if len(att.attached) != 0 {
		t.Fatalf("egress still attached after Close: %v", att.attached)
	}
}

// TestRemoveStaleGroups proves that a new runtime removes an old, empty
// cgroup left by a crashed worker, and keeps a young one and one that still
// has a process.
func TestRemoveStaleGroups(t *testing.T) {
	testenv.RequireSandbox(t)
	cg, err := cgroup.Detect()
	if err != nil {
		t.Fatal(err)
	}
	suffix := strconv.Itoa(os.Getpid())
	mk := func(name string, age time.Duration) *cgroup.Group {
		g, err := cg.Create(name+suffix, cgroup.Limits{Pids: 8})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = g.Kill(context.Background())
			_ = g.Remove()
		})
		then := time.Now().Add(-age)
		for _, p := range g.Paths() {
			if err := os.Chtimes(p, then, then); err != nil {
				t.Fatal(err)
			}
		}
		return g
	}
	stale := mk("stale-", 2*staleAge)
	young := mk("young-", 0)
	busy := mk("busy-", 2*staleAge)
	sleep := exec.Command("sleep", "60")
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sleep.Process.Kill(); _ = sleep.Wait() })
	if err := busy.Enter(sleep.Process.Pid); err != nil {
		t.Fatal(err)
	}
	newRuntime(t, Config{Capacity: 1})
	for _, tc := range []struct {
		name string
		g    *cgroup.Group
		want bool
	}{
		{"StaleRemoved", stale, false},
		{"YoungKept", young, true},
		{"BusyKept", busy, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.g.Exists(); got != tc.want {
				t.Fatalf("exists = %v, want %v", got, tc.want)
			}
		})
	}
}
