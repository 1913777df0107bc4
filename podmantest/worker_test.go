package podmantest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"openvibe.network/agentsandbox/client"
)

// The ports Live and the worker listen on, on the loopback of their shared
// network namespace.
const (
	livePort   = 8080
	workerPort = 8088
)

// live is an ovlive container on SQLite with a person who owns a stream, a
// first-party service's token and the owner's person token.
type live struct {
	id, person, stream, serviceToken, personToken string
	http                                          *http.Client
}

// startLive runs the ovlive image as its own non-root user, with no
// network but its loopback, and seeds it with ovlive admin.
func startLive(t *testing.T, h *host, name string) *live {
	t.Helper()
	user := strings.TrimSpace(h.podman(t, "image", "inspect", "--format", "{{.Config.User}}", h.liveImage))
	uid, _, ok := strings.Cut(user, ":")
	if n, err := strconv.Atoi(uid); !ok || err != nil || n == 0 {
		t.Fatalf("the ovlive image's user is %q: want a numeric non-root uid:gid", user)
	}
	id := h.run(t, name, []string{"--network", "none", "--read-only", "--read-only-tmpfs=false", "--cap-drop", "ALL",
		"--security-opt", "no-new-privileges", "--tmpfs", "/var/lib/ovlive:rw,nosuid,nodev,size=64m,mode=0700,U"},
		h.liveImage, "serve", "--listen", fmt.Sprintf("127.0.0.1:%d", livePort), "--db", "sqlite:/var/lib/ovlive/ovlive.db")
	l := &live{id: id, http: nsClient(h.pid(t, id))}
	eventually(t, "Live's /healthz", func() error {
		_, err := l.get("/healthz", "")
		return err
	})
	if status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", h.pid(t, id))); err != nil || !bytes.Contains(status, []byte("\nUid:\t"+uid+"\t")) {
		t.Fatalf("ovlive does not run as uid %s: %v\n%s", uid, err, status)
	}
	admin := func(field string, args ...string) string {
		out := h.podman(t, append([]string{"exec", id, "ovlive", "admin", "--db", "sqlite:/var/lib/ovlive/ovlive.db"}, args...)...)
		var m map[string]string
		if err := json.Unmarshal([]byte(out), &m); err != nil || m[field] == "" {
			t.Fatalf("ovlive admin %v: no %s in %s (%v)", args, field, out, err)
		}
		return m[field]
	}
	l.person = admin("id", "person", "add", "--name", "Podman Owner")
	l.stream = admin("id", "stream", "add", "--owner", l.person)
	svc := admin("id", "service", "add", "--name", "codes-sandbox", "--first-party", "--capability", "live.agent_sandbox.register")
	l.serviceToken = admin("token", "token", "issue", "--service", svc)
	l.personToken = admin("token", "token", "issue", "--person", l.person)
	return l
}

// get returns the body of GET path on Live (with token as a Bearer
// credential unless empty); an error for any status but 200.
func (l *live) get(path, token string) ([]byte, error) {
	req, err := http.NewRequest(http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d%s", livePort, path), nil)
	if err != nil {
		return nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := l.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s: %s", path, resp.Status, b.String())
	}
	return b.Bytes(), nil
}

// ownerView is what the owner's view says of the stream's worker.
type ownerView struct {
	State  string `json:"state"`
	Report *struct {
		Ready   bool            `json:"ready"`
		Reasons []string        `json:"reasons"`
		Checks  map[string]bool `json:"checks"`
	} `json:"report"`
	Refusal *struct {
		Reasons []string `json:"reasons"`
	} `json:"refusal"`
}

func (l *live) view(t *testing.T) (ownerView, error) {
	t.Helper()
	b, err := l.get("/api/streams/agent/"+l.stream+"/plays/worker", l.personToken)
	if err != nil {
		return ownerView{}, err
	}
	var v ownerView
	if err := json.Unmarshal(b, &v); err != nil {
		return ownerView{}, fmt.Errorf("owner's view: %w: %s", err, b)
	}
	return v, nil
}

// workerConfig writes the worker's config and token files (root, 0600) into
// a directory mounted read-only at /etc/codes-sandbox, checking in with l,
// and returns the directory and the API token.
func workerConfig(t *testing.T, l *live, capacity int) (string, string) {
	t.Helper()
	dir := t.TempDir()
	token := randomHex(t)
	cfg := map[string]any{
		"worker_id": "sbw-podman", "listen": fmt.Sprintf("127.0.0.1:%d", workerPort), "capacity": capacity,
		"api_token_file": "/etc/codes-sandbox/api.token", "state_dir": "/run/codes-sandbox", "browser": "off",
		// The cgroup-v2 guest (3 GB) is below capacity × the default caps.
		"overcommit": true,
		"check_ins": []map[string]string{{"live_url": fmt.Sprintf("http://127.0.0.1:%d", livePort), "stream": l.stream,
			"subject": l.person, "service_token_file": "/etc/codes-sandbox/service.token"}},
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string][]byte{"config.json": b, "api.token": []byte(token + "\n"), "service.token": []byte(l.serviceToken + "\n")} {
		if err := os.WriteFile(filepath.Join(dir, name), content, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir, token
}

func randomHex(t *testing.T) string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// startWorker runs the worker image with opts in l's network namespace and
// returns its container id and a client of its API.
func startWorker(t *testing.T, h *host, l *live, name string, opts []string) (string, *client.Worker) {
	t.Helper()
	dir, token := workerConfig(t, l, 2)
	all := append([]string{"--network", "container:" + l.id, "--volume", dir + ":/etc/codes-sandbox:ro"}, opts...)
	id := h.run(t, name, all, h.workerImage, "serve", "--config", "/etc/codes-sandbox/config.json")
	w := client.NewWorker(fmt.Sprintf("http://127.0.0.1:%d", workerPort), token, nsClient(h.pid(t, l.id)))
	return id, w
}

// names returns a container name for each part, unique to this run.
func names(t *testing.T, parts ...string) []string {
	prefix := "agentsandbox-test-" + randomHex(t)[:8] + "-"
	var out []string
	for _, p := range parts {
		out = append(out, prefix+p)
	}
	return out
}

// TestWorkerLeastPrivilege: the worker image, run with exactly
// the chart's files/security.json (seven capabilities, the shipped seccomp
// profile, its own cgroup namespace, a read-only root, /proc as the
// runtime masks it, not privileged), proves every isolation fact in its
// self-test, runs a sandbox through the API (create, exec, files, delete
// with a verified wipe) and checks in with Live (the ovlive image, as its
// non-root user), which shows it alive and ready.
func TestWorkerLeastPrivilege(t *testing.T) {
	h := newHost(t)
	sec := readSecurity(t)
	n := names(t, "live", "worker")
	l := startLive(t, h, n[0])
	_, w := startWorker(t, h, l, n[1], sec.flags(t))
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()

	eventually(t, "the worker's first self-test", func() error {
		st, err := w.Status(ctx)
		switch {
		case err != nil:
			return err
		case st.SelfTest == nil:
			return fmt.Errorf("no self-test yet")
		case !st.SelfTest.Passed:
			t.Fatalf("the self-test failed under files/security.json: %q", st.SelfTest.Reasons)
		}
		return nil
	})
	st, err := w.RunSelfTest(ctx)
	if err != nil || !st.Passed || len(st.NotRun) > 0 {
		t.Fatalf("self-test on demand: %v, passed %v, not run %v, reasons %q", err, st.Passed, st.NotRun, st.Reasons)
	}

	info, err := w.Create(ctx, client.CreateOptions{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	sb := w.Sandbox(info.ID)
	if err := sb.Files().Put(ctx, "hello.txt", strings.NewReader("from the test"), 0); err != nil {
		t.Fatalf("put file: %v", err)
	}
	var out bytes.Buffer
	res, err := sb.Exec(ctx, client.ExecRequest{Argv: []string{"sh", "-c", "cat hello.txt; echo; id -u; grep CapEff /proc/self/status"}}, &out, &out)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("exec: %v, exit %d: %s", err, res.ExitCode, out.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 || lines[0] != "from the test" || lines[1] == "0" || lines[2] != "CapEff:\t0000000000000000" {
		t.Errorf("the sandbox says %q: want the file, a uid other than 0 and no capability", lines)
	}
	var got bytes.Buffer
	if err := sb.Files().Get(ctx, "hello.txt", &got); err != nil || got.String() != "from the test" {
		t.Errorf("get file: %v, %q", err, got.String())
	}
	rep, err := sb.Delete(ctx)
	if err != nil || !rep.Verified {
		t.Fatalf("delete: %v, verified %v", err, rep.Verified)
	}

	eventually(t, "Live to show the worker alive and ready", func() error {
		v, err := l.view(t)
		switch {
		case err != nil:
			return err
		case v.State != "alive" || v.Report == nil || !v.Report.Ready:
			return fmt.Errorf("the owner's view: state %q, report %+v, refusal %+v", v.State, v.Report, v.Refusal)
		}
		return nil
	})
}

// unprivilegedFixes are what a worker in podman's default (unprivileged)
// container must name, each in its log, its self-test's reasons and the
// reasons its check-in carries to Live: the capabilities it lacks, the
// seccomp and AppArmor setting, /proc and the cgroup mount.
var unprivilegedFixes = []string{
	"lacks CAP_SYS_PTRACE, CAP_SYS_ADMIN", "--cap-add SYS_PTRACE,SYS_ADMIN", "securityContext.capabilities.add",
	"/proc is masked", "seccomp profile /usr/share/codes-sandbox/seccomp.json", "AppArmor unconfined", "procMount: Unmasked",
	"the cgroup file system (/sys/fs/cgroup/",
}

// rawBubblewrap are what bubblewrap's own messages look like: a reason a
// person can act on never is one.
var rawBubblewrap = []string{"bwrap:", "bubblewrap said", "Operation not permitted"}

// TestWorkerUnprivileged: in podman's default container (its default
// capabilities, seccomp profile and cgroup namespace, /proc masked) the
// worker starts no sandbox and says why — in its log, in its self-test's
// reasons and in the check-in Live shows the owner — naming each missing
// capability, the seccomp and AppArmor setting, /proc and the cgroup mount
// with the fix, never with bubblewrap's own words; an API create answers
// 503 host_unsupported with the same.
func TestWorkerUnprivileged(t *testing.T) {
	h := newHost(t)
	n := names(t, "live", "worker")
	l := startLive(t, h, n[0])
	id, w := startWorker(t, h, l, n[1], nil)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()

	var reasons []string
	eventually(t, "the worker's first self-test", func() error {
		st, err := w.Status(ctx)
		if err != nil {
			return err
		}
		if st.SelfTest == nil {
			return fmt.Errorf("no self-test yet")
		}
		if st.SelfTest.Passed {
			t.Fatal("the self-test passed in an unprivileged container")
		}
		reasons = st.SelfTest.Reasons
		return nil
	})
	checkSays(t, "the self-test's reasons", strings.Join(reasons, "\n"))

	_, err := w.Create(ctx, client.CreateOptions{})
	var apiErr *client.APIError
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusServiceUnavailable || apiErr.Code != "host_unsupported" {
		t.Fatalf("create: %v, want 503 host_unsupported", err)
	}
	checkSays(t, "the create's error", apiErr.Message)

	checkSays(t, "the worker's log", h.logs(t, id))

	eventually(t, "Live to show the check-in refused with the worker's reasons", func() error {
		v, err := l.view(t)
		switch {
		case err != nil:
			return err
		case v.State != "refused" || v.Refusal == nil:
			return fmt.Errorf("the owner's view: state %q, refusal %+v", v.State, v.Refusal)
		}
		checkSays(t, "the check-in's reasons (Live's owner's view)", strings.Join(v.Refusal.Reasons, "\n"))
		return nil
	})
}

// checkSays fails the test unless text names every unprivileged fix and
// holds none of bubblewrap's own words.
func checkSays(t *testing.T, what, text string) {
	t.Helper()
	for _, want := range unprivilegedFixes {
		if !strings.Contains(text, want) {
			t.Errorf("%s do not say %q:\n%s", what, want, text)
		}
	}
	for _, raw := range rawBubblewrap {
		if strings.Contains(text, raw) {
			t.Errorf("%s hold bubblewrap's own words %q:\n%s", what, raw, text)
		}
	}
}
