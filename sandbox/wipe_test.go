package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"openvibe.network/agentsandbox/internal/testenv"
)

// TestWipeVerifies proves that the wipe's verification can fail: a process
// of the slot's uid that escaped the cgroup (started here from the host, as
// a stand-in for any leak) makes the wipe unverified, names the process,
// and keeps the slot out of use.
func TestWipeVerifies(t *testing.T) {
	for _, v := range views() {
		t.Run(v.name, func(t *testing.T) { testWipeVerifies(t, v) })
	}
}

func testWipeVerifies(t *testing.T, v view) {
	rt := v.runtime(t, Config{Capacity: 1})
	info, err := rt.Create(context.Background(), v.options(t, Options{}))
	if err != nil {
		t.Fatal(err)
	}
	leak := exec.Command("sleep", "300")
	uid := uint32(info.HostUID)
	leak.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid, Groups: []uint32{}}}
	if err := leak.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = leak.Process.Kill() }()

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
	if _, err := rt.Create(context.Background(), v.options(t, Options{})); err == nil {
		t.Fatal("Create used the slot of an unverified wipe")
	}
	if b := rt.Broken(); !strings.Contains(b[0], "slot 0") || !strings.Contains(b[0], "could not be verified") {
		t.Fatalf("broken %q does not say which slot and why", b)
	}
	// Once the leak is gone, the janitor finds nothing left and puts the
	// slot back in use.
	_ = leak.Process.Kill()
	_ = leak.Wait()
	deadline := time.Now().Add(4 * janitorInterval)
	for len(rt.Broken()) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the slot is still out of use after the leak ended: %q", rt.Broken())
		}
		time.Sleep(50 * time.Millisecond)
	}
	newBox(t, rt, v.options(t, Options{}))
}

// heldAttacher holds each sandbox's start in Attach until release is closed,
// then attaches as fakeAttacher does.
type heldAttacher struct {
	fakeAttacher
	attaching chan struct{} // one value per Attach, sent before it waits
	release   chan struct{}
}

func (h *heldAttacher) Attach(ctx context.Context, id, tempPath string, uid int, opts AttachOptions) (*os.File, func(), error) {
	h.attaching <- struct{}{}
	select {
	case <-h.release:
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
	return h.fakeAttacher.Attach(ctx, id, tempPath, uid, opts)
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

// TestOnWipe: the hook hears of every wipe, with its reason and report.
func TestOnWipe(t *testing.T) {
	var mu sync.Mutex
	var heard []string
	rt := newRuntime(t, Config{Capacity: 1, OnWipe: func(reason string, rep WipeReport) {
		mu.Lock()
		defer mu.Unlock()
		heard = append(heard, fmt.Sprintf("%s verified=%v", reason, rep.Verified))
	}})
	info := newBox(t, rt, Options{})
	if _, err := rt.Delete(context.Background(), info.ID); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"deleted verified=true"}; !slices.Equal(heard, want) {
		t.Fatalf("heard %q, want %q", heard, want)
	}
}

// TestWipeUnmountsWhatElseIsMounted: a wipe unmounts the sandbox's own file
// systems without reading the mount table, and reads it only when
// something else is mounted in the sandbox's host directory; then it
// unmounts that too, and the wipe still verifies.
func TestWipeUnmountsWhatElseIsMounted(t *testing.T) {
	rt := newRuntime(t, Config{Capacity: 1})
	info, err := rt.Create(context.Background(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	dir := rt.boxPath(info.ID)
	for _, p := range []string{dir + "/extra", dir + "/" + boxFS + "/workspace"} {
		if err := os.MkdirAll(p, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Mount("tmpfs", p, "tmpfs", 0, "size=1m"); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := rt.Delete(context.Background(), info.ID)
	if err != nil || !rep.Verified {
		t.Fatalf("Delete: %v, verified %v, leftovers %q; want a verified wipe", err, rep.Verified, rep.Leftovers)
	}
	if mounts, err := mountsUnder(dir); err != nil || len(mounts) > 0 {
		t.Fatalf("mounts left under %s: %q (%v)", dir, mounts, err)
	}
	if _, err := os.Lstat(dir); !os.IsNotExist(err) {
		t.Fatalf("%s is left: %v", dir, err)
	}
}
