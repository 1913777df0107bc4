package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"openvibe.network/agentsandbox/client"
	"openvibe.network/agentsandbox/internal/cdp"
	"openvibe.network/agentsandbox/internal/testenv"
	"openvibe.network/agentsandbox/sandbox"
	"openvibe.network/agentsandbox/sandbox/control"
)

// dialBrowser opens the browser WebSocket of sandbox id as a CDP client
// would (one that joins a fragmented message, as every CDP client does).
func dialBrowser(ctx context.Context, tb testing.TB, w *client.Worker, id string) *websocket.Conn {
	tb.Helper()
	ws, resp, err := websocket.DefaultDialer.DialContext(ctx, w.BrowserURL(id), w.BrowserHeader())
	if err != nil {
		tb.Fatalf("dial the browser: %v (%v)", err, resp)
	}
	ws.SetReadLimit(-1)
	return ws
}

// requireChromium returns the host's Chromium, or skips or fails (see
// testenv.Missing).
func requireChromium(tb testing.TB) string {
	tb.Helper()
	p := sandbox.FindBrowser()
	if p == "" {
		testenv.Missing(tb, "Chromium is not installed: apt-get install -y chromium")
	}
	return p
}

// newBrowserSandbox serves the API (its Config adjusted by mod) on a real
// runtime of one slot with Chromium, creates a browser sandbox through it
// (deleted at the end of the test) and returns a context for the test's
// calls, the API and the sandbox.
func newBrowserSandbox(t *testing.T, mod func(*Config)) (context.Context, *realAPI, *client.Sandbox) {
	t.Helper()
	api := newRealAPI(t, sandbox.Config{Capacity: 1, Browser: requireChromium(t)}, func(c *Config) {
		c.Browser = true
		mod(c)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	info, err := api.w.Create(ctx, client.CreateOptions{Browser: true})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	sb := api.w.Sandbox(info.ID)
	t.Cleanup(func() { _, _ = sb.Delete(context.Background()) })
	return ctx, api, sb
}

// askVersion sends Browser.getVersion and returns its answer's product.
func askVersion(t *testing.T, ws *websocket.Conn, id int) (string, error) {
	t.Helper()
	msg := `{"id":` + strconv.Itoa(id) + `,"method":"Browser.getVersion"}`
	if err := ws.WriteMessage(websocket.TextMessage, []byte(msg)); err != nil {
		return "", err
	}
	for {
		_, data, err := ws.ReadMessage()
		if err != nil {
			return "", err
		}
		var ans struct {
			ID     int `json:"id"`
			Result struct {
				Product string `json:"product"`
			} `json:"result"`
		}
		if json.Unmarshal(data, &ans) == nil && ans.ID == id {
			return ans.Result.Product, nil
		}
	}
}

// TestRealBrowserBounds: the browser's WebSocket carries CDP both ways; one
// connection per sandbox (409 browser_busy for another); a message over the
// worker's bound ends the connection, not the browser, which the next
// connection finds running.
func TestRealBrowserBounds(t *testing.T) {
	ctx, api, sb := newBrowserSandbox(t, func(c *Config) { c.BrowserMaxMessage = 4096 })

	ws := dialBrowser(ctx, t, api.w, sb.ID())
	if p, err := askVersion(t, ws, 1); err != nil || !strings.Contains(p, "Chrome/") {
		t.Fatalf("Browser.getVersion: %q %v", p, err)
	}
	if _, err := sb.BrowserVersion(ctx); !errors.Is(err, client.ErrBrowserBusy) {
		t.Errorf("json/version while connected: %v, want ErrBrowserBusy", err)
	}
	big := `{"id":2,"method":"Runtime.evaluate","params":{"expression":"` + strings.Repeat("1", 5000) + `"}}`
	_ = ws.WriteMessage(websocket.TextMessage, []byte(big))
	_ = ws.SetReadDeadline(time.Now().Add(time.Minute))
	for {
		_, data, err := ws.ReadMessage()
		if err != nil {
			break // the worker ended the connection
		}
		var ans struct{ ID int }
		if json.Unmarshal(data, &ans) == nil && ans.ID == 2 {
			t.Fatalf("a message over the bound reached the browser: it answered %.100s", data)
		}
	}
	ws.Close()
	var v client.BrowserVersion
	var err error
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		// The worker notices the closed connection at once, but the
		// sandbox's init may take a moment to see its client go.
		if v, err = sb.BrowserVersion(ctx); err == nil || !errors.Is(err, client.ErrBrowserBusy) || time.Now().After(deadline) {
			break
		}
	}
	if err != nil || v.WebSocketDebuggerURL != sb.BrowserURL() {
		t.Fatalf("json/version after the connection ended: %+v %v", v, err)
	}
	ws = dialBrowser(ctx, t, api.w, sb.ID())
	defer ws.Close()
	if p, err := askVersion(t, ws, 3); err != nil || p != v.Browser {
		t.Fatalf("the browser after a message over the bound: %q %v (want %q)", p, err, v.Browser)
	}
}

// wsTransport carries CDP messages over the browser's WebSocket.
type wsTransport struct{ ws *websocket.Conn }

func (w wsTransport) Send(msg []byte) error { return w.ws.WriteMessage(websocket.TextMessage, msg) }

func (w wsTransport) Next() ([]byte, error) {
	_, data, err := w.ws.ReadMessage()
	return data, err
}

// BenchmarkRealBrowser measures, through the API against the real runtime
// (a pool of one sandbox started ahead, as a worker runs), the time from
// POST /v1/sandboxes {"browser":true} to the answer of the first CDP
// Page.navigate (a page served inside the sandbox), and the sandbox's
// memory (its cgroup's, the pages of the files it read included) idle,
// once the browser opened its blank page, and after that one page loaded;
// it reports the p50 and p90 of each. Run with -benchtime=20x
// for 20 rounds.
func BenchmarkRealBrowser(b *testing.B) {
	api := newRealAPI(b, sandbox.Config{Capacity: 1, Pool: 1, Browser: requireChromium(b)}, func(c *Config) { c.Browser = true })
	ctx := context.Background()
	r := rounds{}
	var idle, loaded []float64
	for b.Loop() {
		b.StopTimer()
		for api.rt.Pooled() < 1 {
			time.Sleep(time.Millisecond)
		}
		b.StartTimer()
		start := time.Now()
		info, err := api.w.Create(ctx, client.CreateOptions{Browser: true})
		if err != nil {
			b.Fatalf("create: %v", err)
		}
		sb := api.w.Sandbox(info.ID)
		if _, err := sb.Start(ctx, client.ExecRequest{Argv: []string{control.InitPath, control.ServeMarker, "127.0.0.1:8000", "page"}}); err != nil {
			b.Fatal(err)
		}
		ws := dialBrowser(ctx, b, api.w, info.ID)
		c := cdp.New(wsTransport{ws})
		page, err := c.NewPage("")
		if err != nil {
			b.Fatal(err)
		}
		// Idle: the browser started, with its one blank page (the look is
		// not counted in the time).
		look := time.Now()
		if u, err := sb.Usage(ctx); err == nil {
			idle = append(idle, float64(u.MemoryBytes)/(1<<20))
		}
		start = start.Add(time.Since(look))
		firstPage := time.Now()
		if errText, err := page.Navigate("http://127.0.0.1:8000/"); err != nil || errText != "" {
			b.Fatalf("navigate: %q %v", errText, err)
		}
		r["to-first-navigate"] = append(r["to-first-navigate"], time.Since(start))
		r["navigate"] = append(r["navigate"], time.Since(firstPage))
		b.StopTimer()
		if text, err := page.Text(); err != nil || text != "page" {
			b.Fatalf("the page: %q %v", text, err)
		}
		if u, err := sb.Usage(ctx); err == nil {
			loaded = append(loaded, float64(u.MemoryBytes)/(1<<20))
		}
		ws.Close()
		if _, err := sb.Delete(ctx); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	r.report(b)
	for name, v := range map[string][]float64{"idle-MiB": idle, "after-one-page-MiB": loaded} {
		slices.Sort(v)
		if len(v) > 0 {
			b.ReportMetric(v[(len(v)-1)/2], name+"-p50")
		}
	}
}

// TestRealBrowserSlowClient: a CDP client that stops reading while the
// browser answers it megabytes holds up nobody: the API answers meanwhile,
// the worker cuts the client off after its write timeout, and the next
// client gets the browser.
func TestRealBrowserSlowClient(t *testing.T) {
	ctx, api, sb := newBrowserSandbox(t, func(c *Config) { c.WriteTimeout = time.Second })
	stalled := dialBrowser(ctx, t, api.w, sb.ID())
	defer stalled.Close()
	page, err := cdp.New(wsTransport{stalled}).NewPage("")
	if err != nil {
		t.Fatal(err)
	}
	// 64 answers of 1 MiB each, far more than the sockets buffer; never read.
	for i := range 64 {
		msg := `{"id":` + strconv.Itoa(1000+i) + `,"sessionId":"` + page.SessionID + `","method":"Runtime.evaluate","params":{"expression":"'x'.repeat(1<<20)","returnByValue":true}}`
		if err := stalled.WriteMessage(websocket.TextMessage, []byte(msg)); err != nil {
			break // the worker may cut it off already
		}
	}
	start := time.Now()
	if _, err := api.w.Status(ctx); err != nil || time.Since(start) > 5*time.Second {
		t.Errorf("the API while a browser client stalls: %v after %v", err, time.Since(start))
	}
	var v client.BrowserVersion
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		if v, err = sb.BrowserVersion(ctx); err == nil || !errors.Is(err, client.ErrBrowserBusy) || time.Now().After(deadline) {
			break
		}
	}
	if err != nil || v.Browser == "" {
		t.Fatalf("the next client, after the stalled one: %+v %v", v, err)
	}
}

// TestRealBrowserStreamsLargeMessages: a browser's message of many
// megabytes reaches its client whole, in many frames, and the worker holds
// none of it whole (what the API's side of this process allocates meanwhile
// stays a fraction of the message; the client reads it as a stream).
func TestRealBrowserStreamsLargeMessages(t *testing.T) {
	const size = 16 << 20
	ctx, api, sb := newBrowserSandbox(t, func(*Config) {})
	ws := dialBrowser(ctx, t, api.w, sb.ID())
	defer ws.Close()
	page, err := cdp.New(wsTransport{ws}).NewPage("")
	if err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	msg := `{"id":77,"sessionId":"` + page.SessionID + `","method":"Runtime.evaluate","params":{"expression":"'x'.repeat(` +
		strconv.Itoa(size) + `)","returnByValue":true}}`
	if err := ws.WriteMessage(websocket.TextMessage, []byte(msg)); err != nil {
		t.Fatal(err)
	}
	_ = ws.SetReadDeadline(time.Now().Add(time.Minute))
	for {
		_, r, err := ws.NextReader()
		if err != nil {
			t.Fatalf("reading the answer: %v", err)
		}
		head := make([]byte, 16)
		n, _ := io.ReadFull(r, head)
		rest, err := io.Copy(io.Discard, r)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(string(head[:n]), `{"id":77,`) {
			continue
		}
		if total := int64(n) + rest; total < size {
			t.Fatalf("the answer is %d bytes, want over %d", total, size)
		}
		break
	}
	runtime.ReadMemStats(&after)
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > size/4 {
		t.Fatalf("forwarding a %d MiB message allocated %d MiB in this process, want a fraction of it", size>>20, alloc>>20)
	}
}

// BenchmarkRealBrowserPool measures, through the API, a browser sandbox's
// create to the answer of its first CDP Page.navigate (a page served inside
// the sandbox: its server started, a new page, the navigate) for a sandbox
// of the browser pool (Chromium started ahead) against a cold one (Chromium
// started by the first connection), interleaved round by round on one
// runtime of two slots, the side that goes first alternating. Before each
// timed create the pool is full, its filler idle and its Chromium settled
// for two seconds: the pooled side's second slot holds a plain sandbox, so
// the pool's refill does not run during the pooled round; the cold side's
// create takes the free slot beside the pooled one (an environment keeps
// it from the pool). It reports
// each side's p50 and p90, the ratio of the p50s, and a warm sandbox's
// memory before any client: its cgroup's (what its limit counts) and the
// sum of its processes' PSS (their share of the host's memory).
func BenchmarkRealBrowserPool(b *testing.B) {
	const settle = 2 * time.Second
	api := newRealAPI(b, sandbox.Config{Capacity: 2, PoolBrowser: 1, Browser: requireChromium(b)}, func(c *Config) { c.Browser = true })
	ctx := context.Background()
	r := rounds{}
	var cgroupMiB, pssMiB []float64
	waitPool := func() {
		for api.rt.Pooled() < 1 {
			time.Sleep(time.Millisecond)
		}
		// A pooled sandbox waits far longer than this in a worker: let the
		// Chromium just started finish its own start-up work first (both
		// sides wait alike).
		time.Sleep(settle)
	}
	side := func(name string, opts client.CreateOptions) {
		start := time.Now()
		info, err := api.w.Create(ctx, opts)
		if err != nil {
			b.Fatalf("create: %v", err)
		}
		sb := api.w.Sandbox(info.ID)
		phase := start
		lap := func(what string) {
			r[name+"-"+what] = append(r[name+"-"+what], time.Since(phase))
			phase = time.Now()
		}
		lap("create")
		if name == "pooled" { // not timed
			look := time.Now()
			if u, err := sb.Usage(ctx); err == nil {
				cgroupMiB = append(cgroupMiB, float64(u.MemoryBytes)/(1<<20))
			}
			pssMiB = append(pssMiB, sandboxPSS(b, api.rt, info.ID))
			start = start.Add(time.Since(look))
			phase = time.Now()
		}
		if _, err := sb.Start(ctx, client.ExecRequest{Argv: []string{control.InitPath, control.ServeMarker, "127.0.0.1:8000", "page"}}); err != nil {
			b.Fatal(err)
		}
		lap("server")
		ws := dialBrowser(ctx, b, api.w, info.ID)
		lap("dial")
		page, err := cdp.New(wsTransport{ws}).NewPage("")
		if err != nil {
			b.Fatal(err)
		}
		lap("newpage")
		for {
			errText, err := page.Navigate("http://127.0.0.1:8000/")
			if err != nil {
				b.Fatalf("navigate: %v", err)
			}
			if errText == "" {
				break
			}
			if time.Since(start) > time.Minute {
				b.Fatalf("navigate: %s", errText)
			}
			time.Sleep(time.Millisecond) // the page server still starting (counted)
		}
		lap("navigate")
		r[name] = append(r[name], time.Since(start))
		ws.Close()
		if _, err := sb.Delete(ctx); err != nil {
			b.Fatal(err)
		}
	}
	pooled := func() {
		waitPool()
		blocker, err := api.w.Create(ctx, client.CreateOptions{}) // holds the free slot: no refill meanwhile
		if err != nil {
			b.Fatal(err)
		}
		side("pooled", client.CreateOptions{Browser: true})
		if _, err := api.w.Delete(ctx, blocker.ID); err != nil {
			b.Fatal(err)
		}
	}
	cold := func() {
		waitPool()
		side("cold", client.CreateOptions{Browser: true, Env: map[string]string{"BENCH": "cold"}})
	}
	for i := 0; b.Loop(); i++ {
		if i%2 == 0 {
			pooled()
			cold()
		} else {
			cold()
			pooled()
		}
	}
	r.report(b)
	p50 := func(v []time.Duration) time.Duration { return v[(len(v)-1)/2] } // sorted by report
	b.ReportMetric(float64(p50(r["pooled"]))/float64(p50(r["cold"])), "p50-ratio")
	for name, v := range map[string][]float64{"warm-cgroup-MiB": cgroupMiB, "warm-pss-MiB": pssMiB} {
		slices.Sort(v)
		b.ReportMetric(v[(len(v)-1)/2], name+"-p50")
	}
}

// sandboxPSS sums the proportional set size of sandbox id's processes, in
// MiB: the host memory they account for, shared pages split among their
// users.
func sandboxPSS(tb testing.TB, rt *sandbox.Runtime, id string) float64 {
	tb.Helper()
	pids, err := rt.HostPids(id)
	if err != nil {
		tb.Fatal(err)
	}
	var kib int64
	for _, pid := range pids {
		data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/smaps_rollup")
		if err != nil {
			continue // ended meanwhile
		}
		for _, l := range strings.Split(string(data), "\n") {
			if v, ok := strings.CutPrefix(l, "Pss:"); ok {
				n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
				kib += n
			}
		}
	}
	return float64(kib) / 1024
}
