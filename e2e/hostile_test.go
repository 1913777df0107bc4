package e2e

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"openvibe.network/agentsandbox/client"
)

// How long the API and another sandbox may take to answer while one
// sandbox floods: a liveness bound, not a benchmark. It is the larger of
// answerBound (about a hundred times their usual answer on a host) and
// answerSlowdown times their slowest answer before the flood (in an emulated
// guest, an exec takes over a hundred milliseconds on a quiet machine).
const (
	answerBound    = time.Second
	answerSlowdown = 20
)

// lineSignal closes seen once want was written.
type lineSignal struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	want string
	seen chan struct{}
}

func (l *lineSignal) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	had := strings.Contains(l.buf.String(), l.want)
	l.buf.Write(p)
	if !had && strings.Contains(l.buf.String(), l.want) {
		close(l.seen)
	}
	return len(p), nil
}

// workerFDs counts the open descriptors of the worker process, and reads
// its resident memory in KiB.
func workerFDs(t *testing.T, p *proc) (fds, rssKiB int) {
	t.Helper()
	ents, err := os.ReadDir("/proc/" + strconv.Itoa(p.cmd.Process.Pid) + "/fd")
	if err != nil {
		t.Fatal(err)
	}
	st, _ := os.ReadFile("/proc/" + strconv.Itoa(p.cmd.Process.Pid) + "/status")
	for _, l := range strings.Split(string(st), "\n") {
		if rest, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			rssKiB, _ = strconv.Atoi(strings.Fields(rest)[0])
		}
	}
	return len(ents), rssKiB
}

// floodScript opens and holds as many connections to the sandbox's proxy
// address as it can, and churns refused CONNECTs on others, for its run.
const floodScript = `
import socket, threading, time
held = []
def hold():
    while True:
        try:
            held.append(socket.create_connection(("127.0.0.1", 3128), timeout=1))
        except OSError:
            time.sleep(0.001)
def churn():
    while True:
        try:
            s = socket.create_connection(("127.0.0.1", 3128), timeout=1)
            s.sendall(b"CONNECT 10.0.0.1:443 HTTP/1.1\r\n\r\n")
            s.recv(100)
            s.close()
        except OSError:
            pass
for f in [hold] * 2 + [churn] * 4:
    threading.Thread(target=f, daemon=True).start()
time.sleep(2)
print("flooding", flush=True)
time.sleep(6)
`

// TestFloodLeavesOthersServed: while one sandbox floods its way out (it
// holds every connection it can and churns refused ones), the worker's
// descriptors stay within that sandbox's bound, its log within its budget,
// and the API and an exec in another sandbox answer at once.
func TestFloodLeavesOthersServed(t *testing.T) {
	bin := binaries(t)
	live, w := startLive(t, bin)
	wp, api := startWorker(t, bin, live, w)
	wc := client.NewWorker(api, "e2e-api-token", nil)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	flooder, err := wc.Create(ctx, client.CreateOptions{TimeBoxMinutes: 5})
	if err != nil {
		t.Fatal(err)
	}
	other, err := wc.Create(ctx, client.CreateOptions{TimeBoxMinutes: 5})
	if err != nil {
		t.Fatal(err)
	}
	status := func() (time.Duration, error) {
		t0 := time.Now()
		_, err := wc.Status(ctx)
		return time.Since(t0), err
	}
	echo := func() (time.Duration, client.ExecResult, string, error) {
		t0 := time.Now()
		var got strings.Builder
		res, err := wc.Exec(ctx, other.ID, client.ExecRequest{Argv: []string{"echo", "ok"}}, &got, &got)
		return time.Since(t0), res, got.String(), err
	}
	statusBound, execBound := answerBound, answerBound
	for range 3 {
		d, err := status()
		if err != nil {
			t.Fatal(err)
		}
		statusBound = max(statusBound, answerSlowdown*d)
		d, res, got, err := echo()
		if err != nil || res.ExitCode != 0 || got != "ok\n" {
			t.Fatalf("exec in the other sandbox before the flood: %+v %v %q", res, err, got)
		}
		execBound = max(execBound, answerSlowdown*d)
	}
	fdsBefore, rssBefore := workerFDs(t, wp)
	logBefore := strings.Count(wp.stderr.String(), "\n")
	out := &lineSignal{want: "flooding", seen: make(chan struct{})}
	floodDone := make(chan error, 1)
	go func() {
		_, err := wc.Exec(ctx, flooder.ID, client.ExecRequest{Argv: []string{"python3", "-c", floodScript}}, out, out)
		floodDone <- err
	}()
	select {
	case <-out.seen:
	case err := <-floodDone:
		t.Fatalf("the flood ended before it began: %v %q", err, out.buf.String())
	case <-ctx.Done():
		t.Fatal("the flood did not start")
	}
	maxFDs, maxRSS := 0, 0
	for i := range 10 {
		d, err := status()
		if err != nil {
			t.Fatal(err)
		}
		if d > statusBound {
			t.Errorf("GET /v1/status took %v during the flood (bound %v)", d, statusBound)
		}
		d, res, got, err := echo()
		if err != nil || res.ExitCode != 0 || got != "ok\n" || d > execBound {
			t.Errorf("exec %d in the other sandbox during the flood: %+v %v %q in %v (bound %v)", i, res, err, got, d, execBound)
		}
		fds, rss := workerFDs(t, wp)
		maxFDs, maxRSS = max(maxFDs, fds), max(maxRSS, rss)
		time.Sleep(200 * time.Millisecond)
	}
	// One sandbox may make the worker hold its connections and their
	// upstreams, and no more (egress.DefaultMaxConns = 64 each way).
	if bound := fdsBefore + 2*64 + 16; maxFDs > bound {
		t.Errorf("the worker held %d descriptors during the flood (%d before, bound %d)", maxFDs, fdsBefore, bound)
	}
	lines := strings.Count(wp.stderr.String(), "\n") - logBefore
	if lines > 400 {
		t.Errorf("the flood wrote %d log lines in a few seconds; one sandbox's egress log budget is 50 + 5/s", lines)
	}
	t.Logf("worker during the flood: descriptors %d -> max %d, RSS %d KiB -> max %d KiB, %d log lines",
		fdsBefore, maxFDs, rssBefore, maxRSS, lines)
	if err := <-floodDone; err != nil {
		t.Errorf("the flood's exec: %v", err)
	}
}

// TestEverySlotLost: a slot whose wipe cannot be verified (a process of its
// uid that the wipe did not start, from the host) is kept out of use and
// the worker's word follows: /v1/status says why, the report is not ready
// and claims no ephemeral workspace, so Live refuses it and the owner's
// view says so; once the leftover is gone, the slot comes back and the
// stream is alive again.
func TestEverySlotLost(t *testing.T) {
	bin := binaries(t)
	live, w := startLive(t, bin)
	wp, api := startWorker(t, bin, live, w, "--capacity", "1", "--checkin-interval", "1s")
	waitFor(t, "the owner's view to say alive", func() bool { return view(t, live, w).State == "alive" }, wp)
	wc := client.NewWorker(api, "e2e-api-token", nil)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	sb, err := wc.Create(ctx, client.CreateOptions{TimeBoxMinutes: 5})
	if err != nil {
		t.Fatal(err)
	}
	dirs, _ := filepath.Glob("/run/codes-sandbox/rt-*/" + sb.ID)
	if len(dirs) != 1 {
		t.Fatalf("the sandbox's host directory: %v", dirs)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(dirs[0], &st); err != nil {
		t.Fatal(err)
	}
	leak := exec.Command("sleep", "300")
	leak.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: st.Gid, Gid: st.Gid, Groups: []uint32{}}}
	if err := leak.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = leak.Process.Kill(); _ = leak.Wait() })
	var apiErr *client.APIError
	if _, err := wc.Delete(ctx, sb.ID); !errors.As(err, &apiErr) || apiErr.Code != "wipe_unverified" {
		t.Fatalf("delete with a leftover process: %v, want wipe_unverified", err)
	}
	status, err := wc.Status(ctx)
	if err != nil || len(status.SlotsOutOfUse) != 1 || !strings.Contains(status.SlotsOutOfUse[0], "process "+strconv.Itoa(leak.Process.Pid)) {
		t.Fatalf("status: %+v %v", status, err)
	}
	if _, err := wc.Create(ctx, client.CreateOptions{}); !errors.Is(err, client.ErrCapacity) {
		t.Fatalf("create with every slot lost: %v, want at capacity", err)
	}
	var v ownerView
	waitFor(t, "the owner's view to say refused", func() bool { v = view(t, live, w); return v.State == "refused" }, wp)
	found := false
	for _, e := range v.Refusal.Errors {
		found = found || strings.Contains(e.Message, "'workspace'")
	}
	if !found {
		t.Errorf("the refusal does not say the workspace is not proved ephemeral: %+v", v.Refusal)
	}
	_ = leak.Process.Kill()
	_ = leak.Wait()
	waitFor(t, "the slot to come back and the stream to be alive", func() bool { return view(t, live, w).State == "alive" }, wp)
	if status, err := wc.Status(ctx); err != nil || len(status.SlotsOutOfUse) != 0 {
		t.Fatalf("status after the leftover went: %+v %v", status, err)
	}
}

// TestWorkerKilledLeavesNothing: a worker killed with SIGKILL while its
// sandboxes run, and a worker started right after it, leave nothing of the
// dead one's sandboxes: no mount, cgroup, directory or process.
func TestWorkerKilledLeavesNothing(t *testing.T) {
	bin := binaries(t)
	live, w := startLive(t, bin)
	wp, api := startWorker(t, bin, live, w)
	wc := client.NewWorker(api, "e2e-api-token", nil)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	var ids []string
	for range 2 {
		sb, err := wc.Create(ctx, client.CreateOptions{TimeBoxMinutes: 5})
		if err != nil {
			t.Fatal(err)
		}
		var out strings.Builder
		if _, err := wc.Exec(ctx, sb.ID, client.ExecRequest{Argv: []string{"sh", "-c",
			"dd if=/dev/zero of=/workspace/big bs=1M count=50 2>/dev/null; sleep 300 & echo ok"}}, &out, &out); err != nil || out.String() != "ok\n" {
			t.Fatalf("exec: %v %q", err, out.String())
		}
		ids = append(ids, sb.ID)
	}
	dirs, _ := filepath.Glob("/run/codes-sandbox/rt-*/" + ids[0])
	if len(dirs) != 1 {
		t.Fatalf("the sandbox's directory: %v", dirs)
	}
	runtimeDir := filepath.Dir(dirs[0])
	_ = wp.cmd.Process.Signal(syscall.SIGKILL)
	<-wp.done

	startWorker(t, bin, live, w) // returns once it listens: after its cleanup
	for _, id := range ids {
		if left := sandboxTraces(id); len(left) != 0 {
			t.Errorf("left of sandbox %s after the restart: %v", id, left)
		}
	}
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	if strings.Contains(string(mounts), runtimeDir) {
		t.Errorf("mounts of the dead worker's runtime %s are left", runtimeDir)
	}
	if _, err := os.Stat(runtimeDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the dead worker's runtime directory %s is left (%v)", runtimeDir, err)
	}
}
