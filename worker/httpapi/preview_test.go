package httpapi

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"openvibe.network/agentsandbox/worker/httpapi/apitest"
	"openvibe.network/agentsandbox/workerapi"
)

// previewWorld is an API and its preview listener on a fake holding
// sandboxes sb-1 and sb-2, whose port 8000 is an appServer, with a clock
// the test moves.
type previewWorld struct {
	api     *testServer
	preview *httptest.Server
	fake    *apitest.Fake
	mu      sync.Mutex
	now     time.Time
}

func (w *previewWorld) clock() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.now
}

func (w *previewWorld) advance(d time.Duration) {
	w.mu.Lock()
	w.now = w.now.Add(d)
	w.mu.Unlock()
}

func newPreviewWorld(t *testing.T, base string) *previewWorld {
	t.Helper()
	w := &previewWorld{fake: apitest.NewFake(2), now: time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)}
	app := newAppServer(t)
	for range 2 {
		id := mustCreate(t, w.fake)
		w.fake.ServePort(id, 8000, app.addr())
		w.fake.ServePort(id, 8001, app.addr())
	}
	srv, err := New(Config{Runtime: w.fake, Token: testToken, Ports: PortsConfig{PreviewBaseURL: base, Now: w.clock}})
	if err != nil {
		t.Fatal(err)
	}
	w.api = &testServer{fake: w.fake, srv: httptest.NewServer(srv.Handler())}
	t.Cleanup(w.api.srv.Close)
	w.preview = httptest.NewServer(srv.PreviewHandler())
	t.Cleanup(w.preview.Close)
	return w
}

// issue asks the API for a preview of sandbox id's port.
func (w *previewWorld) issue(t *testing.T, id string, port int, body string) workerapi.Preview {
	t.Helper()
	a := w.api.doPort(t, "POST", "/v1/sandboxes/"+id+"/ports/"+strconv.Itoa(port)+"/preview", body, nil)
	if a.status != 200 {
		t.Fatalf("preview: %d %s", a.status, a.body)
	}
	var p workerapi.Preview
	if err := json.Unmarshal(a.body, &p); err != nil {
		t.Fatal(err)
	}
	return p
}

// get asks the preview listener for target (a URL of the preview's
// origin), with the cookies given, never following a redirect.
func (w *previewWorld) get(t *testing.T, method, target string, cookies ...*http.Cookie) answer {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(method, w.preview.URL+u.RequestURI(), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = u.Host
	for _, c := range cookies {
		req.AddCookie(c)
	}
	resp, err := noRedirect(w.preview.Client()).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, target, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header, b}
}

// TestPreview: a preview URL's first visit sets the origin's cookie and
// redirects without the token; the cookie then opens the port, and the
// app sees neither token nor cookie; a token opens only its own sandbox
// and port, only until it expires, only while the sandbox lives, only on
// the worker that made it.
func TestPreview(t *testing.T) {
	w := newPreviewWorld(t, "http://{port}-{id}.preview.test:8089/")
	p := w.issue(t, "sb-1", 8000, `{"ttl_seconds":60}`)
	want := workerapi.Preview{Origin: "http://8000-sb-1.preview.test:8089", Port: 8000, ExpiresAt: w.clock().Add(time.Minute)}
	if !strings.HasPrefix(p.URL, want.Origin+"/?"+previewParam+"=") {
		t.Fatalf("URL %q", p.URL)
	}
	token := strings.TrimPrefix(p.URL, want.Origin+"/?"+previewParam+"=")
	want.URL = p.URL
	if diff := cmp.Diff(want, p); diff != "" {
		t.Fatalf("preview (-want +got):\n%s", diff)
	}

	a := w.get(t, "GET", want.Origin+"/echo/x?a=1&"+previewParam+"="+token+"&b=2")
	if a.status != 303 || a.header.Get("Location") != "/echo/x?a=1&b=2" {
		t.Fatalf("first visit: %d Location %q %s", a.status, a.header.Get("Location"), a.body)
	}
	cookie := (&http.Response{Header: a.header}).Cookies()
	wantCookie := "sandbox-preview=" + token + "; Path=/; Max-Age=60; HttpOnly; SameSite=Lax"
	if len(cookie) != 1 || a.header.Get("Set-Cookie") != wantCookie {
		t.Fatalf("Set-Cookie %q, want %q", a.header.Values("Set-Cookie"), wantCookie)
	}
	a = w.get(t, "POST", want.Origin+"/echo/x?a=1", cookie[0], &http.Cookie{Name: "app", Value: "kept"})
	var got seen
	if err := json.Unmarshal(a.body, &got); a.status != 200 || err != nil {
		t.Fatalf("with the cookie: %d %s", a.status, a.body)
	}
	if got.Header.Get("Cookie") != "app=kept" || got.Host != "8000-sb-1.preview.test:8089" || got.Query != "a=1" ||
		got.Header.Get("X-Forwarded-Proto") != "http" || got.Header.Get("X-Forwarded-Prefix") != "" || strings.Contains(string(a.body), token) {
		t.Fatalf("the app saw %s", a.body)
	}
	if a := w.get(t, "GET", "http://8000-SB-1.Preview.TEST/echo/", cookie[0]); a.status != 200 {
		t.Fatalf("the host name in another case: %d %s", a.status, a.body)
	}

	other := w.issue(t, "sb-2", 8000, `{}`)
	otherToken := other.URL[strings.Index(other.URL, "=")+1:]
	tampered := token[:len(token)-2] + "AA"
	if token[len(token)-2:] == "AA" {
		tampered = token[:len(token)-2] + "BB"
	}
	longer := strings.Replace(token, ".", "0.", 1) // a later expiry, the same MAC
	for _, tc := range []struct {
		name, target string
		cookies      []*http.Cookie
		wantStatus   int
		wantMsg      string
	}{
		{"NoToken", want.Origin + "/", nil, 403, "open this preview with its link first"},
		{"Tampered", want.Origin + "/?" + previewParam + "=" + tampered, nil, 403, "does not open port 8000 of sandbox sb-1"},
		{"LongerExpiry", want.Origin + "/?" + previewParam + "=" + longer, nil, 403, "does not open"},
		{"Garbage", want.Origin + "/?" + previewParam + "=x.y.z", nil, 403, "does not open"},
		{"OtherSandboxsToken", want.Origin + "/?" + previewParam + "=" + otherToken, nil, 403, "does not open"},
		{"OtherSandboxsCookie", want.Origin + "/", []*http.Cookie{{Name: "sandbox-preview", Value: otherToken}}, 403, "does not open"},
		{"OtherPort", "http://8001-sb-1.preview.test/", []*http.Cookie{cookie[0]}, 403, "does not open port 8001"},
		{"TokenOnOtherSandbox", other.Origin + "/", []*http.Cookie{cookie[0]}, 403, "does not open port 8000 of sandbox sb-2"},
		{"TossedCookieBeside", want.Origin + "/echo/", []*http.Cookie{{Name: "sandbox-preview", Value: otherToken}, cookie[0]}, 200, ""},
		{"UnknownHost", "http://api.preview.test/", nil, 404, "no preview here"},
		{"OpenRedirect", want.Origin + "//evil.example/?" + previewParam + "=" + token, nil, 303, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := w.get(t, "GET", tc.target, tc.cookies...)
			if a.status != tc.wantStatus || !strings.Contains(string(a.body), tc.wantMsg) {
				t.Fatalf("%d %s, want %d with %q", a.status, a.body, tc.wantStatus, tc.wantMsg)
			}
			if a.status == 303 && a.header.Get("Location") != "/" {
				t.Fatalf("Location %q, want /", a.header.Get("Location"))
			}
			if a.status == 403 && !strings.HasPrefix(a.header.Get("Content-Type"), "text/plain") {
				t.Fatalf("Content-Type %q", a.header.Get("Content-Type"))
			}
		})
	}

	w.advance(time.Minute)
	if a := w.get(t, "GET", want.Origin+"/echo/", cookie[0]); a.status != 403 || !strings.Contains(string(a.body), "has expired") {
		t.Fatalf("after the TTL: %d %s", a.status, a.body)
	}
	if a := w.get(t, "GET", other.Origin+"/echo/?"+previewParam+"="+otherToken); a.status != 303 {
		t.Fatalf("another sandbox's preview: %d %s", a.status, a.body)
	}
	if _, err := w.fake.Delete(context.Background(), "sb-2"); err != nil {
		t.Fatal(err)
	}
	if a := w.get(t, "GET", other.Origin+"/echo/?"+previewParam+"="+otherToken); a.status != 404 || !strings.Contains(string(a.body), "is gone") {
		t.Fatalf("after the sandbox's delete: %d %s", a.status, a.body)
	}

	restarted := newPreviewWorld(t, "http://{port}-{id}.preview.test:8089")
	fresh := w.issue(t, "sb-1", 8000, `{}`)
	if a := restarted.get(t, "GET", fresh.URL); a.status != 403 {
		t.Fatalf("a token of the worker before its restart: %d %s", a.status, a.body)
	}
}

// TestPreviewHTTPS: on an https origin the cookie is Secure and __Host-.
func TestPreviewHTTPS(t *testing.T) {
	w := newPreviewWorld(t, "https://{id}--{port}.preview.test")
	p := w.issue(t, "sb-1", 8000, `{}`)
	if p.Origin != "https://sb-1--8000.preview.test" || !p.ExpiresAt.Equal(w.clock().Add(workerapi.DefaultPreviewTTL)) {
		t.Fatalf("preview %+v", p)
	}
	a := w.get(t, "GET", p.URL)
	if c := a.header.Get("Set-Cookie"); a.status != 303 || !strings.HasPrefix(c, "__Host-sandbox-preview=") || !strings.Contains(c, "; Secure") {
		t.Fatalf("%d Set-Cookie %q", a.status, c)
	}
	c := (&http.Response{Header: a.header}).Cookies()[0]
	a = w.get(t, "GET", p.Origin+"/echo/", c)
	var got seen
	if err := json.Unmarshal(a.body, &got); err != nil || got.Header.Get("X-Forwarded-Proto") != "https" || got.Header.Get("Cookie") != "" {
		t.Fatalf("the app saw %s", a.body)
	}
}

func TestPreviewRequest(t *testing.T) {
	w := newPreviewWorld(t, "http://{port}-{id}.localhost")
	for _, tc := range []struct {
		name, path, body string
		wantStatus       int
		wantMsg          string
	}{
		{"TTLTooLong", "/v1/sandboxes/sb-1/ports/8000/preview", `{"ttl_seconds":86401}`, 400, "ttl_seconds is 86401; give 1 to 86400"},
		{"TTLNegative", "/v1/sandboxes/sb-1/ports/8000/preview", `{"ttl_seconds":-1}`, 400, "give 1 to 86400"},
		{"UnknownField", "/v1/sandboxes/sb-1/ports/8000/preview", `{"ttl":1}`, 400, "unknown field"},
		{"UnknownSandbox", "/v1/sandboxes/nope/ports/8000/preview", `{}`, 404, "no sandbox"},
		{"BadPort", "/v1/sandboxes/sb-1/ports/0/preview", `{}`, 400, "port"},
		{"GetIsForwarded", "/v1/sandboxes/sb-1/ports/8000/preview", ``, 404, "404 page not found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			method := "POST"
			if tc.body == "" {
				method = "GET"
			}
			a := w.api.doPort(t, method, tc.path, tc.body, nil)
			if a.status != tc.wantStatus || !strings.Contains(string(a.body), tc.wantMsg) {
				t.Fatalf("%d %s, want %d with %q", a.status, a.body, tc.wantStatus, tc.wantMsg)
			}
		})
	}
}

func TestPreviewBaseURL(t *testing.T) {
	for _, tc := range []struct {
		base, wantErr   string
		id              string
		port            int
		origin, matches string
	}{
		{base: "http://{port}-{id}.localhost:8089", id: "0a1b", port: 3000, origin: "http://3000-0a1b.localhost:8089", matches: "3000-0a1b.localhost"},
		{base: "HTTPS://{id}.{port}.Preview.Example/", id: "ab", port: 80, origin: "https://ab.80.preview.example", matches: "AB.80.preview.example:443"},
		{base: "ftp://{port}-{id}.x", wantErr: "must start with http:// or https://"},
		{base: "{port}-{id}.x", wantErr: "must start with http"},
		{base: "http://{port}-{id}.x/app", wantErr: "an origin only"},
		{base: "http://{port}-{id}.x?q", wantErr: "an origin only"},
		{base: "http://{id}.x", wantErr: "{port} and {id} once each"},
		{base: "http://{port}.{port}-{id}.x", wantErr: "{port} and {id} once each"},
		{base: "http://{port}-{id}.x:99999", wantErr: "port is not a number"},
		{base: "http://{port}-{id}_x.example", wantErr: "not a DNS name"},
	} {
		t.Run(tc.base, func(t *testing.T) {
			p, err := newPreviewer(tc.base, time.Now)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := p.origin(tc.id, tc.port); got != tc.origin {
				t.Errorf("origin %q, want %q", got, tc.origin)
			}
			if id, port, ok := p.match(tc.matches); !ok || id != tc.id || port != tc.port {
				t.Errorf("match(%q) = %q %d %v", tc.matches, id, port, ok)
			}
			for _, h := range []string{"a." + tc.matches, "70000-ab.localhost", "3000-.localhost", "localhost"} {
				if id, port, ok := p.match(h); ok {
					t.Errorf("match(%q) = %q %d, want no match", h, id, port)
				}
			}
		})
	}
}

func TestTakeParam(t *testing.T) {
	for _, tc := range []struct{ raw, value, rest string }{
		{"", "", ""},
		{"t=1", "1", ""},
		{"a=1&t=x%2By&b=2", "x+y", "a=1&b=2"},
		{"t=1&t=2&c", "1", "c"},
		{"%74=enc", "enc", ""},
		{"tt=1", "", "tt=1"},
	} {
		v, rest, _ := takeParam(tc.raw, "t")
		if v != tc.value || rest != tc.rest {
			t.Errorf("takeParam(%q) = %q %q, want %q %q", tc.raw, v, rest, tc.value, tc.rest)
		}
	}
}
