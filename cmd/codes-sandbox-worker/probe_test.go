package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"openvibe.network/agentsandbox/client"
)

// TestProbe: probe live passes while the API answers, probe ready only
// while the last self-test passed (else it prints the reasons); a worker
// that does not answer fails both.
func TestProbe(t *testing.T) {
	var status client.WorkerStatus
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/status" || r.Header.Get("Authorization") != "Bearer probe-token" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		_ = json.NewEncoder(w).Encode(status)
	}))
	defer srv.Close()
	token := filepath.Join(t.TempDir(), "api.token")
	if err := os.WriteFile(token, []byte("probe-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	listen := strings.TrimPrefix(srv.URL, "http://")
	passed := &client.SelfTest{Passed: true, CheckedAt: time.Now()}
	failed := &client.SelfTest{Reasons: []string{"the worker lacks CAP_SYS_ADMIN: add it"}, CheckedAt: time.Now()}
	for _, tc := range []struct {
		name     string
		selfTest *client.SelfTest
		args     []string
		wantCode int
		want     string // in stdout or stderr
	}{
		{"Live", failed, []string{"live"}, 0, "live: the API answers"},
		{"Ready", passed, []string{"ready"}, 0, "ready: the self-test of"},
		{"NotReady", failed, []string{"ready"}, 1, "not ready: the last self-test failed"},
		{"NoSelfTestYet", nil, []string{"ready"}, 1, "not ready: no self-test has run yet"},
		{"Down", passed, []string{"--listen", "127.0.0.1:1", "live"}, 1, "the worker's API did not answer"},
		{"ErrWhat", passed, []string{"dead"}, 2, `"dead": give live or ready`},
		{"ErrNotLoopback", passed, []string{"--listen", "192.0.2.1:8088", "live"}, 2, "not on this host's loopback"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status = client.WorkerStatus{Capacity: 2, SelfTest: tc.selfTest}
			var stdout, stderr bytes.Buffer
			args := append([]string{"probe", "--listen", listen, "--api-token-file", token, "--timeout", "5s"}, tc.args...)
			code := dispatch(context.Background(), args, nil, &stdout, &stderr)
			if code != tc.wantCode || !strings.Contains(stdout.String()+stderr.String(), tc.want) {
				t.Errorf("exit %d (want %d), output %q %q, want %q", code, tc.wantCode, stdout.String(), stderr.String(), tc.want)
			}
			if tc.name == "NotReady" && !strings.Contains(stderr.String(), "CAP_SYS_ADMIN") {
				t.Errorf("the reasons are not printed: %q", stderr.String())
			}
		})
	}
}

// TestProbeTarget: the probe asks the API on this host's loopback whatever
// address it listens on, and refuses one that is not this host's.
func TestProbeTarget(t *testing.T) {
	for _, tc := range []struct {
		addr    string
		tls     bool
		want    string
		wantErr bool
	}{
		{addr: "0.0.0.0:8088", want: "http://127.0.0.1:8088"},
		{addr: ":8088", want: "http://127.0.0.1:8088"},
		{addr: "[::]:8088", want: "http://[::1]:8088"},
		{addr: "127.0.0.1:9", tls: true, want: "https://127.0.0.1:9"},
		{addr: "localhost:8088", want: "http://localhost:8088"},
		{addr: "10.0.0.5:8088", wantErr: true},
		{addr: "nonsense", wantErr: true},
	} {
		got, c, err := probeTarget(tc.addr, tc.tls)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("probeTarget(%q) = %q, %v; want %q (error %v)", tc.addr, got, err, tc.want, tc.wantErr)
		}
		if err == nil && tc.tls != (c.Transport != nil) {
			t.Errorf("probeTarget(%q): TLS transport %v", tc.addr, c.Transport != nil)
		}
	}
}
