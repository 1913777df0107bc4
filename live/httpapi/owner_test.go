package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"openvibe.network/agentsandbox/live"
)

// TestOwnerViewAuth checks who may read GET .../plays/worker.
func TestOwnerViewAuth(t *testing.T) { eachBackend(t, testOwnerViewAuth) }

func testOwnerViewAuth(t *testing.T, b backend) {
	f := newFixture(t, b, fixtureOptions{logs: true})
	for _, tc := range []struct {
		name   string
		auth   string // secret name for Bearer, "" none, "=raw" a raw header
		cookie string // secret name for ov_session
		stream string // "" the owner's stream
		status int
		code   string
		reason string
	}{
		{name: "NoCredential", status: 401, code: "unauthorized", reason: "no_credential"},
		{name: "UnknownToken", auth: "=Bearer ovp_unknown", status: 401, code: "unauthorized", reason: "unknown_credential"},
		{name: "RevokedPersonToken", auth: "person_revoked", status: 401, code: "unauthorized", reason: "revoked_credential"},
		{name: "ServiceToken", auth: "service", status: 403, code: "forbidden", reason: "service_token"},
		{name: "DeskTicket", auth: "desk", status: 403, code: "forbidden", reason: "not_owner_credential"},
		{name: "OtherPersonToken", auth: "other_person", status: 404, code: "not_found", reason: "not_owner"},
		{name: "OtherSession", cookie: "other_session", status: 404, code: "not_found", reason: "not_owner"},
		{name: "UnknownStream", auth: "person", stream: "str_nothere", status: 404, code: "not_found", reason: "no_stream"},
		{name: "OwnerToken", auth: "person", status: 200, reason: "owner"},
		{name: "OwnerSession", cookie: "session", status: 200, reason: "owner"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := req{method: "GET", path: checkInPath(f.stream), headers: map[string]string{}}
			switch {
			case strings.HasPrefix(tc.auth, "="):
				r.headers["Authorization"] = tc.auth[1:]
			case tc.auth != "":
				r.headers["Authorization"] = "Bearer " + f.secrets[tc.auth]
			}
			if tc.cookie != "" {
				r.cookies = []string{f.secrets[tc.cookie]}
			}
			if tc.stream != "" {
				r.path = checkInPath(tc.stream)
			}
			status, body := f.do(t, r)
			line := f.nextLog(t)
			if status != tc.status || line["reason"] != tc.reason {
				t.Fatalf("status %d reason %v, want %d %s; body %s", status, line["reason"], tc.status, tc.reason, body)
			}
			if tc.status == 200 {
				return
			}
			var e errorBody
			if err := json.Unmarshal(body, &e); err != nil || e.Error.Code != tc.code || e.Error.Message == "" {
				t.Fatalf("body %s, want code %s (%v)", body, tc.code, err)
			}
		})
	}
}

// TestCheckInLifecycle: an accepted report is stored byte for byte; a 422
// clears it at once and the owner sees why; a later accepted report makes
// the stream alive again.
func TestCheckInLifecycle(t *testing.T) { eachBackend(t, testCheckInLifecycle) }

func testCheckInLifecycle(t *testing.T, b backend) {
	f := newFixture(t, b, fixtureOptions{})
	ctx := context.Background()
	if v := f.ownerView(t, f.stream); v.State != "absent" || v.hasReport() || v.Refusal != nil {
		t.Fatalf("before any check-in: %+v", v)
	}

	// Odd spacing, key order, escapes and an unknown field: all kept.
	sent := []byte("{ \"zz_extra\" : [1, 2.50, \"\\u00e9\"],\n\t\"isolation\":{\"workspace\":\"ephemeral\", \"profile\":false,\"credentials\":false,\"host_network\":false,\"egress_proxy\":true}, \"worker_id\":\"w\u00e9\" }")
	if status, body := f.checkIn(t, f.stream, sent); status != 200 {
		t.Fatalf("accept: %d %s", status, body)
	}
	rec, err := f.store.Worker(ctx, f.stream)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Registration == nil || !bytes.Equal(rec.Registration.Report, sent) {
		t.Fatalf("stored report differs from the one sent:\n%q\n%q", rec.Registration.Report, sent)
	}
	if rec.Registration.ServiceID != f.services["worker"] || rec.Registration.SubjectID != f.owner {
		t.Fatalf("registration parties %+v", rec.Registration)
	}
	v := f.ownerView(t, f.stream)
	if v.State != "alive" || !jsonEqual(t, v.Report, sent) {
		t.Fatalf("after accept: state %s report %s", v.State, v.Report)
	}

	if status, body := f.checkIn(t, f.stream, []byte(noProfile)); status != 422 {
		t.Fatalf("refuse: %d %s", status, body)
	}
	v = f.ownerView(t, f.stream)
	if v.State != "refused" || v.hasReport() || v.ReceivedAt != nil || v.Refusal == nil {
		t.Fatalf("after refusal: %+v", v)
	}
	if len(v.Refusal.Errors) != 1 || v.Refusal.Errors[0].Path != "/isolation" || !strings.Contains(v.Refusal.Errors[0].Message, "profile") {
		t.Fatalf("refusal errors %+v", v.Refusal.Errors)
	}
	if v.Refusal.ServiceID != f.services["worker"] || v.Refusal.SubjectID != f.owner {
		t.Fatalf("refusal parties %+v", v.Refusal)
	}

	if status, body := f.checkIn(t, f.stream, validReport(t)); status != 200 {
		t.Fatalf("accept again: %d %s", status, body)
	}
	v = f.ownerView(t, f.stream)
	if v.State != "alive" || !jsonEqual(t, v.Report, validReport(t)) || v.Refusal == nil {
		t.Fatalf("after accepting again: state %s, refusal kept %v", v.State, v.Refusal != nil)
	}
}

// TestHealthClock pins the server's clock around the alive window, through
// the owner's view. The worker's own at (far in the future) and ready
// (false) play no part.
func TestHealthClock(t *testing.T) { eachBackend(t, testHealthClock) }

func testHealthClock(t *testing.T, b backend) {
	f := newFixture(t, b, fixtureOptions{})
	report := strings.Replace(isolationOnly, `{`, `{"ready":false,"at":"2099-01-01T00:00:00Z",`, 1)
	status, body := f.checkIn(t, f.stream, []byte(report))
	if status != 200 {
		t.Fatalf("accept: %d %s", status, body)
	}
	var ans struct {
		ReceivedAt time.Time `json:"received_at"`
		AliveUntil time.Time `json:"alive_until"`
	}
	if err := json.Unmarshal(body, &ans); err != nil {
		t.Fatal(err)
	}
	if !ans.AliveUntil.Equal(ans.ReceivedAt.Add(live.AliveWindow)) {
		t.Fatalf("alive_until %s, received_at %s", ans.AliveUntil, ans.ReceivedAt)
	}
	for _, tc := range []struct {
		name  string
		after time.Duration
		want  string
	}{
		{"AliveAt59.9s", 59900 * time.Millisecond, "alive"},
		{"StaleAt60.1s", 60100 * time.Millisecond, "stale"},
		{"StaleAnHourLater", time.Hour, "stale"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f.clock.Set(ans.ReceivedAt.Add(tc.after))
			v := f.ownerView(t, f.stream)
			if v.State != tc.want {
				t.Fatalf("state %s (%s), want %s", v.State, v.Reason, tc.want)
			}
			if v.AgeSeconds == nil || *v.AgeSeconds != tc.after.Seconds() {
				t.Fatalf("age_seconds %v, want %v", v.AgeSeconds, tc.after.Seconds())
			}
		})
	}
}

// jsonEqual reports whether a and b are the same JSON value.
func jsonEqual(tb testing.TB, a, b []byte) bool {
	tb.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		tb.Fatalf("%s: %v", a, err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		tb.Fatalf("%s: %v", b, err)
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return bytes.Equal(xb, yb)
}

// TestHealthz answers 200 while the store answers and 503 once it is
// closed, logging why.
func TestHealthz(t *testing.T) {
	f := newFixture(t, sqliteBackend, fixtureOptions{logs: true})
	if status, body := f.do(t, req{method: "GET", path: "/healthz"}); status != http.StatusOK {
		t.Fatalf("healthz %d %s", status, body)
	}
	f.nextLog(t)
	if err := f.store.Close(); err != nil {
		t.Fatal(err)
	}
	status, body := f.do(t, req{method: "GET", path: "/healthz"})
	var e errorBody
	if status != http.StatusServiceUnavailable || json.Unmarshal(body, &e) != nil || e.Error.Code != live.EUNAVAILABLE || !strings.Contains(e.Error.Message, "store not writable") {
		t.Fatalf("healthz on a closed store: %d %s", status, body)
	}
	if line := f.nextLog(t); line["level"] != "ERROR" || !strings.Contains(line["err"].(string), "closed") {
		t.Fatalf("log line %v, want the store's error", line)
	}
}

// fullStore is a store whose disk is full: its writes fail as the stores
// say so (live.StorageUnavailable).
type fullStore struct{ live.Store }

var errDiskFull = live.StorageUnavailable("the disk that holds it is full: free space there", errors.New("database or disk is full (13)"))

func (fullStore) Probe(context.Context) error { return errDiskFull }
func (fullStore) Accept(_ context.Context, r live.Registration) (live.Registration, error) {
	return r, errDiskFull
}

// TestStoreFull: when the store cannot write for a reason it names (a full
// disk), a check-in and /healthz answer 503 with that reason, so that the
// worker checks in again later and the operator reads what to fix, and the
// log keeps the store's own error.
func TestStoreFull(t *testing.T) {
	full := backend{name: "full", open: func(tb testing.TB, now func() time.Time) live.Store {
		return fullStore{openSQLite(tb, now)}
	}}
	f := newFixture(t, full, fixtureOptions{logs: true})
	for _, tc := range []struct {
		name   string
		send   func() (int, []byte)
		prefix string
	}{
		{"CheckIn", func() (int, []byte) { return f.checkIn(t, f.stream, validReport(t)) }, ""},
		{"Healthz", func() (int, []byte) { return f.do(t, req{method: "GET", path: "/healthz"}) }, "store not writable: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := tc.send()
			var e errorBody
			want := errorBody{Error: errorDetail{Code: "unavailable", Message: tc.prefix + live.ErrorMessage(errDiskFull)}}
			if err := json.Unmarshal(body, &e); err != nil || status != http.StatusServiceUnavailable || e != want {
				t.Fatalf("%d %s, want 503 %+v", status, body, want)
			}
			if line := f.nextLog(t); line["level"] != "ERROR" || !strings.Contains(line["err"].(string), "database or disk is full (13)") {
				t.Fatalf("log line %v, want the store's own error", line)
			}
		})
	}
}

// TestEveryRequestLogged: requests that no route matches get their line
// too, and no line holds a secret.
func TestEveryRequestLogged(t *testing.T) {
	f := newFixture(t, sqliteBackend, fixtureOptions{logs: true})
	for _, tc := range []struct {
		name   string
		r      req
		status int
		route  string
	}{
		{"NoSuchPath", req{method: "GET", path: "/nope"}, 404, "unmatched"},
		{"WrongMethod", req{method: "PUT", path: checkInPath(f.stream), headers: map[string]string{"Authorization": "Bearer " + f.secrets["service"]}}, 405, "unmatched"},
		{"Metrics", req{method: "GET", path: "/metrics"}, 200, "metrics"},
		{"Healthz", req{method: "GET", path: "/healthz"}, 200, "healthz"},
		{"OwnerPage", req{method: "GET", path: "/streams/agent/" + f.stream + "/worker", cookies: []string{f.secrets["session"]}}, 200, "owner_page"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, _ := f.do(t, tc.r)
			line := f.nextLog(t)
			if status != tc.status || line["route"] != tc.route || line["status"] != float64(tc.status) {
				t.Fatalf("status %d, log %v; want %d on route %s", status, line, tc.status, tc.route)
			}
		})
	}
}
