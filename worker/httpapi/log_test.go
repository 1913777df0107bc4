package httpapi

import (
	"encoding/json"
	"strings"
	"testing"

	"openvibe.network/agentsandbox/worker/httpapi/apitest"
)

// TestLogOneLinePerRequest: each request logs exactly one line with its
// method, route, status, sandbox id and duration, and never the token or
// the command's input.
func TestLogOneLinePerRequest(t *testing.T) {
	fake := apitest.NewFake(1)
	id := mustCreate(t, fake)
	ts := newTestServer(t, fake, nil)
	const secretStdin = "STDIN-SECRET-42"
	ts.do(t, "POST", "/v1/sandboxes/"+id+"/exec", `{"argv":["cat"],"stdin":"`+secretStdin+`"}`, nil)
	ts.do(t, "GET", "/v1/status", "", map[string]string{"Authorization": "Bearer wrong-" + testToken})
	ts.do(t, "DELETE", "/v1/sandboxes/"+id, "", nil)

	// the exec's line is written when its handler returns, which may be
	// after the client read the whole answer
	waitFor(t, func() bool { return strings.Count(ts.logs.String(), "\n") == 3 })
	logs := ts.logs.String()
	for _, secret := range []string{testToken, secretStdin} {
		if strings.Contains(logs, secret) {
			t.Fatalf("the log holds a secret %q:\n%s", secret, logs)
		}
	}
	want := []map[string]any{
		{"method": "POST", "route": "POST /v1/sandboxes/{id}/exec", "status": 200.0, "sandbox_id": id, "exit_code": 0.0, "stdout_bytes": float64(len(secretStdin))},
		{"method": "GET", "route": "", "status": 401.0, "sandbox_id": ""},
		{"method": "DELETE", "route": "DELETE /v1/sandboxes/{id}", "status": 200.0, "sandbox_id": id},
	}
	lines := strings.Split(strings.TrimSpace(logs), "\n")
	got := map[string]map[string]any{}
	for _, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		if _, ok := m["duration_ms"]; !ok || m["msg"] != "worker api request" {
			t.Fatalf("log line %q lacks a duration or its message", l)
		}
		got[m["method"].(string)] = m
	}
	for _, w := range want {
		g := got[w["method"].(string)]
		for k, v := range w {
			if g[k] != v {
				t.Fatalf("%s line: %s = %v, want %v (line %v)", w["method"], k, g[k], v, g)
			}
		}
	}
}
