package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/gorilla/websocket"
	"openvibe.network/agentsandbox/worker/httpapi/apitest"
)

// seen is what the app behind a port saw of a request.
type seen struct {
	Method, Path, RawPath, Query, Host string
	Header                             http.Header
	BodyLen                            int
}

// appServer is a test's stand-in for a server in a sandbox (the fake
// reaches it on loopback): /echo answers what it saw, /redirect redirects
// to its query's `to`, /ws echoes WebSocket messages, /block waits for
// release, /big answers n bytes, /head answers a head of n header bytes.
type appServer struct {
	srv     *httptest.Server
	release chan struct{}
	started chan struct{}
	conns   atomic.Int64 // connections accepted
}

func newAppServer(tb testing.TB) *appServer {
	tb.Helper()
	a := &appServer{release: make(chan struct{}), started: make(chan struct{}, 100)}
	mux := http.NewServeMux()
	mux.HandleFunc("/echo/", func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(seen{r.Method, r.URL.Path, r.URL.RawPath, r.URL.RawQuery, r.Host, r.Header, int(n)})
	})
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", r.URL.Query().Get("to"))
		w.WriteHeader(http.StatusFound)
	})
	mux.HandleFunc("/ws", func(w http.ResponseWriter, r *http.Request) {
		c, err := (&websocket.Upgrader{}).Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer c.Close()
		for {
			kind, m, err := c.ReadMessage()
			if err != nil || c.WriteMessage(kind, append([]byte("echo:"), m...)) != nil {
				return
			}
		}
	})
	mux.HandleFunc("/block", func(w http.ResponseWriter, r *http.Request) {
		a.started <- struct{}{}
		select {
		case <-a.release:
		case <-r.Context().Done():
		}
		w.Write([]byte("released"))
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, _ *http.Request) {
		chunk := bytes.Repeat([]byte("x"), 1024)
		for range 1024 {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
	mux.HandleFunc("/early", func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "too large for me", http.StatusRequestEntityTooLarge)
	})
	a.srv = httptest.NewUnstartedServer(mux)
	a.srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			a.conns.Add(1)
		}
	}
	a.srv.Start()
	tb.Cleanup(a.srv.Close)
	tb.Cleanup(func() {
		select {
		case <-a.release:
		default:
			close(a.release)
		}
	})
	return a
}

// addr is the app's loopback address.
func (a *appServer) addr() string { return a.srv.Listener.Addr().String() }

// doPort is ts.do with a client that never follows a redirect (a test's
// redirects name hosts nobody may look up).
func (ts *testServer) doPort(tb testing.TB, method, path, body string, hdr map[string]string) answer {
	tb.Helper()
	req, err := http.NewRequest(method, ts.srv.URL+path, strings.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := noRedirect(ts.srv.Client()).Do(req)
	if err != nil {
		tb.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatalf("%s %s: read: %v", method, path, err)
	}
	return answer{resp.StatusCode, resp.Header, b}
}

// noRedirect is a copy of c that never follows a redirect.
func noRedirect(c *http.Client) *http.Client {
	cp := *c
	cp.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &cp
}

// portServer serves the API on a fake with sandbox sb-1 whose port 8000 is
// an appServer.
func portServer(t *testing.T, mod func(*Config)) (*testServer, *appServer) {
	t.Helper()
	fake := apitest.NewFake(2)
	id := mustCreate(t, fake)
	app := newAppServer(t)
	fake.ServePort(id, 8000, app.addr())
	return newTestServer(t, fake, mod), app
}

// portRouteCases are the answers of the port routes that the route table
// checks (and the OpenAPI test against the document).
func portRouteCases() []routeCase {
	previews := func(c *Config) { c.Ports.PreviewBaseURL = "http://{port}-{id}.localhost:8089" }
	return []routeCase{
		{name: "ErrPortClosed", method: "GET", path: "/v1/sandboxes/{id}/ports/8000/x", wantStatus: 502, wantCode: "port_closed", wantMsg: "nothing listens on port 8000"},
		{name: "ErrPortClosedPost", method: "POST", path: "/v1/sandboxes/{id}/ports/8000/", body: "x", wantStatus: 502, wantCode: "port_closed"},
		{name: "ErrPortBad", method: "DELETE", path: "/v1/sandboxes/{id}/ports/x/", wantStatus: 400, wantCode: "invalid_request"},
		{name: "ErrPortSandbox", method: "GET", path: "/v1/sandboxes/nope/ports/8000/", wantStatus: 404, wantCode: "sandbox_not_found"},
		{name: "ErrPortDotSegment", method: "GET", path: "/v1/sandboxes/{id}/ports/8000/a/../b", wantStatus: 400, wantCode: "invalid_request"},
		{name: "ErrNoPreview", method: "POST", path: "/v1/sandboxes/{id}/ports/8000/preview", body: "{}", wantStatus: 501, wantCode: "no_preview"},
		{name: "Preview", method: "POST", path: "/v1/sandboxes/{id}/ports/8000/preview", body: `{"ttl_seconds":5}`, mod: previews, wantStatus: 200,
			check: func(t *testing.T, _ *testServer, a answer) {
				if !strings.Contains(string(a.body), `"url":"http://8000-sb-1.localhost:8089/?sandbox_preview_token=`) {
					t.Fatalf("preview %s", a.body)
				}
			}},
		{name: "PreviewEmptyBody", method: "POST", path: "/v1/sandboxes/{id}/ports/8000/preview", mod: previews, wantStatus: 200},
		{name: "ErrPreviewTTL", method: "POST", path: "/v1/sandboxes/{id}/ports/8000/preview", body: `{"ttl_seconds":1e9}`, mod: previews, wantStatus: 400, wantCode: "invalid_request"},
		{name: "ErrPreviewSandbox", method: "POST", path: "/v1/sandboxes/nope/ports/8000/preview", body: `{}`, mod: previews, wantStatus: 404, wantCode: "sandbox_not_found"},
	}
}

// TestPortForward: a request through the port route reaches the app as it
// was sent, but for the worker's token; the forwarding headers say what it
// was; the app's redirects to its own paths stay under the route.
func TestPortForward(t *testing.T) {
	ts, _ := portServer(t, nil)
	host := strings.TrimPrefix(ts.srv.URL, "http://")
	a := ts.doPort(t, "PUT", "/v1/sandboxes/sb-1/ports/8000/echo/a%2Fb/c?x=1&y=%20", "body!", map[string]string{"Cookie": "app=1", "X-Forwarded-For": "6.6.6.6"})
	if a.status != 200 {
		t.Fatalf("status %d: %s", a.status, a.body)
	}
	var got seen
	if err := json.Unmarshal(a.body, &got); err != nil {
		t.Fatal(err)
	}
	if got.Header.Get("Authorization") != "" || strings.Contains(string(a.body), testToken) {
		t.Fatalf("the worker's token reached the app: %s", a.body)
	}
	want := seen{Method: "PUT", Path: "/echo/a/b/c", RawPath: "/echo/a%2Fb/c", Query: "x=1&y=%20", Host: host, BodyLen: 5}
	hdr := map[string]string{"X-Forwarded-For": "127.0.0.1", "X-Forwarded-Host": host, "X-Forwarded-Proto": "http",
		"X-Forwarded-Prefix": "/v1/sandboxes/sb-1/ports/8000", "Cookie": "app=1"}
	for k, v := range hdr {
		if got.Header.Get(k) != v {
			t.Errorf("the app saw %s %q, want %q", k, got.Header.Get(k), v)
		}
	}
	got.Header = nil
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("the app saw (-want +got):\n%s", diff)
	}

	for _, tc := range []struct{ to, want string }{
		{"/dir/", "/v1/sandboxes/sb-1/ports/8000/dir/"},
		{"http://" + host + "/x?y", "http://" + host + "/v1/sandboxes/sb-1/ports/8000/x?y"},
		{"//elsewhere.example/x", "//elsewhere.example/x"},
		{"https://elsewhere.example/", "https://elsewhere.example/"},
		{"rel/ative", "rel/ative"},
	} {
		a := ts.doPort(t, "GET", "/v1/sandboxes/sb-1/ports/8000/redirect?to="+tc.to, "", nil)
		if loc := a.header.Get("Location"); a.status != 302 || loc != tc.want {
			t.Errorf("redirect to %q: %d Location %q, want %q", tc.to, a.status, loc, tc.want)
		}
	}
	if a := ts.doPort(t, "HEAD", "/v1/sandboxes/sb-1/ports/8000/echo/", "", nil); a.status != 200 {
		t.Errorf("HEAD: %d", a.status)
	}
}

// TestPortKeepAlive: a port's connection is kept for its next requests;
// one its server closed meanwhile is replaced without the client seeing it.
func TestPortKeepAlive(t *testing.T) {
	ts, app := portServer(t, nil)
	for range 20 {
		if a := ts.doPort(t, "GET", "/v1/sandboxes/sb-1/ports/8000/echo/", "", nil); a.status != 200 {
			t.Fatalf("GET: %d %s", a.status, a.body)
		}
	}
	if n := app.conns.Load(); n != 1 {
		t.Fatalf("20 GETs one after another took %d connections, want 1", n)
	}
	app.srv.CloseClientConnections()
	if a := ts.doPort(t, "GET", "/v1/sandboxes/sb-1/ports/8000/echo/", "", nil); a.status != 200 {
		t.Fatalf("GET after the server closed its connections: %d %s", a.status, a.body)
	}
}

// TestPortBodies: a request body of unknown length (chunked) reaches the
// app whole; an app that answers before it read a large body is answered
// as it did.
func TestPortBodies(t *testing.T) {
	ts, _ := portServer(t, nil)
	for _, tc := range []struct {
		name, path string
		size       int
		chunked    bool
		want       int
	}{
		{"Chunked", "/echo/", 3 << 20, true, 200},
		{"EarlyAnswer", "/early", 8 << 20, false, 413},
		{"EarlyAnswerChunked", "/early", 8 << 20, true, 413},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var body io.Reader = bytes.NewReader(make([]byte, tc.size))
			if tc.chunked {
				body = io.MultiReader(body) // no length known
			}
			req, _ := http.NewRequest("POST", ts.srv.URL+"/v1/sandboxes/sb-1/ports/8000"+tc.path, body)
			req.Header.Set("Authorization", "Bearer "+testToken)
			resp, err := noRedirect(ts.srv.Client()).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Fatalf("%d %s, want %d", resp.StatusCode, b, tc.want)
			}
			var got seen
			if tc.want == 200 && (json.Unmarshal(b, &got) != nil || got.BodyLen != tc.size) {
				t.Fatalf("the app read %s, want %d bytes", b, tc.size)
			}
		})
	}
}

// TestPortErrors: what the port route answers when it cannot forward.
func TestPortErrors(t *testing.T) {
	for _, tc := range []struct {
		name, method, path, body string
		mod                      func(*Config)
		wantStatus               int
		wantCode, wantMsg        string
	}{
		{name: "Closed", method: "GET", path: "/v1/sandboxes/sb-1/ports/9000/", wantStatus: 502, wantCode: "port_closed",
			wantMsg: "nothing listens on port 9000 in sandbox sb-1; start a server on 127.0.0.1:9000"},
		{name: "UnknownSandbox", method: "GET", path: "/v1/sandboxes/nope/ports/8000/", wantStatus: 404, wantCode: "sandbox_not_found"},
		{name: "PortZero", method: "GET", path: "/v1/sandboxes/sb-1/ports/0/", wantStatus: 400, wantCode: "invalid_request", wantMsg: `port "0"`},
		{name: "PortLeadingZero", method: "GET", path: "/v1/sandboxes/sb-1/ports/08000/", wantStatus: 400, wantCode: "invalid_request"},
		{name: "PortTooLarge", method: "GET", path: "/v1/sandboxes/sb-1/ports/65536/", wantStatus: 400, wantCode: "invalid_request"},
		{name: "PortName", method: "GET", path: "/v1/sandboxes/sb-1/ports/http/", wantStatus: 400, wantCode: "invalid_request"},
		{name: "BodyOverBound", method: "POST", path: "/v1/sandboxes/sb-1/ports/8000/echo/", body: strings.Repeat("x", 101),
			mod: func(c *Config) { c.Ports.MaxRequestBody = 100 }, wantStatus: 413, wantCode: "body_too_large", wantMsg: "at most 100"},
		{name: "Trace", method: "TRACE", path: "/v1/sandboxes/sb-1/ports/8000/echo/", wantStatus: 405, wantCode: "method_not_allowed"},
		{name: "NoPreviews", method: "POST", path: "/v1/sandboxes/sb-1/ports/8000/preview", body: `{}`, wantStatus: 501, wantCode: "no_preview", wantMsg: "--preview-listen"},
		{name: "HeaderTimeout", method: "GET", path: "/v1/sandboxes/sb-1/ports/8000/block", mod: func(c *Config) { c.Ports.HeaderTimeout = 50 * time.Millisecond },
			wantStatus: 504, wantCode: "port_timeout", wantMsg: "did not answer within 50ms"},
		{name: "HeaderTimeoutMidUpload", method: "POST", path: "/v1/sandboxes/sb-1/ports/8000/block", body: strings.Repeat("x", 8<<20),
			mod: func(c *Config) { c.Ports.HeaderTimeout = 50 * time.Millisecond }, wantStatus: 504, wantCode: "port_timeout", wantMsg: "did not answer within 50ms"},
		{name: "IdleTimeout", method: "GET", path: "/v1/sandboxes/sb-1/ports/8000/block", mod: func(c *Config) { c.Ports.IdleTimeout = 50 * time.Millisecond },
			wantStatus: 504, wantCode: "port_timeout", wantMsg: "no byte moved"},
		{name: "TotalTimeout", method: "GET", path: "/v1/sandboxes/sb-1/ports/8000/block", mod: func(c *Config) { c.Ports.Timeout = 50 * time.Millisecond },
			wantStatus: 504, wantCode: "port_timeout", wantMsg: "longer than this worker allows (50ms)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts, _ := portServer(t, tc.mod)
			a := ts.doPort(t, tc.method, tc.path, tc.body, nil)
			if a.status != tc.wantStatus {
				t.Fatalf("status %d, want %d: %s", a.status, tc.wantStatus, a.body)
			}
			if e := a.errBody(t); e.Code != tc.wantCode || !strings.Contains(e.Message, tc.wantMsg) {
				t.Fatalf("error %+v, want %s with %q", e, tc.wantCode, tc.wantMsg)
			}
		})
	}
}

// TestPortBounds: the exchanges of one sandbox are bounded (429 beyond,
// another sandbox unaffected); an answer's head and body are bounded.
func TestPortBounds(t *testing.T) {
	ts, app := portServer(t, func(c *Config) {
		c.Ports.MaxConns = 2
		c.Ports.MaxResponseBody = 1000
		c.Ports.MaxResponseHeader = 4096
	})
	id2 := mustCreate(t, ts.fake)
	ts.fake.ServePort(id2, 8000, app.addr())
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() { ts.doPort(t, "GET", "/v1/sandboxes/sb-1/ports/8000/block", "", nil) })
		<-app.started
	}
	a := ts.doPort(t, "GET", "/v1/sandboxes/sb-1/ports/8000/echo/", "", nil)
	if a.status != 429 || a.errBody(t).Code != "too_many_connections" || a.header.Get("Retry-After") == "" {
		t.Fatalf("a third exchange: %d %s", a.status, a.body)
	}
	if a := ts.doPort(t, "GET", "/v1/sandboxes/"+id2+"/ports/8000/echo/", "", nil); a.status != 200 {
		t.Fatalf("another sandbox while the first is full: %d %s", a.status, a.body)
	}
	close(app.release)
	wg.Wait()

	req, _ := http.NewRequest("GET", ts.srv.URL+"/v1/sandboxes/sb-1/ports/8000/big", nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := noRedirect(ts.srv.Client()).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err == nil || n > 1000 {
		t.Fatalf("an answer over the bound: %d bytes read, err %v; want it cut off at 1000", n, err)
	}
	a = ts.doPort(t, "GET", "/v1/sandboxes/sb-1/ports/8000/redirect?to=/"+strings.Repeat("a", 5000), "", nil)
	if a.status != 502 || a.errBody(t).Code != "port_failed" || !strings.Contains(a.errBody(t).Message, "head over 4096 bytes") {
		t.Fatalf("a head over the bound: %d %s", a.status, a.body)
	}
}

// TestPortWebSocket: a WebSocket upgrade through the port route is carried
// both ways.
func TestPortWebSocket(t *testing.T) {
	ts, _ := portServer(t, nil)
	u := "ws" + strings.TrimPrefix(ts.srv.URL, "http") + "/v1/sandboxes/sb-1/ports/8000/ws"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, resp, err := websocket.DefaultDialer.DialContext(ctx, u, http.Header{"Authorization": {"Bearer " + testToken}})
	if err != nil {
		t.Fatalf("dial %s: %v (%v)", u, err, resp)
	}
	defer c.Close()
	for _, m := range []string{"one", strings.Repeat("big", 100000)} {
		if err := c.WriteMessage(websocket.TextMessage, []byte(m)); err != nil {
			t.Fatal(err)
		}
		_, got, err := c.ReadMessage()
		if err != nil || string(got) != "echo:"+m {
			t.Fatalf("echo of %.10q: %.20q %v", m, got, err)
		}
	}
}

func TestPrefixLocation(t *testing.T) {
	const p, h = "/v1/sandboxes/x/ports/80", "api.example:8088"
	for _, tc := range []struct{ in, want string }{
		{"/", p + "/"},
		{"/a?b#c", p + "/a?b#c"},
		{"//evil.example/", "//evil.example/"},
		{"/\\evil.example/", "/\\evil.example/"},
		{"http://api.example:8088", "http://api.example:8088" + p + "/"},
		{"HTTPS://API.example:8088/a", "HTTPS://API.example:8088" + p + "/a"},
		{"http://api.example:8088?q", "http://api.example:8088" + p + "/?q"},
		{"http://api.example:80880/a", "http://api.example:80880/a"},
		{"http://other.example/a", "http://other.example/a"},
		{"a/b", "a/b"},
	} {
		if got := prefixLocation(tc.in, p, h); got != tc.want {
			t.Errorf("prefixLocation(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestStripCookie(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []string
		want []string
	}{
		{"None", nil, nil},
		{"OnlyOurs", []string{"sandbox-preview=t"}, nil},
		{"Kept", []string{"a=1; sandbox-preview=t; b=2", "__Host-sandbox-preview=u"}, []string{"a=1; b=2"}},
		{"Others", []string{"a=1", "b=2"}, []string{"a=1; b=2"}},
		{"SimilarName", []string{"sandbox-preview2=x"}, []string{"sandbox-preview2=x"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{"Cookie": tc.in}
			stripCookie(h, previewCookieNames...)
			if diff := cmp.Diff(tc.want, h.Values("Cookie")); diff != "" {
				t.Fatalf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestIdleConn: a port connection on which no byte moves closes itself and
// says why.
func TestIdleConn(t *testing.T) {
	a, b := net.Pipe()
	defer b.Close()
	gone := make(chan struct{})
	ic := newPortConn(a, 50*time.Millisecond, func() { close(gone) })
	go func() { _, _ = b.Write([]byte("xyz")) }()
	buf := make([]byte, 3)
	if _, err := io.ReadFull(ic, buf); err != nil {
		t.Fatalf("a read while bytes move: %v", err)
	}
	if _, err := ic.Read(buf); err != errIdle {
		t.Fatalf("a read once idle: %v, want errIdle", err)
	}
	if _, err := ic.Write(buf); err != errIdle {
		t.Fatalf("a write once idle: %v, want errIdle", err)
	}
	<-gone
}
