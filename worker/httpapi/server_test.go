package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"openvibe.network/agentsandbox"
	"openvibe.network/agentsandbox/internal/syncbuf"
	"openvibe.network/agentsandbox/sandbox"
	"openvibe.network/agentsandbox/worker/httpapi/apitest"
)

const testToken = "tok-S3CRET-value"

// The fake imitates the real runtime (see real_test.go) for these tests.
var _ Runtime = (*apitest.Fake)(nil)

// testServer is a Server on a fake runtime behind httptest.
type testServer struct {
	fake *apitest.Fake
	srv  *httptest.Server
	logs *syncbuf.Buffer
}

// newTestServer starts a server on fake; mod adjusts the Config.
func newTestServer(tb testing.TB, fake *apitest.Fake, mod func(*Config)) *testServer {
	tb.Helper()
	logs := &syncbuf.Buffer{}
	cfg := Config{Runtime: fake, Token: testToken, Logger: slog.New(slog.NewJSONHandler(logs, nil))}
	if mod != nil {
		mod(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		tb.Fatalf("New: %v", err)
	}
	srv := httptest.NewServer(s.Handler())
	tb.Cleanup(srv.Close)
	return &testServer{fake: fake, srv: srv, logs: logs}
}

// answer is a response read whole.
type answer struct {
	status int
	header http.Header
	body   []byte
}

// errBody decodes the JSON error of an answer.
func (a answer) errBody(tb testing.TB) Error {
	tb.Helper()
	var e struct{ Error Error }
	if err := json.Unmarshal(a.body, &e); err != nil {
		tb.Fatalf("error body %q: %v", a.body, err)
	}
	return e.Error
}

// do sends a request with the test token (unless hdr sets Authorization).
func (ts *testServer) do(tb testing.TB, method, path, body string, hdr map[string]string) answer {
	tb.Helper()
	req, err := http.NewRequest(method, ts.srv.URL+path, strings.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	// As the API's clients do, never follow a redirect: the API makes
	// none, and one would show here.
	hc := *ts.srv.Client()
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := hc.Do(req)
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

// mustCreate makes a sandbox in the fake directly.
func mustCreate(tb testing.TB, f *apitest.Fake) string {
	tb.Helper()
	info, err := f.Create(context.Background(), sandbox.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	return info.ID
}

func TestNew(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{name: "ErrNoRuntime", cfg: Config{Token: "t"}, want: "no runtime"},
		{name: "ErrNoToken", cfg: Config{Runtime: apitest.NewFake(1), Token: "  "}, want: "no bearer token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: %v, want %q", err, tc.want)
			}
		})
	}
}

// TestCreateLimits: a sandbox takes the worker's limits, or its own within
// them; a limit out of bounds is a 400 that names it and the bounds.
func TestCreateLimits(t *testing.T) {
	bounds := agentsandbox.Limits{MemoryMB: 512, Pids: 64} // the rest: the defaults
	worker := bounds.WithDefaults()
	public := agentsandbox.EgressPolicy{Mode: agentsandbox.EgressPublic}
	for _, tc := range []struct {
		name, body string
		want       sandbox.Options // when created
		wantErr    string          // the message, when refused
	}{
		{name: "WorkerLimits", body: `{"time_box_minutes":7}`,
			want: sandbox.Options{TimeBox: 7 * time.Minute, Egress: true, EgressPolicy: public, Limits: worker}},
		{name: "OwnWithinBounds", body: `{"limits":{"memory_mb":128,"cpu_percent":50}}`,
			want: sandbox.Options{TimeBox: 5 * time.Minute, Egress: true, EgressPolicy: public,
				Limits: agentsandbox.Limits{MemoryMB: 128, DiskMB: worker.DiskMB, Pids: 64, CPUPercent: 50}}},
		{name: "AtBounds", body: `{"limits":{"memory_mb":512,"disk_mb":512,"pids":64,"cpu_percent":100}}`,
			want: sandbox.Options{TimeBox: 5 * time.Minute, Egress: true, EgressPolicy: public, Limits: worker}},
		{name: "ErrOverBound", body: `{"limits":{"memory_mb":513}}`,
			wantErr: "limits.memory_mb is 513; give 16 to 512 (this worker's bounds)"},
		{name: "ErrUnderMinimum", body: `{"limits":{"pids":8}}`,
			wantErr: "limits.pids is 8; give 16 to 64 (this worker's bounds)"},
		{name: "ErrNegative", body: `{"limits":{"disk_mb":-1}}`,
			wantErr: "limits.disk_mb is -1; give 1 to 512 (this worker's bounds)"},
		{name: "ErrUnknownLimit", body: `{"limits":{"gpus":1}}`, wantErr: `unknown field "limits.gpus"; see docs/openapi.yaml`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := apitest.NewFake(1)
			ts := newTestServer(t, fake, func(c *Config) {
				c.Egress = true
				c.Limits = bounds
			})
			a := ts.do(t, "POST", "/v1/sandboxes", tc.body, nil)
			if tc.wantErr != "" {
				if diff := cmp.Diff(Error{Code: CodeInvalidRequest, Message: tc.wantErr}, a.errBody(t), cmpopts.IgnoreFields(Error{}, "Status")); a.status != 400 || diff != "" {
					t.Fatalf("create: %d, want 400 (-want +got):\n%s", a.status, diff)
				}
				if len(fake.Created()) != 0 {
					t.Fatal("a refused create reached the runtime")
				}
				return
			}
			if a.status != 201 {
				t.Fatalf("create: %d %s", a.status, a.body)
			}
			var sb Sandbox
			if err := json.Unmarshal(a.body, &sb); err != nil {
				t.Fatal(err)
			}
			got := fake.Created()
			if diff := cmp.Diff([]sandbox.Options{tc.want}, got, cmpopts.EquateEmpty()); diff != "" {
				t.Fatalf("runtime got (-want +got):\n%s", diff)
			}
			wantShown := SandboxLimits{MemoryMB: tc.want.Limits.MemoryMB, DiskMB: tc.want.Limits.DiskMB, Pids: tc.want.Limits.Pids,
				CPUPercent: tc.want.Limits.CPUPercent, TimeBoxMinutes: int(tc.want.TimeBox / time.Minute)}
			if sb.Limits != wantShown {
				t.Fatalf("answer's limits %+v, want %+v", sb.Limits, wantShown)
			}
		})
	}
}

// brokenFiles is a runtime whose GetFile fails after writing some content.
type brokenFiles struct{ *apitest.Fake }

func (b brokenFiles) GetFile(_ context.Context, _, _ string, w io.Writer) error {
	if _, err := w.Write([]byte("partial")); err != nil {
		return err
	}
	return errors.New("read: i/o error")
}

// TestGetFileFailsMidway: a file that fails after its first bytes is cut
// off, so the client sees an error and not a short file.
func TestGetFileFailsMidway(t *testing.T) {
	fake := apitest.NewFake(1)
	id := mustCreate(t, fake)
	s, err := New(Config{Runtime: brokenFiles{fake}, Token: testToken})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	req, _ := http.NewRequest("GET", srv.URL+"/v1/sandboxes/"+id+"/files/f", nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := srv.Client().Do(req)
	if err != nil {
		return // cut off before the headers: the client sees an error
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err == nil {
		t.Fatalf("read a cut-off file without an error: %d %q", resp.StatusCode, body)
	}
}

// slowCreate is a runtime whose Create waits until its client has left.
type slowCreate struct {
	*apitest.Fake
	entered chan struct{}
}

func (s slowCreate) Create(ctx context.Context, o sandbox.Options) (sandbox.Info, error) {
	close(s.entered)
	<-ctx.Done()
	return s.Fake.Create(context.WithoutCancel(ctx), o)
}

// TestCreateAbandoned: a sandbox created for a client that left is deleted
// at once rather than holding its slot until the time box ends.
func TestCreateAbandoned(t *testing.T) {
	fake := apitest.NewFake(1)
	rt := slowCreate{Fake: fake, entered: make(chan struct{})}
	logs := &syncbuf.Buffer{}
	s, err := New(Config{Runtime: rt, Token: testToken, Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+"/v1/sandboxes", strings.NewReader(`{}`))
	req.Header.Set("Authorization", "Bearer "+testToken)
	go func() {
		<-rt.entered
		cancel()
	}()
	if resp, err := srv.Client().Do(req); err == nil {
		resp.Body.Close()
		t.Fatal("the request outlived its context")
	}
	waitFor(t, func() bool { return strings.Contains(logs.String(), `"abandoned":"sb-1","wiped":true`) })
	if n := fake.Active(); n != 0 {
		t.Fatalf("%d sandboxes left after the client left", n)
	}
}

// unlimited is a runtime that cannot enforce limits (a controller not
// delegated), as sandbox.Runtime's Create says then.
type unlimited struct{ *apitest.Fake }

func (unlimited) Create(context.Context, sandbox.Options) (sandbox.Info, error) {
	return sandbox.Info{}, fmt.Errorf("create sandbox: %w: the cgroup controllers memory are not delegated to the worker's cgroup /system.slice/x.service: add Delegate=yes", sandbox.ErrLimits)
}

// unfit is a runtime on a host that cannot run sandboxes (a container
// without CAP_SYS_ADMIN), as sandbox.Runtime's Create says then.
type unfit struct{ *apitest.Fake }

func (unfit) Create(context.Context, sandbox.Options) (sandbox.Info, error) {
	return sandbox.Info{}, fmt.Errorf("create sandbox: %w: the worker lacks CAP_SYS_ADMIN (…): add it to its container", sandbox.ErrHost)
}

func TestCreateOnAnUnfitHost(t *testing.T) {
	s, err := New(Config{Runtime: unfit{apitest.NewFake(1)}, Token: testToken})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	a := (&testServer{srv: srv}).do(t, "POST", "/v1/sandboxes", `{}`, nil)
	want := Error{Code: CodeHostUnsupported, Message: "this host cannot run sandboxes, so the worker starts none: the worker lacks CAP_SYS_ADMIN (…): add it to its container"}
	if diff := cmp.Diff(want, a.errBody(t), cmpopts.IgnoreFields(Error{}, "Status")); a.status != 503 || diff != "" {
		t.Fatalf("create: %d, want 503 (-want +got):\n%s", a.status, diff)
	}
}

func TestCreateWithoutLimits(t *testing.T) {
	s, err := New(Config{Runtime: unlimited{apitest.NewFake(1)}, Token: testToken})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	ts := &testServer{srv: srv}
	a := ts.do(t, "POST", "/v1/sandboxes", `{}`, nil)
	want := Error{Code: CodeLimits, Message: "this worker cannot enforce sandbox limits, so it starts no sandbox: the cgroup controllers memory are not delegated to the worker's cgroup /system.slice/x.service: add Delegate=yes"}
	if diff := cmp.Diff(want, a.errBody(t), cmpopts.IgnoreFields(Error{}, "Status")); a.status != 503 || diff != "" {
		t.Fatalf("create: %d, want 503 (-want +got):\n%s", a.status, diff)
	}
}
