package sandbox

import (
	"context"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
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
