package httpapi

import (
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"openvibe.network/agentsandbox/client"
	"openvibe.network/agentsandbox/sandbox"
)

// TestRealBrokenSandbox (issue 28, finding 9): a sandbox whose init stopped
// answering (here every process of it stopped from the host) answers 409
// sandbox_broken instead of hanging, is listed and shown as broken, and
// its delete still wipes it.
func TestRealBrokenSandbox(t *testing.T) {
	api := newRealAPI(t, sandbox.Config{Capacity: 1, ControlTimeout: 2 * time.Second}, nil)
	ctx := testCtx(t, 2*time.Minute)
	sb := api.newSandbox(t, ctx, client.CreateOptions{})
	if out := mustExec(t, ctx, sb, "echo", "ok"); out != "ok\n" {
		t.Fatalf("exec: %q", out)
	}
	pids, err := api.rt.HostPids(sb.ID())
	if err != nil || len(pids) == 0 {
		t.Fatalf("HostPids: %v %v", pids, err)
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
	}
	var out strings.Builder
	_, err = sb.Exec(ctx, client.ExecRequest{Argv: []string{"true"}}, &out, &out)
	var apiErr *client.APIError
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 409 || !errors.Is(err, client.ErrSandboxBroken) {
		t.Fatalf("exec on a stopped init: %v, want 409 sandbox_broken", err)
	}
	if ctx.Err() != nil {
		t.Fatal("the exec answered only when the test's context ended")
	}
	if _, err := sb.Processes(ctx); !errors.Is(err, client.ErrSandboxBroken) {
		t.Fatalf("processes: %v, want sandbox_broken", err)
	}
	info, err := sb.Info(ctx)
	if err != nil || info.State != "broken" {
		t.Fatalf("GET: %+v %v, want state broken", info, err)
	}
	list, err := api.w.List(ctx)
	if err != nil || len(list) != 1 || list[0].State != "broken" {
		t.Fatalf("list: %+v %v, want the sandbox broken", list, err)
	}
	rep, err := sb.Delete(ctx)
	if err != nil || !rep.Verified {
		t.Fatalf("delete: %+v %v", rep, err)
	}
}
