package e2e

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"openvibe.network/agentsandbox"
	"openvibe.network/agentsandbox/client"
	"openvibe.network/agentsandbox/live/httpapi"
	"openvibe.network/agentsandbox/live/sqlite"
)

// startLive runs `ovlive serve` on SQLite in a temp dir and seeds it.
func startLive(t *testing.T, bin string) (string, world) {
	t.Helper()
	dir := t.TempDir()
	db := "sqlite:" + filepath.Join(dir, "ovlive.db")
	w := seed(t, bin, db)
	p := start(t, filepath.Join(bin, "ovlive"), "serve", "--listen", "127.0.0.1:0", "--addr-file", filepath.Join(dir, "addr"), "--db", db)
	return p.addr(t, filepath.Join(dir, "addr")), w
}

type report struct {
	Ready     bool            `json:"ready"`
	Checks    map[string]bool `json:"checks"`
	Isolation map[string]any  `json:"isolation"`
	Capacity  int             `json:"capacity"`
}

func TestWorkerChecksInAlive(t *testing.T) {
	bin := binaries(t)
	live, w := startLive(t, bin)
	if v := view(t, live, w); v.State != "absent" {
		t.Fatalf("state before any worker = %q, want absent", v.State)
	}
	// The first check-in comes right after the first self-test, not after
	// an interval: with an interval longer than the wait, only that one can
	// make the view alive in time (no bound on how fast, which a loaded or
	// emulated machine could break).
	wp, api := startWorker(t, bin, live, w, "--checkin-interval", "10m")

	var v ownerView
	waitFor(t, "the owner's view to say alive", func() bool { v = view(t, live, w); return v.State == "alive" }, wp)
	t.Logf("first check-in received %v after the worker's start", v.ReceivedAt.Sub(wp.start))
	var r report
	if err := json.Unmarshal(v.Report, &r); err != nil {
		t.Fatal(err)
	}
	// The nine, and credentials_brokered (a worker with egress).
	if !r.Ready || len(r.Checks) != len(agentsandbox.Checks())+1 || r.Capacity != 2 {
		t.Errorf("report ready=%v checks=%v capacity=%d", r.Ready, r.Checks, r.Capacity)
	}
	for _, c := range append(agentsandbox.Checks(), agentsandbox.CheckCredentialsBrokered) {
		if !r.Checks[c] {
			t.Errorf("check %s is false", c)
		}
	}
	for k, want := range map[string]any{"host_network": false, "credentials": false, "profile": false, "egress_proxy": true, "workspace": "ephemeral"} {
		if r.Isolation[k] != want {
			t.Errorf("isolation.%s = %v, want %v", k, r.Isolation[k], want)
		}
	}

	// The worker's API runs a command in a sandbox meanwhile.
	wc := client.NewWorker(api, "e2e-api-token", nil)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	runInSandbox(ctx, t, wc)
	if st, err := wc.RunSelfTest(ctx); err != nil || !st.Passed {
		t.Errorf("self-test on demand: %+v %v", st, err)
	}

	// A sandbox still running at shutdown is wiped by it.
	left, err := wc.Create(ctx, client.CreateOptions{TimeBoxMinutes: 5})
	if err != nil {
		t.Fatal(err)
	}
	traces := sandboxTraces(left.ID)
	if len(traces) < 2 {
		t.Fatalf("cannot find the running sandbox on the host (found %v)", traces)
	}
	if err := wp.stop(t); err != nil {
		t.Errorf("worker exit after SIGTERM: %v", err)
	}
	if after := sandboxTraces(left.ID); len(after) != 0 {
		t.Errorf("left after the worker's shutdown: %v", after)
	}
	if !strings.Contains(wp.stderr.String(), `"msg":"checked in"`) {
		t.Errorf("worker log has no check-in line")
	}
	if strings.Contains(wp.stderr.String(), "ovs_") {
		t.Errorf("the service token is in the worker's log")
	}
}

// TestUnprovedFactRefused runs a worker without its egress proxy: it cannot
// prove egress_refuses_private, so it does not claim egress_proxy, Live
// refuses the report (422) and the owner's view says why.
func TestUnprovedFactRefused(t *testing.T) {
	bin := binaries(t)
	live, w := startLive(t, bin)
	wp, _ := startWorker(t, bin, live, w, "--no-egress")
	var v ownerView
	waitFor(t, "the owner's view to say refused", func() bool { v = view(t, live, w); return v.State == "refused" }, wp)
	if v.Refusal == nil || len(v.Refusal.Errors) == 0 {
		t.Fatalf("refused without a refusal: %+v", v)
	}
	found := false
	for _, e := range v.Refusal.Errors {
		found = found || (e.Path == "/isolation" && strings.Contains(e.Message, "egress_proxy"))
	}
	if !found {
		t.Errorf("refusal errors %+v do not name the missing egress_proxy fact", v.Refusal.Errors)
	}
	waitFor(t, "the worker to log the refusal", func() bool {
		return strings.Contains(wp.stderr.String(), "refused by the contract")
	}, wp)
	if !strings.Contains(wp.stderr.String(), "no egress proxy") {
		t.Errorf("the worker's log does not say why the self-test failed")
	}
}

// TestStoppedWorkerGoesStale runs Live in this process on the seeded SQLite
// database with an injected clock: once the worker is stopped, moving the
// clock past the alive window makes the owner's view stale.
func TestStoppedWorkerGoesStale(t *testing.T) {
	bin := binaries(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "ovlive.db")
	w := seed(t, bin, "sqlite:"+path)
	ctx, cancel := context.WithTimeout(context.Background(), 3*wait)
	defer cancel()
	store, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	var offset atomic.Int64
	now := func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	srv, err := httpapi.New(httpapi.Config{Store: store, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: srv.Handler()}
	go hs.Serve(ln)
	defer hs.Close()
	live := "http://" + ln.Addr().String()

	wp, _ := startWorker(t, bin, live, w)
	waitFor(t, "the owner's view to say alive", func() bool { return view(t, live, w).State == "alive" }, wp)
	if err := wp.stop(t); err != nil {
		t.Errorf("worker exit after SIGTERM: %v", err)
	}
	last := *view(t, live, w).ReceivedAt
	offset.Store(int64(time.Until(last.Add(59 * time.Second))))
	if s := view(t, live, w).State; s != "alive" {
		t.Errorf("59 s after the last check-in: state %q, want alive", s)
	}
	offset.Store(int64(time.Until(last.Add(61 * time.Second))))
	if s := view(t, live, w).State; s != "stale" {
		t.Errorf("61 s after the last check-in of a stopped worker: state %q, want stale", s)
	}
}

// runInSandbox creates a sandbox through the worker's API, runs a command in
// it and deletes it.
func runInSandbox(ctx context.Context, t *testing.T, wc *client.Worker) {
	t.Helper()
	sb, err := wc.Create(ctx, client.CreateOptions{TimeBoxMinutes: 5})
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	res, err := wc.Exec(ctx, sb.ID, client.ExecRequest{Argv: []string{"sh", "-c", "echo hello from the sandbox; id -u"}}, &out, &out)
	if err != nil || res.ExitCode != 0 || out.String() != "hello from the sandbox\n1000\n" {
		t.Errorf("exec: %+v %v %q", res, err, out.String())
	}
	if rep, err := wc.Delete(ctx, sb.ID); err != nil || !rep.Verified {
		t.Errorf("delete: %+v %v", rep, err)
	}
}

func TestSelftestCommand(t *testing.T) {
	bin := binaries(t)
	tests := []struct {
		name   string
		args   []string
		passed bool
		checks int
	}{
		{"OK", []string{"selftest", "--json", "--browser", "off"}, true, len(agentsandbox.Checks()) + 1}, // and credentials_brokered
		{"ErrNoEgress", []string{"selftest", "--json", "--no-egress", "--browser", "off"}, false, len(agentsandbox.Checks())},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := exec.Command(filepath.Join(bin, "codes-sandbox"), tc.args...).Output()
			if (err == nil) != tc.passed {
				t.Fatalf("exit: %v, want success=%v (%s)", err, tc.passed, out)
			}
			var res struct {
				Checks    map[string]bool `json:"checks"`
				Reasons   []string        `json:"reasons"`
				CheckedAt time.Time       `json:"checked_at"`
				Passed    bool            `json:"passed"`
			}
			if err := json.Unmarshal(out, &res); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			if res.Passed != tc.passed || len(res.Checks) != tc.checks || res.CheckedAt.IsZero() || (len(res.Reasons) == 0) == !tc.passed {
				t.Errorf("result %+v", res)
			}
		})
	}
}

func TestCheckinOnce(t *testing.T) {
	bin := binaries(t)
	live, w := startLive(t, bin)
	out, err := exec.Command(filepath.Join(bin, "codes-sandbox"), "checkin", "--once", "--browser", "off",
		"--live-url", live, "--stream", w.stream, "--subject", w.person, "--service-token-file", w.tokenFile).Output()
	if err != nil {
		t.Fatalf("checkin --once: %v (%s)", err, out)
	}
	var a struct {
		Status int `json:"status"`
		Answer struct {
			Registered bool   `json:"registered"`
			State      string `json:"state"`
		} `json:"answer"`
	}
	if err := json.Unmarshal(out, &a); err != nil || a.Status != 200 || !a.Answer.Registered || a.Answer.State != "alive" {
		t.Fatalf("answer %s (%v)", out, err)
	}
	if v := view(t, live, w); v.State != "alive" {
		t.Errorf("owner's view after checkin --once: %q", v.State)
	}
}

// sandboxTraces lists what of sandbox id exists on the host: its control
// directory and its cgroup directories.
func sandboxTraces(id string) []string {
	var found []string
	for _, pattern := range []string{"/run/codes-sandbox/rt-*/" + id, "/sys/fs/cgroup/codes-sandbox/rt-*/" + id, "/sys/fs/cgroup/*/codes-sandbox/rt-*/" + id} {
		m, _ := filepath.Glob(pattern)
		found = append(found, m...)
	}
	return found
}

// TestServeFromConfigFile runs a worker configured by a JSON file only, with
// the service token taken from the environment.
func TestServeFromConfigFile(t *testing.T) {
	bin := binaries(t)
	live, w := startLive(t, bin)
	token, err := os.ReadFile(w.tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	apiToken := filepath.Join(dir, "api.token")
	if err := os.WriteFile(apiToken, []byte("e2e-api-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := json.Marshal(map[string]any{
		"worker_id": "sbw-e2e-config", "listen": "127.0.0.1:0", "api_token_file": apiToken, "capacity": 1,
		"check_ins": []map[string]string{{"live_url": live, "stream": w.stream, "subject": w.person}},
	})
	if err != nil {
		t.Fatal(err)
	}
	cfgFile := filepath.Join(dir, "config.json")
	if err := os.WriteFile(cfgFile, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	wp := startEnv(t, []string{"CODES_SANDBOX_SERVICE_TOKEN=" + strings.TrimSpace(string(token))},
		filepath.Join(bin, "codes-sandbox"), "serve", "--config", cfgFile, "--addr-file", filepath.Join(dir, "addr"), "--browser", "off", "--overcommit")
	wp.addr(t, filepath.Join(dir, "addr"))
	var v ownerView
	waitFor(t, "the owner's view to say alive", func() bool { v = view(t, live, w); return v.State == "alive" }, wp)
	var r struct {
		WorkerID string `json:"worker_id"`
		Capacity int    `json:"capacity"`
	}
	if err := json.Unmarshal(v.Report, &r); err != nil || r.WorkerID != "sbw-e2e-config" || r.Capacity != 1 {
		t.Errorf("report %s (%v)", v.Report, err)
	}
}
