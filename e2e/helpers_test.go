// Package e2e runs the whole system as a person would: it builds ovlive and
// codes-sandbox, starts them as processes on loopback and checks what the
// stream's owner sees. It holds tests only. Every worker starts with
// --overcommit: the suite runs in the 3 GB vm guest too, whose RAM and
// fs.file-max are below two sandboxes at the default caps (the refusal
// itself is proved by cmd/codes-sandbox-worker's tests).
package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"openvibe.network/agentsandbox/internal/syncbuf"
	"openvibe.network/agentsandbox/internal/testenv"
)

// wait bounds every wait of these tests (generous: the machine is loaded).
const wait = 60 * time.Second

// startWait bounds a server's start, up to its address file: a worker
// writes it after its start-up self-test, whose browser check alone took
// over a minute on a machine at load 50.
const startWait = 3 * time.Minute

// BinDirEnv names a directory that already holds ovlive and codes-sandbox
// (the guest suite in vmtest/ builds them on the host, as the guest has no
// Go toolchain state to build with); when it is set, binaries uses them.
const BinDirEnv = "AGENTSANDBOX_E2E_BIN"

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// binaries builds ovlive and codes-sandbox once per test binary and returns
// their directory (or returns $AGENTSANDBOX_E2E_BIN, see BinDirEnv).
func binaries(t testing.TB) string {
	t.Helper()
	testenv.RequireSandbox(t)
	if dir := os.Getenv(BinDirEnv); dir != "" {
		return dir
	}
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "agentsandbox-e2e-bin-")
		if buildErr != nil {
			return
		}
		// Static, as the packages ship them (an image sandbox's init must
		// be: an image has none of the host's libraries), and the lean init
		// beside the worker, from the same build.
		cmd := exec.Command("go", "build", "-o", binDir+"/", "../cmd/ovlive", "../cmd/codes-sandbox", "../cmd/codes-sandbox-worker", "../cmd/codes-sandbox-init")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binDir
}

func TestMain(m *testing.M) {
	if os.Getenv(noNamespacesEnv) != "" {
		execWithoutNamespaces()
	}
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// proc is a started program whose stderr is kept for the test's log.
type proc struct {
	cmd    *exec.Cmd
	stderr *syncbuf.Buffer
	done   chan struct{}
	err    error
	start  time.Time
}

// start runs bin with args; it is killed (if still running) at the end of the
// test, and its stderr is logged when the test failed.
func start(t testing.TB, bin string, args ...string) *proc {
	t.Helper()
	return startEnv(t, nil, bin, args...)
}

// startEnv is start with env added to the program's environment.
func startEnv(t testing.TB, env []string, bin string, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(bin, args...), stderr: &syncbuf.Buffer{}, done: make(chan struct{})}
	p.cmd.Stderr = p.stderr
	p.cmd.Env = append([]string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=" + t.TempDir()}, env...)
	p.start = time.Now()
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.stop(t)
		if t.Failed() {
			t.Logf("%s stderr:\n%s", filepath.Base(bin), p.stderr.String())
		}
	})
	return p
}

// stop sends SIGTERM and waits for the exit; it returns the exit error.
func (p *proc) stop(t testing.TB) error {
	t.Helper()
	select {
	case <-p.done:
		return p.err
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(wait):
		_ = p.cmd.Process.Kill()
		<-p.done
		t.Errorf("%s did not stop within %v of SIGTERM", p.cmd.Path, wait)
	}
	return p.err
}

// addr waits for the address file that a server writes once listening.
func (p *proc) addr(t testing.TB, file string) string {
	t.Helper()
	var a string
	waitUntil(t, "the address in "+file, startWait, func() bool {
		b, err := os.ReadFile(file)
		a = strings.TrimSpace(string(b))
		return err == nil && a != ""
	}, p)
	return "http://" + a
}

// waitFor polls cond every 20 ms until it holds, failing after wait or
// when p exits first.
func waitFor(t testing.TB, what string, cond func() bool, p *proc) {
	t.Helper()
	waitUntil(t, what, wait, cond, p)
}

// waitUntil is waitFor with its own bound.
func waitUntil(t testing.TB, what string, wait time.Duration, cond func() bool, p *proc) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for !cond() {
		if p != nil {
			select {
			case <-p.done:
				t.Fatalf("waiting for %s: %s exited: %v", what, p.cmd.Path, p.err)
			default:
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s after %v", what, wait)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// admin runs `ovlive admin --db db ARGS` and returns its JSON object.
func admin(t *testing.T, bin, db string, args ...string) map[string]string {
	t.Helper()
	out, err := exec.Command(filepath.Join(bin, "ovlive"), append([]string{"admin", "--db", db}, args...)...).Output()
	if err != nil {
		t.Fatalf("ovlive admin %v: %v", args, err)
	}
	var m map[string]string
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatalf("ovlive admin %v: %v (%s)", args, err, out)
	}
	return m
}

// world is a person who owns a stream, a registered service's token in a
// 0600 file, and the owner's person token.
type world struct {
	db, person, stream, tokenFile, personToken string
}

func seed(t *testing.T, bin, db string) world {
	t.Helper()
	w := world{db: db}
	w.person = admin(t, bin, db, "person", "add", "--name", "E2E Owner")["id"]
	w.stream = admin(t, bin, db, "stream", "add", "--owner", w.person)["id"]
	svc := admin(t, bin, db, "service", "add", "--name", "codes-sandbox", "--first-party",
		"--capability", "live.agent_sandbox.register")["id"]
	w.tokenFile = filepath.Join(t.TempDir(), "service.token")
	if err := os.WriteFile(w.tokenFile, []byte(admin(t, bin, db, "token", "issue", "--service", svc)["token"]+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	w.personToken = admin(t, bin, db, "token", "issue", "--person", w.person)["token"]
	return w
}

// startWorker runs `codes-sandbox serve` checking in with live for w,
// without the browser unless extra turns it on (--browser on: the flag's
// last value wins): the browser has its own test.
func startWorker(t *testing.T, bin, live string, w world, extra ...string) (*proc, string) {
	t.Helper()
	dir := t.TempDir()
	apiToken := filepath.Join(dir, "api.token")
	if err := os.WriteFile(apiToken, []byte("e2e-api-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"serve", "--listen", "127.0.0.1:0", "--addr-file", filepath.Join(dir, "addr"),
		"--api-token-file", apiToken, "--capacity", "2", "--overcommit",
		"--live-url", live, "--stream", w.stream, "--subject", w.person, "--service-token-file", w.tokenFile, "--browser", "off"}, extra...)
	p := start(t, filepath.Join(bin, "codes-sandbox"), args...)
	return p, p.addr(t, filepath.Join(dir, "addr"))
}

// ownerView is GET /api/streams/agent/:id/plays/worker as the owner.
type ownerView struct {
	State      string          `json:"state"`
	ReceivedAt *time.Time      `json:"received_at"`
	Report     json.RawMessage `json:"report"`
	Refusal    *struct {
		Errors []struct{ Path, Message string } `json:"errors"`
	} `json:"refusal"`
}

func view(t *testing.T, live string, w world) ownerView {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, live+"/api/streams/agent/"+w.stream+"/plays/worker", nil)
	if err != nil {
		t.Fatalf("owner's view: %v", err)
	}
	req.Header.Set("Authorization", "Bearer "+w.personToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("owner's view: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("owner's view: %d %s (%v)", resp.StatusCode, body, err)
	}
	var v ownerView
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("owner's view: %v (%s)", err, body)
	}
	return v
}
