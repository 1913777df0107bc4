package sandbox

import (
	"errors"
	"strings"
	"testing"
	"time"

	"openvibe.network/agentsandbox"
)

// TestUsageMoves: the numbers of Usage follow what the sandbox does: memory
// it allocates, CPU it burns, files it writes, tasks it keeps.
func TestUsageMoves(t *testing.T) {
	rt := newRuntime(t, Config{Capacity: 1})
	id := newBox(t, rt, Options{Limits: agentsandbox.Limits{MemoryMB: 256, DiskMB: 64}}).ID
	before, err := rt.Usage(id)
	if err != nil {
		t.Fatal(err)
	}
	// 32 MiB in the workspace (charged as memory too), a busy second, and
	// a sleep left running.
	shOK(t, rt, id, `head -c 33554432 /dev/zero > /workspace/blob; python3 -c '
import time
t = time.process_time()
while time.process_time() - t < 0.3: pass'`)
	if _, err := rt.Start(t.Context(), id, agentsandbox.ExecRequest{Argv: []string{"sleep", "300"}}); err != nil {
		t.Fatal(err)
	}
	after, err := rt.Usage(id)
	if err != nil {
		t.Fatal(err)
	}
	const blob = 32 << 20
	for _, c := range []struct {
		what string
		ok   bool
	}{
		{"workspace_bytes grew by the 32 MiB written", after.WorkspaceBytes-before.WorkspaceBytes >= blob},
		{"memory_bytes grew by the file's pages", after.MemoryBytes-before.MemoryBytes >= blob/2},
		{"memory_peak_bytes is at least memory_bytes", after.MemoryPeakBytes >= after.MemoryBytes},
		{"cpu_seconds grew by the busy loop", after.CPUSeconds-before.CPUSeconds >= 0.25},
		{"pids counts the sleep", after.Pids > before.Pids},
	} {
		if !c.ok {
			t.Errorf("%s: before %+v, after %+v", c.what, before, after)
		}
	}
	if _, err := rt.Usage("nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Usage of an unknown sandbox: %v, want ErrNotFound", err)
	}
}

// TestExtend: the time box can be set anew, counted from the start, within
// bounds; a sandbox extended outlives its first time box.
func TestExtend(t *testing.T) {
	rt := newRuntime(t, Config{Capacity: 1})
	info := newBox(t, rt, Options{TimeBox: 2 * time.Second})
	ready := info.ExpiresAt.Add(-2 * time.Second)
	for _, tc := range []struct {
		total   time.Duration
		wantErr string
	}{
		{agentsandbox.MaxTimeBox + time.Second, "not within"},
		{0, "not within"},
		{time.Second + time.Millisecond, ""}, // shortening is fine while it is not over
		{agentsandbox.MaxTimeBox, ""},
	} {
		got, err := rt.Extend(info.ID, tc.total)
		switch {
		case tc.wantErr != "":
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("Extend(%v) = %v, want ErrInvalid saying %q", tc.total, err, tc.wantErr)
			}
		case err != nil:
			t.Errorf("Extend(%v): %v", tc.total, err)
		case !got.ExpiresAt.Equal(ready.Add(tc.total)):
			t.Errorf("Extend(%v): expires %v, want %v", tc.total, got.ExpiresAt, ready.Add(tc.total))
		}
	}
	time.Sleep(3 * time.Second) // past the first time box
	if out := shOK(t, rt, info.ID, "echo alive"); out != "alive\n" {
		t.Fatalf("extended sandbox: %q", out)
	}
	time.Sleep(time.Until(ready.Add(5 * time.Second)))
	if _, err := rt.Extend(info.ID, 2*time.Second); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "has run") {
		t.Errorf("Extend to an end already past: %v, want ErrInvalid saying it has run longer", err)
	}
	if _, err := rt.Extend("nope", time.Minute); !errors.Is(err, ErrNotFound) {
		t.Errorf("Extend of an unknown sandbox: %v, want ErrNotFound", err)
	}
}
