package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"openvibe.network/agentsandbox/client"
)

// poolToken is the API token of every worker of a pool test.
const poolToken = "e2e-pool-token"

// poolWorker is one worker process of a pool test.
type poolWorker struct {
	p       *proc
	url     string
	metrics string // its metrics listener's address
}

// startPool starts n workers with capacity slots each (no check-in, no
// browser), sharing one state directory that is cleaned up after them even
// when one was killed (no runtime's directory may be left), and waits until each one's
// self-test passed.
func startPool(tb testing.TB, n, capacity int) []*poolWorker {
	tb.Helper()
	bin := binaries(tb)
	dir := tb.TempDir()
	// The state directory must be one the sandboxes' uids may traverse.
	state, err := os.MkdirTemp("/run", "codes-sandbox-e2e-pool-")
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.Chmod(state, 0o755); err != nil {
		tb.Fatal(err)
	}
	token := filepath.Join(dir, "api.token")
	if err := os.WriteFile(token, []byte(poolToken+"\n"), 0o600); err != nil {
		tb.Fatal(err)
	}
	// Runs after every worker has stopped (cleanups run last first): a new
	// runtime on the state directory removes what a killed worker left.
	tb.Cleanup(func() {
		out, err := exec.Command(filepath.Join(bin, "codes-sandbox"), "selftest", "--state-dir", state, "--browser", "off").CombinedOutput()
		if err != nil {
			tb.Errorf("the clean-up self-test on %s: %v\n%s", state, err, out)
		}
		if left, _ := filepath.Glob(filepath.Join(state, "rt-*")); len(left) > 0 {
			tb.Errorf("a runtime's directory is left in %s: %v", state, left)
		}
		if err := os.RemoveAll(state); err != nil {
			tb.Errorf("remove the state directory: %v", err)
		}
	})
	workers := make([]*poolWorker, n)
	for i := range workers {
		addrFile := filepath.Join(dir, fmt.Sprintf("addr-%d", i))
		p := start(tb, filepath.Join(bin, "codes-sandbox"), "serve", "--listen", "127.0.0.1:0", "--addr-file", addrFile,
			"--api-token-file", token, "--capacity", fmt.Sprint(capacity), "--overcommit", "--state-dir", state, "--browser", "off",
			"--metrics-listen", "127.0.0.1:0")
		workers[i] = &poolWorker{p: p, url: p.addr(tb, addrFile)}
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	for _, w := range workers {
		wc := client.NewWorker(w.url, poolToken, nil)
		waitFor(tb, "the self-test of "+w.url, func() bool {
			st, err := wc.Status(ctx)
			return err == nil && st.SelfTest != nil && st.SelfTest.Passed
		}, w.p)
		waitFor(tb, "the metrics listener of "+w.url, func() bool {
			for _, l := range strings.Split(w.p.stderr.String(), "\n") {
				var rec struct{ Msg, Addr string }
				if json.Unmarshal([]byte(l), &rec) == nil && rec.Msg == "serving metrics" {
					w.metrics = rec.Addr
					return true
				}
			}
			return false
		}, w.p)
	}
	return workers
}

func urls(workers []*poolWorker) []string {
	var out []string
	for _, w := range workers {
		out = append(out, w.url)
	}
	return out
}

// TestPoolOfThreeWorkers: three real workers as one pool through the Go
// client: 3 × capacity creates made at once all succeed, spread over the
// three to the last slot; each sandbox is found again by its pool id; one
// worker killed mid-run fails only its own sandboxes, with an error naming
// it, while the others' run and wipe, and new creates go to the living.
func TestPoolOfThreeWorkers(t *testing.T) {
	const capacity = 3
	workers := startPool(t, 3, capacity)
	pool, err := client.NewPool(urls(workers), poolToken, client.PoolOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()

	sandboxes := make([]*client.PooledSandbox, 3*capacity)
	var wg sync.WaitGroup
	errs := make([]error, len(sandboxes))
	for i := range sandboxes {
		wg.Go(func() { sandboxes[i], errs[i] = pool.Create(ctx, client.CreateOptions{}) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("creates: %v", err)
	}
	per := map[string]int{}
	for _, sb := range sandboxes {
		per[sb.WorkerURL()]++
		found, err := pool.Sandbox(sb.ID())
		if err != nil || found.WorkerURL() != sb.WorkerURL() || found.SandboxID() != sb.SandboxID() {
			t.Errorf("Sandbox(%s) = %v, %v: not the sandbox on %s", sb.ID(), found, err, sb.WorkerURL())
		}
	}
	for _, w := range workers {
		if per[w.url] != capacity {
			t.Errorf("%d sandboxes on %s, want %d on each worker: %v", per[w.url], w.url, capacity, per)
		}
	}
	if _, err := pool.Create(ctx, client.CreateOptions{}); !errors.Is(err, client.ErrCapacity) {
		t.Errorf("a create beyond every slot: %v, want ErrCapacity", err)
	}

	dead := workers[1]
	if err := dead.p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-dead.p.done
	for _, sb := range sandboxes {
		var out bytes.Buffer
		res, err := sb.Exec(ctx, client.ExecRequest{Argv: []string{"echo", "alive"}}, &out, nil)
		if sb.WorkerURL() == dead.url {
			if !errors.Is(err, client.ErrUnreachable) || !strings.Contains(err.Error(), dead.url) {
				t.Errorf("exec in a sandbox of the killed worker: %v, want ErrUnreachable naming %s", err, dead.url)
			}
			continue
		}
		if err != nil || res.ExitCode != 0 || out.String() != "alive\n" {
			t.Errorf("exec in %s on %s: %v, exit %d, %q", sb.ID(), sb.WorkerURL(), err, res.ExitCode, out.String())
		}
		if rep, err := sb.Delete(ctx); err != nil || !rep.Verified {
			t.Errorf("delete %s: %v, verified %v", sb.ID(), err, rep.Verified)
		}
	}
	for range 2 * capacity {
		sb, err := pool.Create(ctx, client.CreateOptions{})
		if err != nil {
			t.Fatalf("create with one worker killed: %v", err)
		}
		if sb.WorkerURL() == dead.url {
			t.Fatalf("a create went to the killed worker")
		}
		if _, err := sb.Delete(ctx); err != nil {
			t.Errorf("delete %s: %v", sb.ID(), err)
		}
	}
}
