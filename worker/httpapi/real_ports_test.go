package httpapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"openvibe.network/agentsandbox/client"
	"openvibe.network/agentsandbox/sandbox"
)

// appScript is the stdlib web app the port tests run in their sandboxes.
const appScript = "../../scripts/ports/app.py"

// portWait bounds each wait of the port tests (a loaded machine starts
// python3 slowly).
const portWait = 2 * time.Minute

// startScript puts the python3 script at host path script into sandbox
// sb as name, runs it there with args in the background, and waits until
// port answers ready (a path) through the API with a 2xx.
func startScript(ctx context.Context, t *testing.T, api *realAPI, sb *client.Sandbox, script, name string, port int, ready string, args ...string) {
	t.Helper()
	src, err := os.ReadFile(script)
	if err != nil {
		t.Fatal(err)
	}
	if err := sb.Files().Put(ctx, name, bytes.NewReader(src), 0o644); err != nil {
		t.Fatalf("put %s: %v", name, err)
	}
	if _, err := sb.Start(ctx, client.ExecRequest{Argv: append([]string{"python3", name, fmt.Sprint(port)}, args...)}); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	deadline := time.Now().Add(portWait)
	for {
		status, _ := portGet(ctx, t, api, sb, port, ready)
		if status/100 == 2 {
			return
		}
		if status != http.StatusBadGateway || time.Now().After(deadline) {
			t.Fatalf("%s on port %d: GET %s answers %d", name, port, ready, status)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// portGet GETs path of sb's port through the API and returns the status
// and body.
func portGet(ctx context.Context, t *testing.T, api *realAPI, sb *client.Sandbox, port int, path string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, "GET", sb.PortURL(port)+strings.TrimPrefix(path, "/"), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header = api.w.PortHeader()
	resp, err := noRedirect(api.srv.Client()).Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// newPortSandbox creates a sandbox through api, deleted at the end of the
// test.
func newPortSandbox(ctx context.Context, t *testing.T, api *realAPI) *client.Sandbox {
	t.Helper()
	info, err := api.w.Create(ctx, client.CreateOptions{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	sb := api.w.Sandbox(info.ID)
	t.Cleanup(func() { _, _ = sb.Delete(context.Background()) })
	return sb
}

// TestRealPorts reaches servers in real sandboxes through the API: a page,
// what the app sees of a request (no token), a WebSocket echo, a 10 MB
// upload that streams (the app has read a MiB of it before the client
// sent its second half), a closed port's 502; a slow server holding every
// exchange its sandbox may have does not stall another sandbox or the
// API, and answers once released.
func TestRealPorts(t *testing.T) {
	api := newRealAPI(t, sandbox.Config{Capacity: 2}, func(c *Config) { c.Ports.MaxConns = 4 })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	sb := newPortSandbox(ctx, t, api)
	other := newPortSandbox(ctx, t, api)
	startScript(ctx, t, api, sb, appScript, "app.py", 8000, "/small", "hello through a port")
	startScript(ctx, t, api, other, appScript, "app.py", 8000, "/small", "the other sandbox")

	if status, body := portGet(ctx, t, api, sb, 8000, "/"); status != 200 || !strings.Contains(string(body), "hello through a port") {
		t.Fatalf("the page: %d %.200s", status, body)
	}
	status, body := portGet(ctx, t, api, sb, 8000, "/headers")
	var seen struct {
		Path    string            `json:"path"`
		Headers map[string]string `json:"headers"`
	}
	if err := json.Unmarshal(body, &seen); status != 200 || err != nil {
		t.Fatalf("/headers: %d %s", status, body)
	}
	host := strings.TrimPrefix(api.srv.URL, "http://")
	if seen.Path != "/headers" || seen.Headers["Authorization"] != "" || strings.Contains(string(body), testToken) ||
		seen.Headers["Host"] != host || seen.Headers["X-Forwarded-Host"] != host || seen.Headers["X-Forwarded-Proto"] != "http" ||
		seen.Headers["X-Forwarded-For"] != "127.0.0.1" || seen.Headers["X-Forwarded-Prefix"] != "/v1/sandboxes/"+sb.ID()+"/ports/8000" {
		t.Fatalf("the app saw %s", body)
	}
	if status, body := portGet(ctx, t, api, sb, 9999, "/"); status != 502 || !strings.Contains(string(body), "nothing listens on port 9999") {
		t.Fatalf("a closed port: %d %s", status, body)
	}

	t.Run("PythonHTTPServer", func(t *testing.T) {
		// python3 -m http.server as a person types it: HTTP/1.0, a file, a
		// directory's listing and its redirect to the slash, kept under the
		// route.
		if err := sb.Files().Put(ctx, "site/sub/hello.txt", strings.NewReader("hello, file\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := sb.Start(ctx, client.ExecRequest{Argv: []string{"python3", "-m", "http.server", "8001", "--bind", "127.0.0.1", "--directory", "site"}}); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(portWait)
		for {
			status, body := portGet(ctx, t, api, sb, 8001, "/sub/hello.txt")
			if status == 200 && string(body) == "hello, file\n" {
				break
			}
			if status != 502 || time.Now().After(deadline) {
				t.Fatalf("a file from http.server: %d %s", status, body)
			}
			time.Sleep(20 * time.Millisecond)
		}
		req, _ := http.NewRequestWithContext(ctx, "GET", sb.PortURL(8001)+"sub", nil)
		req.Header = api.w.PortHeader()
		resp, err := noRedirect(api.srv.Client()).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if want := "/v1/sandboxes/" + sb.ID() + "/ports/8001/sub/"; resp.StatusCode != 301 || resp.Header.Get("Location") != want {
			t.Fatalf("a directory without its slash: %d Location %q, want 301 %q", resp.StatusCode, resp.Header.Get("Location"), want)
		}
		if status, body := portGet(ctx, t, api, sb, 8001, "/sub/"); status != 200 || !strings.Contains(string(body), `href="hello.txt"`) {
			t.Fatalf("a directory's listing: %d %s", status, body)
		}
	})

	t.Run("WebSocket", func(t *testing.T) {
		u := "ws" + strings.TrimPrefix(sb.PortURL(8000), "http") + "ws"
		ws, resp, err := websocket.DefaultDialer.DialContext(ctx, u, api.w.PortHeader())
		if err != nil {
			t.Fatalf("dial %s: %v (%v)", u, err, resp)
		}
		defer ws.Close()
		for _, m := range []string{"hello", strings.Repeat("0123456789", 20000)} {
			if err := ws.WriteMessage(websocket.TextMessage, []byte(m)); err != nil {
				t.Fatal(err)
			}
			_ = ws.SetReadDeadline(time.Now().Add(portWait))
			if _, got, err := ws.ReadMessage(); err != nil || string(got) != m {
				t.Fatalf("echo of %d bytes: %d bytes, %v", len(m), len(got), err)
			}
		}
	})

	t.Run("UploadStreams", func(t *testing.T) {
		const half = 5 << 20
		pr, pw := io.Pipe()
		req, err := http.NewRequestWithContext(ctx, "POST", sb.PortURL(8000)+"upload", pr)
		if err != nil {
			t.Fatal(err)
		}
		req.Header, req.ContentLength = api.w.PortHeader(), 2*half
		sum := sha256.New()
		chunk := bytes.Repeat([]byte("upload!!"), 8192)
		send := func(n int) error {
			for ; n > 0; n -= len(chunk) {
				sum.Write(chunk)
				if _, err := pw.Write(chunk); err != nil {
					return err
				}
			}
			return nil
		}
		sent := make(chan error, 1)
		go func() {
			if err := send(half); err != nil {
				sent <- err
				return
			}
			// The app has a MiB of the body while the client still holds
			// its second half: the worker streams it.
			deadline := time.Now().Add(portWait)
			for {
				var b bytes.Buffer
				if sb.Files().Get(ctx, "upload-progress", &b) == nil {
					break
				}
				if time.Now().After(deadline) {
					sent <- errors.New("the app did not see a MiB of the upload while the client held the rest")
					pw.CloseWithError(errors.New("gave up"))
					return
				}
				time.Sleep(20 * time.Millisecond)
			}
			err := send(half)
			pw.Close()
			sent <- err
		}()
		resp, err := api.srv.Client().Do(req)
		if err != nil {
			t.Fatalf("upload: %v", err)
		}
		defer resp.Body.Close()
		if err := <-sent; err != nil {
			t.Fatal(err)
		}
		var got struct {
			Bytes  int    `json:"bytes"`
			SHA256 string `json:"sha256"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || resp.StatusCode != 200 ||
			got.Bytes != 2*half || got.SHA256 != hex.EncodeToString(sum.Sum(nil)) {
			t.Fatalf("upload answer %d %+v %v", resp.StatusCode, got, err)
		}
	})

	t.Run("SlowServer", func(t *testing.T) {
		var wg sync.WaitGroup
		results := make(chan string, 4)
		for range 4 {
			wg.Go(func() {
				status, body := portGet(ctx, t, api, sb, 8000, "/slow")
				results <- fmt.Sprint(status, " ", string(body))
			})
		}
		// Every exchange sb may have is held: a fifth is refused at once.
		deadline := time.Now().Add(portWait)
		for {
			var b bytes.Buffer
			_ = sb.Files().Get(ctx, "slow-waiting", &b)
			if strings.Count(b.String(), "\n") == 4 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the app saw %d slow requests, want 4", strings.Count(b.String(), "\n"))
			}
			time.Sleep(20 * time.Millisecond)
		}
		if status, body := portGet(ctx, t, api, sb, 8000, "/small"); status != 429 {
			t.Fatalf("a fifth exchange while four are held: %d %s", status, body)
		}
		for range 20 {
			if status, body := portGet(ctx, t, api, other, 8000, "/small"); status != 200 || string(body) != "ok" {
				t.Fatalf("the other sandbox while the first is held: %d %s", status, body)
			}
		}
		if _, err := api.w.Status(ctx); err != nil {
			t.Fatalf("the API while a sandbox's server is slow: %v", err)
		}
		select {
		case r := <-results:
			t.Fatalf("a slow exchange ended before its server was released: %s", r)
		default:
		}
		if err := sb.Files().Put(ctx, "go-slow", strings.NewReader(""), 0o644); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		close(results)
		for r := range results {
			if r != "200 slow done" {
				t.Fatalf("a slow exchange once released: %s", r)
			}
		}
	})
}

// TestRealPortsHostile: a hostile server in a real sandbox is cut off at
// the bounds: an endless answer head (502), an endless body (cut off at
// the bound), and a server that accepts every connection and never
// answers, asked 10,000 times, sees at most the sandbox's bound of
// connections at once (the rest are 429s, the held ones 504s); the
// worker's descriptors and memory are where they were.
func TestRealPortsHostile(t *testing.T) {
	api := newRealAPI(t, sandbox.Config{Capacity: 1}, func(c *Config) {
		c.Ports.HeaderTimeout = time.Second
		c.Ports.MaxResponseBody = 8 << 20
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	sb := newPortSandbox(ctx, t, api)
	startScript(ctx, t, api, sb, "testdata/hostile.py", "hostile.py", 8000, "/ok")
	cl := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
	defer cl.CloseIdleConnections()
	get := func(path string) (*http.Response, error) {
		req, err := http.NewRequestWithContext(ctx, "GET", sb.PortURL(8000)+strings.TrimPrefix(path, "/"), nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header = api.w.PortHeader()
		return cl.Do(req)
	}
	status := func(path string) (int, string) {
		resp, err := get(path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	endlessBody := func() (int64, error) {
		resp, err := get("/endless-body")
		if err != nil {
			t.Fatalf("GET /endless-body: %v", err)
		}
		defer resp.Body.Close()
		return io.Copy(io.Discard, resp.Body)
	}
	// Once before measuring: what the first exchanges make stays made.
	status("/endless-headers")
	_, _ = endlessBody()
	cl.CloseIdleConnections()
	fds, heap := settle(t, -1, 0)

	if code, body := status("/endless-headers"); code != 502 || !strings.Contains(body, fmt.Sprintf("head over %d bytes", DefaultPortMaxHeader)) {
		t.Errorf("an endless head: %d %s", code, body)
	}
	if n, err := endlessBody(); err == nil || n > 8<<20 {
		t.Errorf("an endless body: %d bytes read, err %v; want it cut off at 8 MiB", n, err)
	}

	const requests, clients = 10000, 256
	var mu sync.Mutex
	statuses := map[int]int{}
	var wg sync.WaitGroup
	next := make(chan struct{})
	go func() {
		defer close(next)
		for range requests {
			next <- struct{}{}
		}
	}()
	for range clients {
		wg.Go(func() {
			for range next {
				code, _ := status("/hold")
				mu.Lock()
				statuses[code]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if statuses[429]+statuses[504] != requests || statuses[504] == 0 || statuses[429] == 0 {
		t.Errorf("answers to %d requests of a server that never answers: %v, want only 429s and 504s", requests, statuses)
	}
	var stats bytes.Buffer
	if err := sb.Files().Get(ctx, "hostile-stats", &stats); err != nil {
		t.Fatal(err)
	}
	var most, total int
	if _, err := fmt.Sscan(stats.String(), &most, &total); err != nil || most > DefaultPortMaxConns {
		t.Errorf("the server held %d connections at once (of %d it accepted), want at most %d (%v)", most, total, DefaultPortMaxConns, err)
	}
	t.Logf("answers %v; the server accepted %d connections, at most %d at once", statuses, total, most)
	if code, body := status("/ok"); code != 200 || body != "ok" {
		t.Errorf("after the flood: %d %s", code, body)
	}
	cl.CloseIdleConnections()
	settle(t, fds, heap)
}

// settle waits until this process (the worker and the test's client) holds
// at most fds+16 descriptors and its heap is at most heap+32 MiB, failing
// after portWait; with fds < 0 it only measures. It returns the descriptors
// and the heap in use.
func settle(t *testing.T, fds int, heap uint64) (int, uint64) {
	t.Helper()
	deadline := time.Now().Add(portWait)
	for {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		ents, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Fatal(err)
		}
		if fds < 0 || (len(ents) <= fds+16 && ms.HeapAlloc <= heap+32<<20) {
			return len(ents), ms.HeapAlloc
		}
		if time.Now().After(deadline) {
			t.Fatalf("the worker holds %d descriptors and %d MiB of heap, %d and %d MiB before", len(ents), ms.HeapAlloc>>20, fds, heap>>20)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
