package main

import (
	"bufio"
	"bytes"
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
)

// binary is the ovlive binary that TestMain builds for the process tests,
// with linkedVersion as its version.
var binary string

const linkedVersion = "9.9.9-test"

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "ovlive-test-")
	if err == nil {
		err = os.Chmod(dir, 0o755) // a test runs it as another user
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "ovlive")
	gobin, err := exec.LookPath("go")
	if err != nil {
		gobin = filepath.Join(os.Getenv("GOROOT"), "bin", "go")
	}
	ldflags := "-X openvibe.network/agentsandbox/internal/buildinfo.version=" + linkedVersion
	if out, err := exec.Command(gobin, "build", "-ldflags", ldflags, "-o", binary, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build ovlive: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// server is an `ovlive serve` process listening on 127.0.0.1.
type server struct {
	cmd  *exec.Cmd
	addr string
	done chan struct{} // closed when the process has exited
	err  error         // its exit status, once done
	mu   sync.Mutex
	log  bytes.Buffer // its stderr
}

// startServer runs `ovlive serve --listen 127.0.0.1:0 args...` and waits
// for its "listening" log line. The process is killed when tb ends.
func startServer(tb testing.TB, args ...string) *server {
	tb.Helper()
	return startServerCmd(tb, exec.Command(binary, append([]string{"serve", "--listen", "127.0.0.1:0"}, args...)...))
}

// readLog keeps the server's log, sends the address of its "listening"
// line to addr, and records the exit once the log ends.
func (s *server) readLog(r io.Reader, addr chan<- string) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Bytes()
		s.mu.Lock()
		s.log.Write(line)
		s.log.WriteByte('\n')
		s.mu.Unlock()
		var rec struct{ Msg, Addr string }
		if json.Unmarshal(line, &rec) == nil && rec.Msg == "listening" {
			addr <- rec.Addr
		}
	}
	s.err = s.cmd.Wait()
	close(s.done)
}

func (s *server) logText() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.log.String()
}

// stop sends SIGTERM and wants a clean exit with "stopped" logged.
func (s *server) stop(tb testing.TB) {
	tb.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		tb.Fatal(err)
	}
	s.wait(tb)
	if s.err != nil || !strings.Contains(s.logText(), `"msg":"stopped"`) {
		tb.Fatalf("ovlive serve after SIGTERM: %v\n%s", s.err, s.logText())
	}
}

// kill sends SIGKILL and waits for the process to die.
func (s *server) kill(tb testing.TB) {
	tb.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		tb.Fatal(err)
	}
	s.wait(tb)
}

func (s *server) wait(tb testing.TB) {
	tb.Helper()
	select {
	case <-s.done:
	case <-time.After(2 * time.Minute):
		tb.Fatalf("ovlive serve did not exit:\n%s", s.logText())
	}
}

// url returns the server's URL for path.
func (s *server) url(path string) string { return "http://" + s.addr + path }

// newClient returns an HTTP client for up to n concurrent requests.
func newClient(n int) *http.Client {
	return &http.Client{
		Timeout:   time.Minute,
		Transport: &http.Transport{MaxIdleConns: n, MaxIdleConnsPerHost: n, MaxConnsPerHost: n},
	}
}

// world is what admin set up: an owner, her streams, and a worker service.
type world struct {
	db, schema   string
	person       string
	personToken  string
	serviceToken string
	streams      []string
}

// setup creates, with `ovlive admin` (in process), an owner with n streams
// and a first-party service allowed to check in.
func setup(tb testing.TB, db, schema string, n int) world {
	tb.Helper()
	w := world{db: db, schema: schema}
	a := func(args ...string) map[string]any {
		if schema != "" {
			args = append([]string{"--db-schema", schema}, args...)
		}
		return admin(tb, db, args...)
	}
	w.person = str(tb, a("person", "add", "--name", "Ada"), "id")
	for i := range n {
		w.streams = append(w.streams, str(tb, a("stream", "add", "--owner", w.person, "--id", fmt.Sprintf("stream-%03d", i)), "id"))
	}
	svc := str(tb, a("service", "add", "--name", "codes-sandbox", "--first-party", "--capability", "live.agent_sandbox.register"), "id")
	w.serviceToken = str(tb, a("token", "issue", "--service", svc), "token")
	w.personToken = str(tb, a("token", "issue", "--person", w.person), "token")
	return w
}

// report returns the contract-valid report of testdata with a top-level
// "load_seq" field that names the stream and the sequence number.
func report(tb testing.TB, stream string, seq int) []byte {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "worker-check-in.json"))
	if err != nil {
		tb.Fatal(err)
	}
	return append([]byte(fmt.Sprintf(`{"load_seq":"%s/%d",`, stream, seq)), bytes.TrimPrefix(bytes.TrimSpace(b), []byte("{"))...)
}

// checkIn posts body for stream and returns the status and, on 200, the
// receive time the server answered.
func checkIn(ctx context.Context, c *http.Client, s *server, w world, stream string, body []byte) (int, time.Time, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url("/api/streams/agent/"+stream+"/plays/worker"), bytes.NewReader(body))
	if err != nil {
		return 0, time.Time{}, err
	}
	req.Header.Set("Authorization", "Bearer "+w.serviceToken)
	req.Header.Set("X-OV-Subject", w.person)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return 0, time.Time{}, err
	}
	defer resp.Body.Close()
	var out struct {
		ReceivedAt time.Time `json:"received_at"`
	}
	if resp.StatusCode == http.StatusOK {
		err = json.NewDecoder(resp.Body).Decode(&out)
	} else {
		_, _ = io.Copy(io.Discard, resp.Body)
	}
	return resp.StatusCode, out.ReceivedAt, err
}

// view is the owner's view of a stream's worker.
type view struct {
	State      string    `json:"state"`
	ReceivedAt time.Time `json:"received_at"`
	Report     struct {
		LoadSeq string `json:"load_seq"`
	} `json:"report"`
	Refusal *struct {
		At time.Time `json:"at"`
	} `json:"refusal"`
}

// ownerView reads the owner's view of stream through s.
func ownerView(tb testing.TB, c *http.Client, s *server, w world, stream string) view {
	tb.Helper()
	req, err := http.NewRequestWithContext(tb.Context(), http.MethodGet, s.url("/api/streams/agent/"+stream+"/plays/worker"), nil)
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+w.personToken)
	resp, err := c.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var v view
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &v) != nil {
		tb.Fatalf("owner view of %s: %d %s", stream, resp.StatusCode, body)
	}
	return v
}
