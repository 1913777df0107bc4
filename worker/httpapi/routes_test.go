package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"openvibe.network/agentsandbox"
	"openvibe.network/agentsandbox/sandbox"
	"openvibe.network/agentsandbox/worker/httpapi/apitest"
)

// routeCase is one request and what must come back.
type routeCase struct {
	name       string
	method     string
	path       string // "{id}" is replaced by the existing sandbox's id
	body       string
	hdr        map[string]string
	mod        func(*Config)
	setup      func(*apitest.Fake)
	wantStatus int
	wantCode   string // the error code, for error answers
	wantMsg    string // a part of the error message
	check      func(t *testing.T, ts *testServer, a answer)
}

// In every case the fake holds sandbox sb-1 (capacity 2) before setup runs.

func TestRoutes(t *testing.T) {
	full := func(f *apitest.Fake) { mustCreate(t, f) }
	for _, tc := range routeCases(full) {
		t.Run(tc.name, func(t *testing.T) {
			ts, _, a := tc.serve(t)
			if a.status != tc.wantStatus {
				t.Fatalf("status %d, want %d; body %s", a.status, tc.wantStatus, a.body)
			}
			if tc.wantCode != "" {
				e := a.errBody(t)
				if e.Code != tc.wantCode || !strings.Contains(e.Message, tc.wantMsg) {
					t.Fatalf("error %+v, want code %q and a message with %q", e, tc.wantCode, tc.wantMsg)
				}
				if strings.Contains(e.Message, "httpapi.") || strings.Contains(e.Message, " Go ") {
					t.Fatalf("error %+v speaks of Go's types", e)
				}
				if ct := a.header.Get("Content-Type"); ct != "application/json" {
					t.Fatalf("error Content-Type %q", ct)
				}
			}
			if tc.check != nil {
				tc.check(t, ts, a)
			}
		})
	}
}

// serve asks tc of a fresh server whose fake holds sandbox sb-1 (capacity
// 2) before tc.setup runs; it returns the server, the path asked and the
// answer.
func (tc routeCase) serve(tb testing.TB) (*testServer, string, answer) {
	tb.Helper()
	fake := apitest.NewFake(2)
	id := mustCreate(tb, fake)
	if tc.setup != nil {
		tc.setup(fake)
	}
	ts := newTestServer(tb, fake, tc.mod)
	p := strings.ReplaceAll(tc.path, "{id}", id)
	return ts, p, ts.do(tb, tc.method, p, tc.body, tc.hdr)
}

func routeCases(full func(*apitest.Fake)) []routeCase {
	return append([]routeCase{
		{name: "ErrNoToken", method: "GET", path: "/v1/sandboxes", hdr: map[string]string{"Authorization": ""},
			wantStatus: 401, wantCode: "unauthorized", wantMsg: "Authorization: Bearer", check: wantHeader("WWW-Authenticate", `Bearer realm="codes-sandbox"`)},
		{name: "ErrWrongToken", method: "GET", path: "/v1/status", hdr: map[string]string{"Authorization": "Bearer " + testToken + "x"},
			wantStatus: 401, wantCode: "unauthorized", check: wantHeader("WWW-Authenticate", `Bearer realm="codes-sandbox"`)},
		{name: "SchemeAnyCase", method: "GET", path: "/v1/status", hdr: map[string]string{"Authorization": "bearer " + testToken}, wantStatus: 200},
		{name: "ErrEmptyBearer", method: "GET", path: "/v1/status", hdr: map[string]string{"Authorization": "Bearer "}, wantStatus: 401, wantCode: "unauthorized"},
		{name: "ErrBasicAuth", method: "GET", path: "/v1/status", hdr: map[string]string{"Authorization": "Basic " + testToken},
			wantStatus: 401, wantCode: "unauthorized"},
		{name: "ErrUnauthenticatedUnknownRoute", method: "GET", path: "/nope", hdr: map[string]string{"Authorization": ""},
			wantStatus: 401, wantCode: "unauthorized"},
		{name: "ErrNoRoute", method: "GET", path: "/v2/things", wantStatus: 404, wantCode: "no_route"},
		{name: "ErrMethodNotAllowed", method: "PATCH", path: "/v1/sandboxes", wantStatus: 405, wantCode: "method_not_allowed",
			wantMsg: "use POST, GET", check: wantHeader("Allow", "POST, GET")},

		{name: "CreateDefaults", method: "POST", path: "/v1/sandboxes", body: `{}`, wantStatus: 201, check: checkCreate(5*time.Minute, nil)},
		{name: "CreateEnvAndTimeBox", method: "POST", path: "/v1/sandboxes", body: `{"time_box_minutes":30,"env":{"GOFLAGS":"-mod=mod","_X1":""}}`,
			wantStatus: 201, check: checkCreate(30*time.Minute, map[string]string{"GOFLAGS": "-mod=mod", "_X1": ""})},
		{name: "CreateBrowser", method: "POST", path: "/v1/sandboxes", body: `{"browser":true}`, mod: func(c *Config) { c.Browser = true },
			wantStatus: 201, check: func(t *testing.T, _ *testServer, a answer) {
				var sb Sandbox
				if err := json.Unmarshal(a.body, &sb); err != nil || !sb.Browser {
					t.Fatalf("answer %s: browser not true (%v)", a.body, err)
				}
			}},
		{name: "ErrCreateBrowserStartFails", method: "POST", path: "/v1/sandboxes", body: `{"browser":{"start":true}}`, mod: func(c *Config) { c.Browser = true },
			wantStatus: 500, wantCode: "internal", check: func(t *testing.T, ts *testServer, _ answer) {
				if n := len(ts.fake.List()); n != 1 {
					t.Fatalf("%d sandboxes after a create whose browser did not start, want the one it had", n)
				}
			}},
		{name: "ErrCreateBrowserBadValue", method: "POST", path: "/v1/sandboxes", body: `{"browser":"yes"}`, mod: func(c *Config) { c.Browser = true },
			wantStatus: 400, wantCode: "invalid_request", wantMsg: `give true, false or {"start": true}`},
		{name: "ErrCreateBrowserLimits", method: "POST", path: "/v1/sandboxes", body: `{"browser":true,"limits":{"memory_mb":256}}`, mod: func(c *Config) { c.Browser = true },
			wantStatus: 400, wantCode: "invalid_request", wantMsg: "memory_mb is 256; a browser sandbox needs at least 512"},
		{name: "ErrBrowserNone", method: "GET", path: "/v1/sandboxes/{id}/browser", wantStatus: 400, wantCode: "no_browser", wantMsg: `create one with "browser": true`},
		{name: "ErrBrowserVersionNone", method: "GET", path: "/v1/sandboxes/{id}/browser/json/version", wantStatus: 400, wantCode: "no_browser"},
		{name: "ErrBrowserUnknown", method: "GET", path: "/v1/sandboxes/nope/browser", wantStatus: 404, wantCode: "sandbox_not_found"},
		{name: "ErrBrowserNotWebSocket", method: "GET", path: "/v1/sandboxes/sb-2/browser", mod: func(c *Config) { c.Browser = true },
			setup: func(f *apitest.Fake) {
				if _, err := f.Create(context.Background(), sandbox.Options{Browser: true}); err != nil {
					panic(err)
				}
			}, wantStatus: 400, wantCode: "invalid_request", wantMsg: "connect with Upgrade: websocket"},
		{name: "ErrCreateNoBrowser", method: "POST", path: "/v1/sandboxes", body: `{"browser":true}`, wantStatus: 400,
			wantCode: "no_browser", wantMsg: "no browser on this worker"},
		{name: "ErrCreateTimeBoxLow", method: "POST", path: "/v1/sandboxes", body: `{"time_box_minutes":4}`, wantStatus: 400,
			wantCode: "invalid_request", wantMsg: "time_box_minutes is 4; give 5 to 30"},
		{name: "ErrCreateTimeBoxZero", method: "POST", path: "/v1/sandboxes", body: `{"time_box_minutes":0}`, wantStatus: 400,
			wantCode: "invalid_request", wantMsg: "time_box_minutes is 0"},
		{name: "ErrCreateTimeBoxHigh", method: "POST", path: "/v1/sandboxes", body: `{"time_box_minutes":31}`, wantStatus: 400,
			wantCode: "invalid_request", wantMsg: "give 5 to 30"},
		{name: "ErrCreateBadJSON", method: "POST", path: "/v1/sandboxes", body: `{"env":`, wantStatus: 400,
			wantCode: "invalid_request", wantMsg: "ends in the middle"},
		{name: "ErrCreateSyntax", method: "POST", path: "/v1/sandboxes", body: `{"env" 1}`, wantStatus: 400,
			wantCode: "invalid_request", wantMsg: "not valid JSON at byte"},
		{name: "CreateEmptyBody", method: "POST", path: "/v1/sandboxes", body: ``, wantStatus: 201, check: checkCreate(5*time.Minute, nil)},
		{name: "CreateWhiteSpaceBody", method: "POST", path: "/v1/sandboxes", body: " \n", wantStatus: 201, check: checkCreate(5*time.Minute, nil)},
		{name: "CreateBrowserNull", method: "POST", path: "/v1/sandboxes", body: `{"browser":null}`, wantStatus: 201, check: checkCreate(5*time.Minute, nil)},
		{name: "ErrCreateArray", method: "POST", path: "/v1/sandboxes", body: `[]`, wantStatus: 400,
			wantCode: "invalid_request", wantMsg: "the body must be a JSON object, not an array"},
		{name: "ErrCreateDuplicate", method: "POST", path: "/v1/sandboxes", body: `{"time_box_minutes":5,"time_box_minutes":30}`, wantStatus: 400,
			wantCode: "invalid_request", wantMsg: `field "time_box_minutes" is given twice`},
		{name: "ErrCreateDuplicateNested", method: "POST", path: "/v1/sandboxes", body: `{"env":{"A":"1","A":"2"}}`, wantStatus: 400,
			wantCode: "invalid_request", wantMsg: `field "env.A" is given twice`},
		{name: "ErrCreateBrowserDuplicate", method: "POST", path: "/v1/sandboxes", body: `{"browser":{"start":true,"start":false}}`,
			mod: func(c *Config) { c.Browser = true }, wantStatus: 400, wantCode: "invalid_request", wantMsg: `field "browser.start" is given twice`},
		{name: "ErrCreateBrowserUnknown", method: "POST", path: "/v1/sandboxes", body: `{"browser":{"start":true,"headful":true}}`,
			mod: func(c *Config) { c.Browser = true }, wantStatus: 400, wantCode: "invalid_request", wantMsg: `unknown field "browser.headful"`},
		{name: "ErrCreateCaseFolded", method: "POST", path: "/v1/sandboxes", body: `{"TIME_BOX_MINUTES":30}`, wantStatus: 400,
			wantCode: "invalid_request", wantMsg: `unknown field "TIME_BOX_MINUTES"`},
		{name: "ErrCreateLimitType", method: "POST", path: "/v1/sandboxes", body: `{"limits":{"memory_mb":1.5}}`, wantStatus: 400,
			wantCode: "invalid_request", wantMsg: `field "limits.memory_mb" must be an integer, not 1.5`},
		{name: "ErrExecArgvType", method: "POST", path: "/v1/sandboxes/{id}/exec", body: `{"argv":["ls",1]}`, wantStatus: 400,
			wantCode: "invalid_request", wantMsg: `field "argv[1]" must be a string, not a number`},
		{name: "ErrExecEmpty", method: "POST", path: "/v1/sandboxes/{id}/exec", body: ``, wantStatus: 400,
			wantCode: "invalid_request", wantMsg: "body is empty"},
		{name: "ErrCreateUnknownField", method: "POST", path: "/v1/sandboxes", body: `{"timebox":5}`, wantStatus: 400,
			wantCode: "invalid_request", wantMsg: `unknown field "timebox"`},
		{name: "ErrCreateWrongType", method: "POST", path: "/v1/sandboxes", body: `{"time_box_minutes":"5"}`, wantStatus: 400,
			wantCode: "invalid_request", wantMsg: `field "time_box_minutes" must be an integer, not a string`},
		{name: "ErrCreateTrailing", method: "POST", path: "/v1/sandboxes", body: `{} {}`, wantStatus: 400,
			wantCode: "invalid_request", wantMsg: "one JSON object and nothing after it"},
		{name: "ErrCreateEnvName", method: "POST", path: "/v1/sandboxes", body: `{"env":{"1BAD":"x"}}`, wantStatus: 400,
			wantCode: "invalid_request", wantMsg: `env name "1BAD" is not a valid variable name`},
		{name: "ErrCreateEnvNUL", method: "POST", path: "/v1/sandboxes", body: `{"env":{"A":"x\u0000y"}}`, wantStatus: 400,
			wantCode: "invalid_request", wantMsg: `NUL`},
		{name: "ErrCreateMediaType", method: "POST", path: "/v1/sandboxes", body: `{}`, hdr: map[string]string{"Content-Type": "text/plain"},
			wantStatus: 415, wantCode: "unsupported_media_type"},
		{name: "ErrCreateTooLarge", method: "POST", path: "/v1/sandboxes", body: `{"env":{"A":"` + strings.Repeat("x", 200) + `"}}`,
			mod: func(c *Config) { c.MaxBody = 64 }, wantStatus: 413, wantCode: "body_too_large", wantMsg: "64 bytes"},
		{name: "ErrCreateAtCapacity", method: "POST", path: "/v1/sandboxes", body: `{}`, setup: full, wantStatus: 429,
			wantCode: "at_capacity", wantMsg: "every sandbox slot", check: wantHeader("Retry-After", "5")},

		{name: "List", method: "GET", path: "/v1/sandboxes", setup: full, wantStatus: 200, check: checkList(2)},
		{name: "DeleteThenListEmpty", method: "DELETE", path: "/v1/sandboxes/{id}", wantStatus: 200, check: func(t *testing.T, ts *testServer, _ answer) {
			checkList(0)(t, ts, ts.do(t, "GET", "/v1/sandboxes", "", nil))
		}},
		{name: "ErrDeleteUnknown", method: "DELETE", path: "/v1/sandboxes/sb-404", wantStatus: 404, wantCode: "sandbox_not_found", wantMsg: `"sb-404"`},
		{name: "ErrDeleteUnverified", method: "DELETE", path: "/v1/sandboxes/{id}", setup: func(f *apitest.Fake) { f.Leftovers = []string{"pid 42", "/run/x"} },
			wantStatus: 500, wantCode: "wipe_unverified", wantMsg: "2 leftovers", check: func(t *testing.T, _ *testServer, a answer) {
				if got := a.errBody(t).Leftovers; strings.Join(got, ",") != "pid 42,/run/x" {
					t.Fatalf("leftovers %q", got)
				}
			}},

		{name: "ErrExecUnknown", method: "POST", path: "/v1/sandboxes/sb-404/exec", body: `{"argv":["true"]}`, wantStatus: 404, wantCode: "sandbox_not_found"},
		{name: "ErrExecNoArgv", method: "POST", path: "/v1/sandboxes/{id}/exec", body: `{}`, wantStatus: 400, wantCode: "invalid_request", wantMsg: "argv is required"},
		{name: "ErrExecEmptyArgv0", method: "POST", path: "/v1/sandboxes/{id}/exec", body: `{"argv":[""]}`, wantStatus: 400, wantMsg: "argv is required", wantCode: "invalid_request"},
		{name: "ErrExecBothStdin", method: "POST", path: "/v1/sandboxes/{id}/exec", body: `{"argv":["cat"],"stdin":"a","stdin_base64":"YQ=="}`,
			wantStatus: 400, wantCode: "invalid_request", wantMsg: "not both"},
		{name: "ErrExecBadBase64", method: "POST", path: "/v1/sandboxes/{id}/exec", body: `{"argv":["cat"],"stdin_base64":"!!"}`,
			wantStatus: 400, wantCode: "invalid_request", wantMsg: "stdin_base64 is not standard base64"},
		{name: "ErrExecCwdOutside", method: "POST", path: "/v1/sandboxes/{id}/exec", body: `{"argv":["ls"],"cwd":"/etc"}`,
			wantStatus: 400, wantCode: "invalid_request", wantMsg: `cwd "/etc" is not under /workspace`},
		{name: "ErrExecCwdTmp", method: "POST", path: "/v1/sandboxes/{id}/exec", body: `{"argv":["ls"],"cwd":"/tmp"}`,
			wantStatus: 400, wantCode: "invalid_request", wantMsg: `cwd "/tmp" is not under /workspace: a command starts in the workspace or one of its directories; give a path relative to /workspace (to work in /tmp, which the sandbox may write too, run e.g. sh -c 'cd /tmp && …')`},
		{name: "ErrFileNameTooLong", method: "PUT", path: "/v1/sandboxes/{id}/files/dir/" + strings.Repeat("n", 300), body: "x",
			wantStatus: 400, wantCode: "invalid_request", wantMsg: `path holds a name of 300 bytes ("nnnnnnnnnnnnnnnnnnnnnnnn"…); a file or directory name may have at most 255`},
		{name: "ErrFilePathTooLong", method: "GET", path: "/v1/sandboxes/{id}/files/" + strings.Repeat("d/", 2001),
			wantStatus: 400, wantCode: "invalid_request", wantMsg: "path is 4001 bytes long; a path may have at most 4000"},
		{name: "ErrExecCwdDotDot", method: "POST", path: "/v1/sandboxes/{id}/exec", body: `{"argv":["ls"],"cwd":"/workspace/../etc"}`,
			wantStatus: 400, wantCode: "invalid_request", wantMsg: "contains `..`"},
		{name: "ErrExecTimeout", method: "POST", path: "/v1/sandboxes/{id}/exec", body: `{"argv":["ls"],"timeout_seconds":-1}`,
			wantStatus: 400, wantCode: "invalid_request", wantMsg: "timeout_seconds is -1"},
		{name: "ErrExecEnv", method: "POST", path: "/v1/sandboxes/{id}/exec", body: `{"argv":["ls"],"env":{"A-B":"1"}}`,
			wantStatus: 400, wantCode: "invalid_request", wantMsg: `env name "A-B"`},

		{name: "ErrExecArgTooLarge", method: "POST", path: "/v1/sandboxes/{id}/exec", body: `{"argv":["echo","` + strings.Repeat("x", 140000) + `"]}`,
			wantStatus: 400, wantCode: "invalid_request", wantMsg: "argv[1] is 140000 bytes; at most 131072"},
		{name: "ErrExecArgvTooLarge", method: "POST", path: "/v1/sandboxes/{id}/exec",
			body:       `{"argv":["echo","` + strings.Repeat("x", 100000) + `","` + strings.Repeat("x", 100000) + `","` + strings.Repeat("x", 100000) + `"]}`,
			wantStatus: 400, wantCode: "invalid_request", wantMsg: "argv is 300008 bytes; at most 262144"},
		{name: "ErrExecSizeWithoutTTY", method: "POST", path: "/v1/sandboxes/{id}/exec", body: `{"argv":["ls"],"rows":10}`,
			wantStatus: 400, wantCode: "invalid_request", wantMsg: `add "tty": true`},
		{name: "ErrExecSizeRange", method: "POST", path: "/v1/sandboxes/{id}/exec", body: `{"argv":["ls"],"tty":true,"cols":5000}`,
			wantStatus: 400, wantCode: "invalid_request", wantMsg: "rows and cols are 0×5000"},
		{name: "ErrExecBackgroundStdin", method: "POST", path: "/v1/sandboxes/{id}/exec", body: `{"argv":["cat"],"background":true,"stdin":"x"}`,
			wantStatus: 400, wantCode: "invalid_request", wantMsg: "a background command takes no stdin"},

		{name: "GetSandbox", method: "GET", path: "/v1/sandboxes/{id}", setup: func(f *apitest.Fake) {
			_ = f.PutFile(context.Background(), "sb-1", "a", strings.NewReader("12345"), 0o644)
		}, wantStatus: 200, check: func(t *testing.T, _ *testServer, a answer) {
			var st SandboxState
			if err := json.Unmarshal(a.body, &st); err != nil {
				t.Fatal(err)
			}
			if st.ID != "sb-1" || st.State != "running" || st.Usage != (agentsandbox.Usage{WorkspaceBytes: 5}) || st.Limits.MemoryMB != agentsandbox.DefaultMemoryMB {
				t.Fatalf("sandbox %+v", st)
			}
		}},
		{name: "ErrGetSandboxUnknown", method: "GET", path: "/v1/sandboxes/sb-404", wantStatus: 404, wantCode: "sandbox_not_found"},
		{name: "Extend", method: "PATCH", path: "/v1/sandboxes/{id}", body: `{"time_box_minutes":30}`, wantStatus: 200,
			check: func(t *testing.T, ts *testServer, a answer) {
				var sb Sandbox
				if err := json.Unmarshal(a.body, &sb); err != nil || sb.Limits.TimeBoxMinutes != 30 || sb.ExpiresAt.Sub(sb.CreatedAt) != 30*time.Minute {
					t.Fatalf("extended %s (%v)", a.body, err)
				}
			}},
		{name: "ErrExtendTooLong", method: "PATCH", path: "/v1/sandboxes/{id}", body: `{"time_box_minutes":31}`,
			wantStatus: 400, wantCode: "invalid_request", wantMsg: "time_box_minutes is 31; give 5 to 30"},
		{name: "ErrExtendMissing", method: "PATCH", path: "/v1/sandboxes/{id}", body: `{}`,
			wantStatus: 400, wantCode: "invalid_request", wantMsg: "give time_box_minutes"},
		{name: "ErrExtendUnknown", method: "PATCH", path: "/v1/sandboxes/sb-404", body: `{"time_box_minutes":10}`, wantStatus: 404, wantCode: "sandbox_not_found"},

		{name: "ErrProcessBadPid", method: "GET", path: "/v1/sandboxes/{id}/processes/x1", wantStatus: 400, wantCode: "invalid_request", wantMsg: `pid "x1" is not a process id`},
		{name: "ErrProcessesUnknown", method: "GET", path: "/v1/sandboxes/sb-404/processes", wantStatus: 404, wantCode: "sandbox_not_found"},
		{name: "ErrOutputUnknown", method: "GET", path: "/v1/sandboxes/sb-404/processes/7/output?follow=1", wantStatus: 404, wantCode: "sandbox_not_found"},
		{name: "ErrOutputFollow", method: "GET", path: "/v1/sandboxes/{id}/processes/7/output?follow=yes", wantStatus: 400, wantCode: "invalid_request", wantMsg: "?follow=yes is not a boolean"},
		{name: "ErrSignalEmpty", method: "POST", path: "/v1/sandboxes/{id}/processes/7/signal", body: `{"signal":""}`, wantStatus: 400, wantCode: "invalid_request", wantMsg: "give signal"},
		{name: "ErrStdinMediaType", method: "POST", path: "/v1/sandboxes/{id}/processes/7/stdin", body: "x", hdr: map[string]string{"Content-Type": "text/plain"},
			wantStatus: 415, wantCode: "unsupported_media_type", wantMsg: "application/octet-stream"},
		{name: "ErrAttachNotWebSocket", method: "GET", path: "/v1/sandboxes/{id}/processes/7/attach", wantStatus: 400, wantCode: "invalid_request", wantMsg: "attach is a WebSocket"},

		{name: "StatusNoSelfTest", method: "GET", path: "/v1/status", wantStatus: 200, check: checkJSON(`{"capacity":2,"active":1,"self_test":null,"pooled":0}`)},
		{name: "StatusSelfTest", method: "GET", path: "/v1/status", mod: func(c *Config) {
			c.Status = func() Status {
				return Status{Capacity: 99, SelfTest: &SelfTestSummary{Passed: false, Checks: map[string]bool{"seccomp": false},
					Reasons: []string{"seccomp: ptrace was allowed"}, CheckedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}}
			}
		}, wantStatus: 200, check: checkJSON(`{"capacity":2,"active":1,"self_test":{"passed":false,"checks":{"seccomp":false},"not_run":[],"reasons":["seccomp: ptrace was allowed"],"checked_at":"2026-01-02T03:04:05Z"},"pooled":0}`)},
		{name: "ErrSelfTestNone", method: "POST", path: "/v1/selftest", wantStatus: 501, wantCode: "no_selftest"},
		{name: "SelfTest", method: "POST", path: "/v1/selftest", mod: func(c *Config) {
			c.RunSelfTest = func(context.Context) (SelfTestSummary, error) {
				return SelfTestSummary{Passed: true, Checks: map[string]bool{"wipe": true}, CheckedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}, nil
			}
		}, wantStatus: 200, check: checkJSON(`{"passed":true,"checks":{"wipe":true},"not_run":[],"reasons":null,"checked_at":"2026-01-02T03:04:05Z"}`)},
		{name: "ErrSelfTestBusy", method: "POST", path: "/v1/selftest", mod: func(c *Config) {
			c.RunSelfTest = func(context.Context) (SelfTestSummary, error) {
				return SelfTestSummary{}, sandbox.ErrCapacity
			}
		}, wantStatus: 429, wantCode: "at_capacity"},
		{name: "ErrSelfTestFails", method: "POST", path: "/v1/selftest", mod: func(c *Config) {
			c.RunSelfTest = func(context.Context) (SelfTestSummary, error) {
				return SelfTestSummary{}, errors.New("bwrap: secret detail")
			}
		}, wantStatus: 500, wantCode: "internal", check: func(t *testing.T, _ *testServer, a answer) {
			if strings.Contains(string(a.body), "secret detail") {
				t.Fatalf("internal detail leaked: %s", a.body)
			}
		}},
	}, append(fileRouteCases(), append(portRouteCases(), imageRouteCases()...)...)...)
}

func wantHeader(name, want string) func(*testing.T, *testServer, answer) {
	return func(t *testing.T, _ *testServer, a answer) {
		if got := a.header.Get(name); got != want {
			t.Fatalf("%s: %q, want %q", name, got, want)
		}
	}
}

func checkJSON(want string) func(*testing.T, *testServer, answer) {
	return func(t *testing.T, _ *testServer, a answer) {
		if got := strings.TrimSpace(string(a.body)); got != want {
			t.Fatalf("body\n%s\nwant\n%s", got, want)
		}
	}
}

func checkList(n int) func(*testing.T, *testServer, answer) {
	return func(t *testing.T, _ *testServer, a answer) {
		var l SandboxList
		if err := json.Unmarshal(a.body, &l); err != nil || len(l.Items) != n {
			t.Fatalf("list %s (%v), want %d items", a.body, err, n)
		}
		for _, it := range l.Items {
			if it.ID == "" || it.Limits.TimeBoxMinutes != 5 || it.Limits.MemoryMB == 0 {
				t.Fatalf("item %+v", it)
			}
		}
	}
}

func checkCreate(timeBox time.Duration, env map[string]string) func(*testing.T, *testServer, answer) {
	return func(t *testing.T, ts *testServer, a answer) {
		var sb Sandbox
		if err := json.Unmarshal(a.body, &sb); err != nil {
			t.Fatal(err)
		}
		if sb.ID != "sb-2" || sb.ExpiresAt.Sub(sb.CreatedAt) != timeBox || sb.Limits.TimeBoxMinutes != int(timeBox/time.Minute) {
			t.Fatalf("created %+v", sb)
		}
		opts := ts.fake.Created()
		got := opts[len(opts)-1]
		if got.TimeBox != timeBox || len(got.Env) != len(env) {
			t.Fatalf("runtime got %+v", got)
		}
		for k, v := range env {
			if got.Env[k] != v {
				t.Fatalf("env %s = %q, want %q", k, got.Env[k], v)
			}
		}
	}
}
