package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"openvibe.network/agentsandbox"
)

// TestLimits proves that each limit ends what exceeds it, names the limit,
// and leaves the worker (this process) and the runtime working.
func TestLimits(t *testing.T) {
	rt := newRuntime(t, Config{Capacity: 1})

	t.Run("Pids", func(t *testing.T) {
		info := newBox(t, rt, Options{Limits: agentsandbox.Limits{Pids: 32}})
		r := sh(t, rt, info.ID, "i=0; while [ $i -lt 200 ]; do sleep 60 & i=$((i+1)); done; wait")
		if r.ExitCode == 0 || r.Reason != "pids" {
			t.Fatalf("fork loop: exit %d reason %q, stderr %q", r.ExitCode, r.Reason, r.stderr)
		}
		pids, err := rt.HostPids(info.ID)
		if err != nil || len(pids) > 32 {
			t.Fatalf("%d processes in the sandbox, limit 32 (%v)", len(pids), err)
		}
		// Free the pids (the sleeps hold them all) from the host; then the
		// init, which lived through the loop, runs commands again.
		sleeps := 0
		for _, pid := range pids {
			if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); string(comm) == "sleep\n" {
				_ = syscall.Kill(pid, syscall.SIGKILL)
				sleeps++
			}
		}
		// The init reaps them in its own time: wait until the group has
		// room again (bounded), then ask.
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if now, err := rt.HostPids(info.ID); err == nil && len(now) <= len(pids)-sleeps {
				break
			}
		}
		if out := shOK(t, rt, info.ID, "echo alive"); out != "alive\n" {
			t.Fatalf("the sandbox's init did not survive the fork loop: %q", out)
		}
	})
	t.Run("Memory", func(t *testing.T) {
		info := newBox(t, rt, Options{Limits: agentsandbox.Limits{MemoryMB: 64}})
		r := run(t, rt, info.ID, agentsandbox.ExecRequest{Argv: []string{"python3", "-c", "x = b'a' * (512 << 20); print('allocated')"}})
		if r.ExitCode != 137 || r.Reason != "memory" || strings.Contains(r.stdout, "allocated") {
			t.Fatalf("allocation past the limit: exit %d reason %q stdout %q stderr %q", r.ExitCode, r.Reason, r.stdout, r.stderr)
		}
		if out := shOK(t, rt, info.ID, "echo alive"); out != "alive\n" {
			t.Fatalf("the sandbox's init did not survive: %q", out)
		}
	})
	t.Run("Disk", func(t *testing.T) {
		info := newBox(t, rt, Options{Limits: agentsandbox.Limits{DiskMB: 8}})
		r := sh(t, rt, info.ID, "dd if=/dev/zero of=/workspace/big bs=1M count=32")
		if r.ExitCode == 0 || !strings.Contains(r.stderr, "No space left on device") {
			t.Fatalf("write past the disk cap: exit %d stderr %q", r.ExitCode, r.stderr)
		}
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		err := rt.PutFile(ctx, info.ID, "big2", bytes.NewReader(make([]byte, 16<<20)), 0)
		if !errors.Is(err, ErrNoSpace) {
			t.Fatalf("PutFile past the disk cap: %v", err)
		}
	})
	t.Run("ExecTimeout", func(t *testing.T) {
		info := newBox(t, rt, Options{})
		r := run(t, rt, info.ID, agentsandbox.ExecRequest{Argv: []string{"sh", "-c", "sleep 60 & sleep 60"}, Timeout: 300 * time.Millisecond})
		if r.ExitCode != 137 || r.Reason != "timeout" {
			t.Fatalf("timeout: exit %d reason %q", r.ExitCode, r.Reason)
		}
		if out := shOK(t, rt, info.ID, "pgrep -c sleep || true"); strings.TrimSpace(out) != "0" {
			t.Fatalf("the command's group survived its timeout: %q sleeps", out)
		}
	})
	t.Run("TimeBox", func(t *testing.T) {
		const timeBox = 2 * time.Second
		info := newBox(t, rt, Options{TimeBox: timeBox})
		start := time.Now()
		r := run(t, rt, info.ID, agentsandbox.ExecRequest{Argv: []string{"sleep", "60"}})
		took := time.Since(start)
		if r.ExitCode != 137 || r.Reason != "time_box" {
			t.Fatalf("time box: exit %d reason %q", r.ExitCode, r.Reason)
		}
		if took < timeBox-100*time.Millisecond || took > 40*time.Second {
			t.Fatalf("the time box of %v ended the sleep after %v", timeBox, took)
		}
		if _, err := rt.Exec(context.Background(), info.ID, agentsandbox.ExecRequest{Argv: []string{"true"}}, nil, nil); !errors.Is(err, ErrNotFound) {
			t.Fatalf("exec after the time box: %v, want ErrNotFound", err)
		}
		if rt.Active() != 0 {
			t.Fatalf("active %d after the time box", rt.Active())
		}
	})
	// The worker survived all of the above: the runtime still runs sandboxes.
	info := newBox(t, rt, Options{})
	if out := shOK(t, rt, info.ID, "echo ok"); out != "ok\n" {
		t.Fatalf("after the limits: %q", out)
	}
}
