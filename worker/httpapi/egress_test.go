package httpapi

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"openvibe.network/agentsandbox"
	"openvibe.network/agentsandbox/sandbox"
	"openvibe.network/agentsandbox/worker/httpapi/apitest"
)

// TestCreateEgress: the create's egress policy reaches the runtime
// validated and in canonical form (mode none as no egress at all), and the
// sandbox view shows it, in the create's answer and in the list.
func TestCreateEgress(t *testing.T) {
	withProxy := func(c *Config) { c.Egress = true }
	for _, tc := range []struct {
		name string
		body string
		mod  func(*Config)
		// opts are the egress options the runtime got; view what the API shows.
		opts sandbox.Options
		view agentsandbox.EgressPolicy
	}{
		{"OKDefaultPublic", `{}`, withProxy,
			sandbox.Options{Egress: true, EgressPolicy: agentsandbox.EgressPolicy{Mode: "public"}},
			agentsandbox.EgressPolicy{Mode: "public"}},
		{"OKDefaultWithoutProxyIsNone", `{}`, nil, sandbox.Options{}, agentsandbox.EgressPolicy{Mode: "none"}},
		{"OKWorkerDefaultNone", `{}`, func(c *Config) { c.Egress, c.EgressDefault = true, agentsandbox.EgressPolicy{Mode: "none"} },
			sandbox.Options{}, agentsandbox.EgressPolicy{Mode: "none"}},
		{"OKNone", `{"egress":{"mode":"none"}}`, withProxy, sandbox.Options{}, agentsandbox.EgressPolicy{Mode: "none"}},
		{"OKNoneWithoutProxy", `{"egress":{"mode":"none"}}`, nil, sandbox.Options{}, agentsandbox.EgressPolicy{Mode: "none"}},
		{"OKAllow", `{"egress":{"mode":"allow","allow":["PyPI.org","*.pythonhosted.org","registry.npmjs.org:443"],"deny":["evil.pypi.org"]}}`, withProxy,
			sandbox.Options{Egress: true, EgressPolicy: agentsandbox.EgressPolicy{Mode: "allow",
				Allow: agentsandbox.EgressHosts("pypi.org", "*.pythonhosted.org", "registry.npmjs.org:443"), Deny: []string{"evil.pypi.org"}}},
			agentsandbox.EgressPolicy{Mode: "allow", Allow: agentsandbox.EgressHosts("pypi.org", "*.pythonhosted.org", "registry.npmjs.org:443"), Deny: []string{"evil.pypi.org"}}},
		{"OKRules", `{"egress":{"mode":"allow","allow":["pypi.org",{"host":"API.github.com","methods":["get"],"paths":["/repos/acme/"]}]}}`, withProxy,
			sandbox.Options{Egress: true, EgressPolicy: agentsandbox.EgressPolicy{Mode: "allow", Allow: []agentsandbox.EgressEntry{{Host: "pypi.org"},
				{Host: "api.github.com", Methods: []string{"GET"}, Paths: []string{"/repos/acme/"}}}}},
			agentsandbox.EgressPolicy{Mode: "allow", Allow: []agentsandbox.EgressEntry{{Host: "pypi.org"},
				{Host: "api.github.com", Methods: []string{"GET"}, Paths: []string{"/repos/acme/"}}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := apitest.NewFake(2)
			ts := newTestServer(t, fake, tc.mod)
			a := ts.do(t, "POST", "/v1/sandboxes", tc.body, nil)
			if a.status != 201 {
				t.Fatalf("create: %d %s", a.status, a.body)
			}
			got := fake.Created()[0]
			if diff := cmp.Diff(tc.opts, sandbox.Options{Egress: got.Egress, EgressPolicy: got.EgressPolicy}); diff != "" {
				t.Fatalf("the runtime's egress options (-want +got):\n%s", diff)
			}
			var sb Sandbox
			if err := json.Unmarshal(a.body, &sb); err != nil {
				t.Fatal(err)
			}
			var list SandboxList
			if err := json.Unmarshal(ts.do(t, "GET", "/v1/sandboxes", "", nil).body, &list); err != nil || len(list.Items) != 1 {
				t.Fatalf("list: %v %+v", err, list)
			}
			if diff := cmp.Diff([]agentsandbox.EgressPolicy{tc.view, tc.view}, []agentsandbox.EgressPolicy{sb.Egress, list.Items[0].Egress}); diff != "" {
				t.Fatalf("the view's egress, create then list (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCreateEgressRefused: a policy the worker cannot take is a 400 that
// names the entry and what to fix, and no sandbox is made.
func TestCreateEgressRefused(t *testing.T) {
	withProxy := func(c *Config) { c.Egress = true }
	many := make([]string, 257)
	for i := range many {
		many[i] = fmt.Sprintf("%q", fmt.Sprintf("h%d.example", i))
	}
	for _, tc := range []struct {
		name, body string
		mod        func(*Config)
		want       Error
	}{
		{"ErrNoMode", `{"egress":{}}`, withProxy, Error{Code: "invalid_egress_policy", Message: "egress.mode: the mode is required: none, public, allow"}},
		{"ErrBadMode", `{"egress":{"mode":"open"}}`, withProxy, Error{Code: "invalid_egress_policy", Message: `egress.mode: unknown mode "open": use none, public, allow`}},
		{"ErrPattern", `{"egress":{"mode":"allow","allow":["a.*.org"]}}`, withProxy, Error{Code: "invalid_egress_policy",
			Message: `egress.allow[0]: "a.*.org": a wildcard is only "*." at the start, matching one or more labels (e.g. *.example.org)`}},
		{"ErrPort", `{"egress":{"mode":"allow","allow":["pypi.org:22"]}}`, withProxy, Error{Code: "invalid_egress_policy",
			Message: `egress.allow[0]: "pypi.org:22": port 22 is not one of this worker's egress ports (80, 443)`}},
		{"ErrTooMany", `{"egress":{"mode":"allow","allow":[` + strings.Join(many, ",") + `]}}`, withProxy, Error{Code: "invalid_egress_policy",
			Message: "egress.allow: the policy has 257 entries; this worker takes at most 256 (allow and deny together)"}},
		{"ErrUnknownField", `{"egress":{"mode":"public","allowed":[]}}`, withProxy, Error{Code: "invalid_request",
			Message: `unknown field "egress.allowed"; see docs/openapi.yaml`}},
		{"ErrRuleMethod", `{"egress":{"mode":"allow","allow":[{"host":"api.github.com","methods":["GET","FETCH"]}]}}`, withProxy, Error{Code: "invalid_egress_policy",
			Message: `egress.allow[0].methods[1]: unknown method "FETCH": use GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS`}},
		{"ErrRulePath", `{"egress":{"mode":"allow","allow":[{"host":"api.github.com","paths":["repos/acme"]}]}}`, withProxy, Error{Code: "invalid_egress_policy",
			Message: `egress.allow[0].paths[0]: "repos/acme": a path starts with '/', e.g. /repos/acme/`}},
		{"ErrRuleEmptyMethods", `{"egress":{"mode":"allow","allow":[{"host":"api.github.com","methods":[]}]}}`, withProxy, Error{Code: "invalid_egress_policy",
			Message: `egress.allow[0].methods: empty: list methods (e.g. ["GET"]) or leave methods out for any method`}},
		{"ErrRuleDenied", `{"egress":{"mode":"allow","allow":[{"host":"api.github.com","methods":["GET"]}],"deny":["api.github.com"]}}`, withProxy,
			Error{Code: "invalid_egress_policy", Message: `egress.allow[0]: "api.github.com" has methods or paths, but deny entry "api.github.com" refuses it: remove one of them`}},
		{"ErrRulePublic", `{"egress":{"mode":"public","allow":[{"host":"api.github.com","methods":["GET"]}]}}`, withProxy, Error{Code: "invalid_egress_policy",
			Message: `egress.allow: allow entries are for mode allow; mode public reaches every public address (add deny entries to refuse some)`}},
		{"ErrRuleField", `{"egress":{"mode":"allow","allow":[{"host":"api.github.com","method":["GET"]}]}}`, withProxy, Error{Code: "invalid_request",
			Message: `field "egress.allow[0]": an allow entry object has host, methods and paths only: json: unknown field "method"`}},
		{"ErrNoProxy", `{"egress":{"mode":"public"}}`, nil, Error{Code: "no_egress",
			Message: `this worker runs without an egress proxy: create the sandbox with egress {"mode":"none"}, or use a worker with egress`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := apitest.NewFake(2)
			ts := newTestServer(t, fake, tc.mod)
			a := ts.do(t, "POST", "/v1/sandboxes", tc.body, nil)
			if a.status != 400 {
				t.Fatalf("status %d, want 400: %s", a.status, a.body)
			}
			if diff := cmp.Diff(tc.want, a.errBody(t)); diff != "" || len(fake.Created()) != 0 {
				t.Fatalf("error (-want +got):\n%s\ncreated %d", diff, len(fake.Created()))
			}
		})
	}
}
