package client_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"openvibe.network/agentsandbox"
	"openvibe.network/agentsandbox/client"
	"openvibe.network/agentsandbox/worker/httpapi"
	"openvibe.network/agentsandbox/worker/httpapi/apitest"
)

// TestSandboxHandle: the handle's info, usage, extend and delete, and the
// limits of a create reaching the runtime.
func TestSandboxHandle(t *testing.T) {
	fake := apitest.NewFake(1)
	w := newWorker(t, fake, func(c *httpapi.Config) {
		c.Limits = agentsandbox.Limits{MemoryMB: 512, DiskMB: 64, Pids: 128, CPUPercent: 100}
	})
	ctx := ctxT(t)

	_, err := w.Create(ctx, client.CreateOptions{Limits: client.RequestLimits{Pids: 129}})
	if !errors.Is(err, client.ErrInvalidRequest) || !strings.Contains(err.Error(), "pids is 129; give 16 to 128") {
		t.Fatalf("Create over the pids bound: %v", err)
	}
	created, err := w.Create(ctx, client.CreateOptions{Limits: client.RequestLimits{MemoryMB: 64, Pids: 32}})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if got, want := fake.Created()[0].Limits, (agentsandbox.Limits{MemoryMB: 64, DiskMB: 64, Pids: 32, CPUPercent: 100}); got != want {
		t.Fatalf("runtime got limits %+v, want %+v", got, want)
	}
	sb := w.Sandbox(created.ID)
	if sb.ID() != created.ID {
		t.Fatalf("ID %q, want %q", sb.ID(), created.ID)
	}
	if err := sb.Files().Put(ctx, "f", strings.NewReader("12345"), 0o644); err != nil {
		t.Fatal(err)
	}
	info, err := sb.Info(ctx)
	want := created
	want.State, want.Usage = "running", client.Usage{WorkspaceBytes: 5}
	if err != nil || !cmp.Equal(info, want) {
		t.Fatalf("Info: %v; diff (-want +got):\n%s", err, cmp.Diff(want, info))
	}
	if u, err := sb.Usage(ctx); err != nil || u != want.Usage {
		t.Fatalf("Usage: %+v %v", u, err)
	}

	ext, err := sb.Extend(ctx, 20)
	want = created
	want.Limits.TimeBoxMinutes, want.ExpiresAt = 20, created.CreatedAt.Add(20*time.Minute)
	if err != nil || !cmp.Equal(ext, want) {
		t.Fatalf("Extend: %v; diff (-want +got):\n%s", err, cmp.Diff(want, ext))
	}
	if _, err := sb.Extend(ctx, 31); !errors.Is(err, client.ErrInvalidRequest) {
		t.Fatalf("Extend past 30 minutes: %v", err)
	}

	rep, err := sb.Delete(ctx)
	if err != nil || !cmp.Equal(rep, client.WipeReport{Verified: true, Duration: time.Millisecond}) {
		t.Fatalf("Delete: %+v %v", rep, err)
	}
	for name, call := range map[string]func() error{
		"Info":      func() error { _, err := sb.Info(ctx); return err },
		"Extend":    func() error { _, err := sb.Extend(ctx, 10); return err },
		"Delete":    func() error { _, err := sb.Delete(ctx); return err },
		"Processes": func() error { _, err := sb.Processes(ctx); return err },
		"Signal":    func() error { return sb.Process(1).Signal(ctx, "TERM") },
	} {
		if err := call(); !errors.Is(err, client.ErrSandboxNotFound) || !errors.Is(err, client.ErrNotFound) {
			t.Errorf("%s after Delete: %v, want ErrSandboxNotFound", name, err)
		}
	}
}

// TestErrorCodes: each sentinel matches the worker's codes (the server's
// constants, so a renamed code fails here), never its message; an answer
// without a code matches by its status.
func TestErrorCodes(t *testing.T) {
	sentinels := map[string]error{
		"ErrCapacity": client.ErrCapacity, "ErrNotFound": client.ErrNotFound,
		"ErrSandboxNotFound": client.ErrSandboxNotFound, "ErrProcessNotFound": client.ErrProcessNotFound,
		"ErrUnauthorized": client.ErrUnauthorized, "ErrInvalidRequest": client.ErrInvalidRequest,
	}
	for _, tc := range []struct {
		name   string
		status int
		body   string
		want   []string
	}{
		{"AtCapacity", 429, code(httpapi.CodeAtCapacity), []string{"ErrCapacity"}},
		{"SandboxNotFound", 404, code(httpapi.CodeSandboxNotFound), []string{"ErrNotFound", "ErrSandboxNotFound"}},
		{"ProcessNotFound", 404, code(httpapi.CodeProcessNotFound), []string{"ErrNotFound", "ErrProcessNotFound"}},
		{"FileNotFound", 404, code(httpapi.CodeFileNotFound), []string{"ErrNotFound"}},
		{"NotFound", 404, code(httpapi.CodeNotFound), []string{"ErrNotFound"}},
		{"NoRoute", 404, code(httpapi.CodeNoRoute), nil},
		{"Unauthorized", 401, code(httpapi.CodeUnauthorized), []string{"ErrUnauthorized"}},
		{"InvalidRequest", 400, code(httpapi.CodeInvalidRequest), []string{"ErrInvalidRequest"}},
		{"MessageIgnored", 400, `{"error":{"code":"no_browser","message":"sandbox_not_found at_capacity"}}`, nil},
		{"NoCode404", 404, "not here", []string{"ErrNotFound"}},
		{"NoCode429", 429, "", []string{"ErrCapacity"}},
		{"NoCode500", 500, "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(tc.status)
				w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			_, err := client.NewWorker(srv.URL, workerToken, nil).Sandbox("sb").Info(ctxT(t))
			var got []string
			for name, s := range sentinels {
				if errors.Is(err, s) {
					got = append(got, name)
				}
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.SortSlices(func(a, b string) bool { return a < b }), cmpopts.EquateEmpty()); diff != "" {
				t.Fatalf("%v matches (-want +got):\n%s", err, diff)
			}
		})
	}
}

// code is the error answer of c.
func code(c string) string { return `{"error":{"code":"` + c + `","message":"m"}}` }
