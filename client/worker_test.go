package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"openvibe.network/agentsandbox"
	"openvibe.network/agentsandbox/client"
	"openvibe.network/agentsandbox/sandbox"
	"openvibe.network/agentsandbox/worker/httpapi"
	"openvibe.network/agentsandbox/worker/httpapi/apitest"
)

const workerToken = "worker-token-1"

// newWorker serves the worker API on fake and returns a client of it.
func newWorker(tb testing.TB, fake *apitest.Fake, mod func(*httpapi.Config)) *client.Worker {
	tb.Helper()
	cfg := httpapi.Config{Runtime: fake, Token: workerToken}
	if mod != nil {
		mod(&cfg)
	}
	s, err := httpapi.New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	srv := httptest.NewServer(s.Handler())
	tb.Cleanup(srv.Close)
	return client.NewWorker(srv.URL+"/", workerToken, srv.Client())
}

func ctxT(tb testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	tb.Cleanup(cancel)
	return ctx
}

func TestWorkerRoundTrip(t *testing.T) {
	fake := apitest.NewFake(1)
	var gotReq agentsandbox.ExecRequest
	fake.ExecFunc = func(_ context.Context, _ string, req agentsandbox.ExecRequest, stdout, stderr io.Writer) (agentsandbox.ExecResult, error) {
		gotReq = req
		fmt.Fprint(stdout, "out\n")
		fmt.Fprint(stderr, "err\n")
		stdout.Write(req.Stdin)
		return agentsandbox.ExecResult{ExitCode: 3, Reason: "timeout"}, nil
	}
	w := newWorker(t, fake, func(c *httpapi.Config) {
		c.Status = func() httpapi.Status {
			return httpapi.Status{SelfTest: &httpapi.SelfTestSummary{Passed: true, Checks: map[string]bool{"wipe": true}}}
		}
	})
	ctx := ctxT(t)

	sb, err := w.Create(ctx, client.CreateOptions{TimeBoxMinutes: 10, Env: map[string]string{"A": "b"}})
	if err != nil || sb.ID == "" || sb.Limits.TimeBoxMinutes != 10 || !sb.ExpiresAt.After(sb.CreatedAt) {
		t.Fatalf("Create: %+v %v", sb, err)
	}
	if _, err := w.Create(ctx, client.CreateOptions{}); !errors.Is(err, client.ErrCapacity) {
		t.Fatalf("Create at capacity: %v", err)
	} else if ae := (*client.APIError)(nil); !errors.As(err, &ae) || ae.RetryAfter != 5*time.Second || ae.Code != "at_capacity" {
		t.Fatalf("capacity error %+v", ae)
	}

	stdin := []byte{0xff, 0x00, 'z'} // not UTF-8: sent as stdin_base64
	var stdout, stderr bytes.Buffer
	res, err := w.Exec(ctx, sb.ID, client.ExecRequest{Argv: []string{"sh", "-c", "x"}, Env: map[string]string{"K": "v"},
		Cwd: "sub", Stdin: stdin, Timeout: 1500 * time.Millisecond}, &stdout, &stderr)
	if err != nil || res != (client.ExecResult{ExitCode: 3, Reason: "timeout"}) {
		t.Fatalf("Exec: %+v %v", res, err)
	}
	if stdout.String() != "out\n\xff\x00z" || stderr.String() != "err\n" {
		t.Fatalf("stdout %q stderr %q", stdout.String(), stderr.String())
	}
	wantReq := agentsandbox.ExecRequest{Argv: []string{"sh", "-c", "x"}, Env: map[string]string{"K": "v"}, Cwd: "sub", Stdin: stdin, Timeout: 2 * time.Second}
	if !reflect.DeepEqual(gotReq, wantReq) {
		t.Fatalf("runtime got %+v, want %+v", gotReq, wantReq)
	}

	if err := w.PutFile(ctx, sb.ID, "/dir/a b#?.txt", strings.NewReader("content"), 0o600); err != nil {
		t.Fatalf("PutFile: %v", err)
	}
	var file bytes.Buffer
	if err := w.GetFile(ctx, sb.ID, "dir/a b#?.txt", &file); err != nil || file.String() != "content" {
		t.Fatalf("GetFile: %q %v", file.String(), err)
	}

	list, err := w.List(ctx)
	if err != nil || len(list) != 1 || list[0].ID != sb.ID {
		t.Fatalf("List: %+v %v", list, err)
	}
	st, err := w.Status(ctx)
	if err != nil || st.Capacity != 1 || st.Active != 1 || st.SelfTest == nil || !st.SelfTest.Passed {
		t.Fatalf("Status: %+v %v", st, err)
	}
	if rep, err := w.Delete(ctx, sb.ID); err != nil || !rep.Verified {
		t.Fatalf("Delete: %v", err)
	}
	if _, err := w.Delete(ctx, sb.ID); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("Delete again: %v", err)
	}
}

func TestWorkerErrors(t *testing.T) {
	fake := apitest.NewFake(2)
	fake.Leftovers = []string{"pid 7"}
	info, _ := fake.Create(context.Background(), sandbox.Options{})
	fake.ExecFunc = func(context.Context, string, agentsandbox.ExecRequest, io.Writer, io.Writer) (agentsandbox.ExecResult, error) {
		return agentsandbox.ExecResult{}, sandbox.ErrNotFound
	}
	w := newWorker(t, fake, nil)
	bad := client.NewWorker(strings.TrimSuffix(w2URL(t, fake), "/"), "wrong", nil)
	ctx := ctxT(t)
	for _, tc := range []struct {
		name       string
		call       func() error
		wantIs     error
		wantStatus int
		wantCode   string
		wantMsg    string
	}{
		{name: "ErrUnauthorized", call: func() error { _, err := bad.List(ctx); return err },
			wantIs: client.ErrUnauthorized, wantStatus: 401, wantCode: "unauthorized"},
		{name: "ErrBadTimeBox", call: func() error { _, err := w.Create(ctx, client.CreateOptions{TimeBoxMinutes: 31}); return err },
			wantStatus: 400, wantCode: "invalid_request", wantMsg: "give 5 to 30"},
		{name: "ErrNoBrowser", call: func() error { _, err := w.Create(ctx, client.CreateOptions{Browser: true}); return err },
			wantStatus: 400, wantCode: "no_browser"},
		{name: "ErrExecUnknown", call: func() error {
			_, err := w.Exec(ctx, "nope", client.ExecRequest{Argv: []string{"true"}}, nil, nil)
			return err
		}, wantIs: client.ErrNotFound, wantStatus: 404, wantCode: "sandbox_not_found"},
		{name: "ErrExecNoArgv", call: func() error { _, err := w.Exec(ctx, info.ID, client.ExecRequest{}, nil, nil); return err },
			wantStatus: 400, wantCode: "invalid_request", wantMsg: "argv is required"},
		{name: "ErrExecLastEvent", call: func() error {
			_, err := w.Exec(ctx, info.ID, client.ExecRequest{Argv: []string{"true"}}, nil, nil)
			return err
		}, wantIs: client.ErrNotFound, wantStatus: 200, wantCode: "sandbox_not_found"},
		{name: "ErrPathEscape", call: func() error { return w.PutFile(ctx, info.ID, "../../etc/passwd", strings.NewReader("x"), 0) },
			wantStatus: 400, wantCode: "invalid_request", wantMsg: "contains `.`, `..`"},
		{name: "ErrGetMissing", call: func() error { return w.GetFile(ctx, info.ID, "missing", io.Discard) },
			wantIs: client.ErrNotFound, wantStatus: 404, wantCode: "file_not_found"},
		{name: "ErrSelfTest", call: func() error { _, err := w.RunSelfTest(ctx); return err },
			wantStatus: 501, wantCode: "no_selftest"},
		{name: "ErrWipeUnverified", call: func() error { _, err := w.Delete(ctx, info.ID); return err },
			wantStatus: 500, wantCode: "wipe_unverified", wantMsg: "1 leftovers"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			var ae *client.APIError
			if !errors.As(err, &ae) {
				t.Fatalf("error %v is not an *APIError", err)
			}
			if ae.StatusCode != tc.wantStatus || ae.Code != tc.wantCode || !strings.Contains(ae.Message, tc.wantMsg) {
				t.Fatalf("error %+v, want %d %s %q", ae, tc.wantStatus, tc.wantCode, tc.wantMsg)
			}
			if tc.wantIs != nil && !errors.Is(err, tc.wantIs) {
				t.Fatalf("errors.Is(%v, %v) is false", err, tc.wantIs)
			}
		})
	}
}

// w2URL serves fake once more and returns the server's URL.
func w2URL(tb testing.TB, fake *apitest.Fake) string {
	tb.Helper()
	s, err := httpapi.New(httpapi.Config{Runtime: fake, Token: workerToken})
	if err != nil {
		tb.Fatal(err)
	}
	srv := httptest.NewServer(s.Handler())
	tb.Cleanup(srv.Close)
	return srv.URL
}

// TestWorkerExecStream checks events arrive one by one, before the command
// ends, and that an error of the callback ends the call and the command.
func TestWorkerExecStream(t *testing.T) {
	fake := apitest.NewFake(1)
	release := make(chan struct{})
	ended := make(chan error, 1)
	fake.ExecFunc = func(ctx context.Context, _ string, _ agentsandbox.ExecRequest, stdout, stderr io.Writer) (agentsandbox.ExecResult, error) {
		fmt.Fprint(stdout, "one")
		select {
		case <-release:
		case <-ctx.Done():
			ended <- ctx.Err()
			return agentsandbox.ExecResult{}, ctx.Err()
		}
		fmt.Fprint(stderr, "two")
		return agentsandbox.ExecResult{}, nil
	}
	w := newWorker(t, fake, nil)
	id, _ := fake.Create(context.Background(), sandbox.Options{})
	ctx := ctxT(t)

	stop := errors.New("stop")
	_, err := w.ExecStream(ctx, id.ID, client.ExecRequest{Argv: []string{"x"}}, func(ev client.ExecEvent) error {
		if ev.Stream != "stdout" || string(ev.Data) != "one" {
			t.Errorf("event %+v", ev)
		}
		return stop
	})
	if !errors.Is(err, stop) {
		t.Fatalf("ExecStream: %v, want the callback's error", err)
	}
	select {
	case err := <-ended:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("command ended with %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the command went on after the client left")
	}

	var evs []client.ExecEvent
	res, err := w.ExecStream(ctx, id.ID, client.ExecRequest{Argv: []string{"x"}}, func(ev client.ExecEvent) error {
		evs = append(evs, ev)
		if len(evs) == 1 {
			close(release) // the first event arrived while the command still ran
		}
		return nil
	})
	want := []client.ExecEvent{{Stream: "stdout", Data: []byte("one")}, {Stream: "stderr", Data: []byte("two")}}
	if err != nil || res.ExitCode != 0 || !reflect.DeepEqual(evs, want) {
		t.Fatalf("ExecStream: %+v %v, events %+v", res, err, evs)
	}
}

// TestWorkerTokenStaysHome: a redirect is not followed, so the token is
// never sent to another server.
func TestWorkerTokenStaysHome(t *testing.T) {
	leaked := make(chan string, 1)
	other := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		leaked <- r.Header.Get("Authorization")
	}))
	defer other.Close()
	redir := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	defer redir.Close()
	w := client.NewWorker(redir.URL, workerToken, nil)
	_, err := w.List(ctxT(t))
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.StatusCode != http.StatusTemporaryRedirect {
		t.Fatalf("List through a redirect: %v", err)
	}
	select {
	case got := <-leaked:
		t.Fatalf("the token followed the redirect: %q", got)
	default:
	}
}

func TestWorkerPutFileMode(t *testing.T) {
	for _, tc := range []struct {
		name string
		mode fs.FileMode
		want string
	}{
		{name: "Default", mode: 0, want: ""},
		{name: "Exec", mode: 0o755, want: "0755"},
		{name: "TypeBitsDropped", mode: fs.ModeDir | 0o700, want: "0700"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := make(chan string, 1)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				got <- r.Header.Get("X-File-Mode")
				w.WriteHeader(http.StatusNoContent)
			}))
			defer srv.Close()
			if err := client.NewWorker(srv.URL, workerToken, nil).PutFile(ctxT(t), "sb", "f", strings.NewReader(""), tc.mode); err != nil {
				t.Fatal(err)
			}
			if g := <-got; g != tc.want {
				t.Fatalf("X-File-Mode %q, want %q", g, tc.want)
			}
		})
	}
}

// TestWorkerAnswerBounded: a JSON answer is read only up to a bound, so a
// worker (or whatever answers at its address) cannot make the client hold
// an answer of any size.
func TestWorkerAnswerBounded(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"items":[{"id":"`)
		pad := strings.Repeat("x", 64<<10)
		for i := 0; i < 64; i++ { // 4 MiB of one string
			if _, err := io.WriteString(w, pad); err != nil {
				return
			}
		}
		io.WriteString(w, `"}]}`)
	}))
	defer srv.Close()
	items, err := client.NewWorker(srv.URL, workerToken, nil).List(ctxT(t))
	if err == nil || !strings.Contains(err.Error(), "read answer") {
		t.Fatalf("List of a 4 MiB answer: %d items, %v; want a read answer error", len(items), err)
	}
}
