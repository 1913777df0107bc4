package httpapi

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"openvibe.network/agentsandbox"
	"openvibe.network/agentsandbox/worker/httpapi/apitest"
)

// TestCreateSecrets: a create's secrets reach the runtime as given, and
// every answer (create, get, list) shows their names and hosts, never a
// value; neither does the request's log line.
func TestCreateSecrets(t *testing.T) {
	const value = "sk-test-VALUE-never-shown"
	fake := apitest.NewFake(2)
	ts := newTestServer(t, fake, func(c *Config) { c.Egress = true })
	a := ts.do(t, "POST", "/v1/sandboxes", `{"env":{"A":"1"},"egress":{"mode":"allow","allow":["api.openai.com","*.github.com"]},`+
		`"secrets":{"OPENAI_API_KEY":{"value":"`+value+`","hosts":["api.openai.com"]},"GH_TOKEN":{"value":"`+value+`","hosts":["api.github.com:443"]}}}`, nil)
	if a.status != 201 {
		t.Fatalf("create: %d %s", a.status, a.body)
	}
	want := map[string]agentsandbox.Secret{
		"OPENAI_API_KEY": {Value: value, Hosts: []string{"api.openai.com"}},
		"GH_TOKEN":       {Value: value, Hosts: []string{"api.github.com:443"}},
	}
	if diff := cmp.Diff(want, fake.Created()[0].Secrets); diff != "" {
		t.Fatalf("the runtime's secrets (-want +got):\n%s", diff)
	}
	var sb Sandbox
	if err := json.Unmarshal(a.body, &sb); err != nil {
		t.Fatal(err)
	}
	view := map[string]SecretInfo{"OPENAI_API_KEY": {Hosts: []string{"api.openai.com"}}, "GH_TOKEN": {Hosts: []string{"api.github.com:443"}}}
	if diff := cmp.Diff(view, sb.Secrets); diff != "" {
		t.Fatalf("the view's secrets (-want +got):\n%s", diff)
	}
	get := ts.do(t, "GET", "/v1/sandboxes/"+sb.ID, "", nil)
	list := ts.do(t, "GET", "/v1/sandboxes", "", nil)
	for _, body := range []string{string(a.body), string(get.body), string(list.body), ts.logs.String()} {
		if strings.Contains(body, value) {
			t.Fatalf("the value is shown: %s", body)
		}
	}
	if !strings.Contains(string(get.body), `"secrets":{"GH_TOKEN":{"hosts":["api.github.com:443"]}`) {
		t.Fatalf("get: %s", get.body)
	}
}

// TestCreateSecretsRefused: secrets the worker cannot take are a 400
// saying what to fix (never quoting a value), and no sandbox is made.
func TestCreateSecretsRefused(t *testing.T) {
	withProxy := func(c *Config) { c.Egress = true }
	for _, tc := range []struct {
		name, body string
		mod        func(*Config)
		want       string
	}{
		{"ErrNoEgress", `{"egress":{"mode":"none"},"secrets":{"K":{"value":"v","hosts":["a.example"]}}}`, withProxy,
			"secrets need egress: this sandbox's egress mode is none, so nothing could use them; create it with egress public or allow"},
		{"ErrName", `{"secrets":{"1K":{"value":"v","hosts":["a.example"]}}}`, withProxy,
			`secrets name "1K" is not a valid variable name (letters, digits and _, not starting with a digit)`},
		{"ErrAlsoInEnv", `{"env":{"K":"x"},"secrets":{"K":{"value":"v","hosts":["a.example"]}}}`, withProxy,
			"secrets.K is also in env: give the variable in one of them"},
		{"ErrEmptyValue", `{"secrets":{"K":{"value":"","hosts":["a.example"]}}}`, withProxy, "secrets.K.value is empty: give the credential"},
		{"ErrCAVariable", `{"secrets":{"SSL_CERT_FILE":{"value":"v","hosts":["a.example"]}}}`, withProxy,
			"secrets.SSL_CERT_FILE: the name is one of the variables that name the sandbox's trust bundle"},
		{"ErrNewline", `{"secrets":{"K":{"value":"v\nX-Injected: 1","hosts":["a.example"]}}}`, withProxy,
			"secrets.K.value contains a NUL, CR or LF byte, which no header may carry: remove it"},
		{"ErrNoHosts", `{"secrets":{"K":{"value":"v"}}}`, withProxy, `secrets.K.hosts: give the hosts the secret may be sent to, e.g. ["api.example.com"]`},
		{"ErrPort80", `{"secrets":{"K":{"value":"v","hosts":["a.example:80"]}}}`, withProxy,
			`secrets.K.hosts[0]: "a.example:80": port 80 is not one of this worker's egress ports (443)`},
		{"ErrAddress", `{"secrets":{"K":{"value":"v","hosts":["192.0.2.7"]}}}`, withProxy,
			`secrets.K.hosts[0]: "192.0.2.7" is an address: a secret is for host names, whose certificates the proxy can check`},
		{"ErrNotAllowed", `{"egress":{"mode":"allow","allow":["pypi.org"]},"secrets":{"K":{"value":"v","hosts":["api.openai.com"]}}}`, withProxy,
			`secrets.K.hosts[0]: "api.openai.com" is not allowed by the sandbox's egress policy`},
		{"ErrUnknownField", `{"secrets":{"K":{"value":"v","hosts":["a.example"],"header":"x"}}}`, withProxy,
			`unknown field "secrets.K.header"; see docs/openapi.yaml`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := apitest.NewFake(2)
			ts := newTestServer(t, fake, tc.mod)
			a := ts.do(t, "POST", "/v1/sandboxes", tc.body, nil)
			got := a.errBody(t)
			if a.status != 400 || got.Code != "invalid_request" || !strings.HasPrefix(got.Message, tc.want) || len(fake.Created()) != 0 {
				t.Fatalf("%d %+v, want 400 invalid_request %q; created %d", a.status, got, tc.want, len(fake.Created()))
			}
		})
	}
}

// TestPatchSecrets: a PATCH's secrets reach the runtime, the answer shows
// their names, hosts and placeholders, never a value (nor the log); a
// time box and secrets go together; secrets the worker cannot take are a
// 400 saying what to fix.
func TestPatchSecrets(t *testing.T) {
	const value = "sk-test-VALUE-never-shown"
	fake := apitest.NewFake(2)
	ts := newTestServer(t, fake, func(c *Config) { c.Egress = true })
	a := ts.do(t, "POST", "/v1/sandboxes", `{"egress":{"mode":"allow","allow":["api.openai.com"]},`+
		`"secrets":{"OPENAI_API_KEY":{"value":"v0","hosts":["api.openai.com"]}}}`, nil)
	var sb Sandbox
	if err := json.Unmarshal(a.body, &sb); err != nil || a.status != 201 {
		t.Fatalf("create: %d %s", a.status, a.body)
	}
	p := ts.do(t, "PATCH", "/v1/sandboxes/"+sb.ID, `{"time_box_minutes":20,"secrets":{"NEW_KEY":{"value":"`+value+`","hosts":["api.openai.com"]}}}`, nil)
	var got Sandbox
	if err := json.Unmarshal(p.body, &got); err != nil || p.status != 200 {
		t.Fatalf("patch: %d %s", p.status, p.body)
	}
	want := Sandbox{Secrets: map[string]SecretInfo{"OPENAI_API_KEY": {Hosts: []string{"api.openai.com"}}, "NEW_KEY": {Hosts: []string{"api.openai.com"}}},
		SecretPlaceholders: map[string]string{"NEW_KEY": agentsandbox.SecretPlaceholderPrefix + "new_key"}}
	if diff := cmp.Diff(want, Sandbox{Secrets: got.Secrets, SecretPlaceholders: got.SecretPlaceholders}); diff != "" || got.Limits.TimeBoxMinutes != 20 {
		t.Fatalf("answer (-want +got):\n%s\ntime box %d", diff, got.Limits.TimeBoxMinutes)
	}
	if strings.Contains(string(p.body)+ts.logs.String(), value) {
		t.Fatalf("the value is shown: %s", p.body)
	}
	for _, tc := range []struct{ name, body, want string }{
		{"ErrNothing", `{}`, "give time_box_minutes"},
		{"ErrNewline", `{"secrets":{"K":{"value":"v\r\n","hosts":["api.openai.com"]}}}`, "secrets.K.value contains a NUL, CR or LF byte"},
		{"ErrNotAllowed", `{"secrets":{"K":{"value":"v","hosts":["pypi.org"]}}}`, `secrets.K.hosts[0]: "pypi.org" is not allowed by the sandbox's egress policy`},
		{"ErrTimeBox", `{"time_box_minutes":31,"secrets":{"K":{"value":"v","hosts":["api.openai.com"]}}}`, "time_box_minutes is 31"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := ts.do(t, "PATCH", "/v1/sandboxes/"+sb.ID, tc.body, nil)
			got := a.errBody(t)
			if a.status != 400 || got.Code != "invalid_request" || !strings.HasPrefix(got.Message, tc.want) {
				t.Fatalf("%d %+v, want 400 invalid_request %q", a.status, got, tc.want)
			}
		})
	}
}
