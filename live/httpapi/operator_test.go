package httpapi

import (
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"openvibe.network/agentsandbox/internal/buildinfo"
	"openvibe.network/agentsandbox/live"
)

// TestEveryAnswerIsJSON: unknown routes and wrong methods answer the API's
// {"error":{…}} JSON, with Allow for a 405.
func TestEveryAnswerIsJSON(t *testing.T) {
	f := newFixture(t, sqliteBackend, fixtureOptions{})
	for _, tc := range []struct {
		name, method, path string
		status             int
		code, allow        string
	}{
		{"UnknownPath", "GET", "/nope", 404, live.ENOTFOUND, ""},
		{"Root", "GET", "/", 404, live.ENOTFOUND, ""},
		{"RootPost", "POST", "/", 405, EMETHOD, "GET, HEAD"},
		{"NotCanonical", "GET", "/api/streams/agent/x/../x/plays/worker", 307, EMOVED, ""},
		{"DoubleSlash", "POST", "/api//streams/agent/x/plays/worker?a=1", 307, EMOVED, ""},
		{"UnknownAPIPath", "GET", "/api/streams/agent/x/plays/other", 404, live.ENOTFOUND, ""},
		{"CheckInDelete", "DELETE", checkInPath(f.stream), 405, EMETHOD, "POST, GET, HEAD"},
		{"CheckInPut", "PUT", checkInPath(f.stream), 405, EMETHOD, "POST, GET, HEAD"},
		{"HistoryPost", "POST", checkInPath(f.stream) + "/history", 405, EMETHOD, "GET, HEAD"},
		{"HealthzPost", "POST", "/healthz", 405, EMETHOD, "GET, HEAD"},
		{"MetricsDelete", "DELETE", "/metrics", 405, EMETHOD, "GET, HEAD"},
		{"PagePost", "POST", "/streams/agent/" + f.stream + "/worker", 405, EMETHOD, "GET, HEAD"},
		{"LogoutPut", "PUT", "/logout", 405, EMETHOD, "GET, HEAD, POST"},
		{"LoginPut", "PUT", "/login", 405, EMETHOD, "GET, HEAD, POST"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := http.NewRequest(tc.method, f.srv.URL+tc.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := noRedirect(f.srv.Client()).Do(r)
			if err != nil {
				t.Fatal(err)
			}
			body := readAll(t, resp)
			resp.Body.Close()
			var e errorBody
			if resp.StatusCode != tc.status || resp.Header.Get("Content-Type") != "application/json" || json.Unmarshal([]byte(body), &e) != nil ||
				e.Error.Code != tc.code || e.Error.Message == "" || resp.Header.Get("Allow") != tc.allow {
				t.Fatalf("%d %s (Allow %q): %s; want %d %s (Allow %q)", resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get("Allow"), body, tc.status, tc.code, tc.allow)
			}
		})
	}
}

// Test401SaysNothingOfThePast: an unknown, a revoked and an expired
// credential get the same answer, on every route.
func Test401SaysNothingOfThePast(t *testing.T) {
	f := newFixture(t, sqliteBackend, fixtureOptions{})
	for _, path := range []string{checkInPath(f.stream), "/streams/agent/" + f.stream + "/worker"} {
		var answers []string
		for _, secret := range []string{"ovs_never_issued", f.secrets["service_revoked"], f.secrets["service_expired"]} {
			method := "GET"
			if strings.HasPrefix(path, "/api/") {
				method = "POST"
			}
			status, body := f.do(t, req{method: method, path: path, subject: []string{f.owner},
				headers: map[string]string{"Authorization": "Bearer " + secret, "Content-Type": "application/json"}, body: strings.NewReader(isolationOnly)})
			if status != 401 {
				t.Fatalf("%s: %d %s, want 401", path, status, body)
			}
			answers = append(answers, string(body))
		}
		if answers[0] != answers[1] || answers[1] != answers[2] {
			t.Fatalf("%s: the 401s differ:\n%s\n%s\n%s", path, answers[0], answers[1], answers[2])
		}
	}
}

// TestMetrics: streams by state, refusals by path, store latency and the
// build's info.
func TestMetrics(t *testing.T) {
	f := newFixture(t, sqliteBackend, fixtureOptions{})
	srv, err := New(Config{Store: f.store, Now: f.clock.Now, Build: buildinfo.Info{Version: "1.2.3", Revision: "abc", GoVersion: "go1.26.8"}})
	if err != nil {
		t.Fatal(err)
	}
	f.handler = srv.Handler()
	f.srv.Config.Handler = f.handler
	stale, refused := f.newStream(t, f.owner), f.newStream(t, f.owner)
	if status, _ := f.checkIn(t, stale, validReport(t)); status != 200 {
		t.Fatal(status)
	}
	f.clock.Advance(2 * time.Minute)
	if status, _ := f.checkIn(t, f.stream, validReport(t)); status != 200 {
		t.Fatal(status)
	}
	for _, body := range []string{noProfile, `{"reasons":[1],"checks":{"x":"y"},"isolation":{}}`} {
		if status, _ := f.checkIn(t, refused, []byte(body)); status != 422 {
			t.Fatal(status)
		}
	}
	_, body := f.do(t, req{method: "GET", path: "/metrics"})
	for _, want := range []string{
		`ovlive_streams{state="alive"} 1`, `ovlive_streams{state="stale"} 1`, `ovlive_streams{state="refused"} 1`, `ovlive_streams{state="absent"} 1`,
		`ovlive_contract_refusals_total{path="/isolation"} 6`, `ovlive_contract_refusals_total{path="/reasons/*"} 1`, `ovlive_contract_refusals_total{path="/checks/*"} 1`,
		`ovlive_checkins_total{outcome="accepted"} 2`, `ovlive_checkins_total{outcome="refused_contract"} 2`,
		`ovlive_store_duration_seconds_count{op="accept"} 2`, `ovlive_store_duration_seconds_count{op="lookup_check_in"} 3`,
		`ovlive_build_info{goversion="go1.26.8",revision="abc",version="1.2.3"} 1`,
	} {
		if !strings.Contains(string(body), want+"\n") {
			t.Errorf("metrics lack %s", want)
		}
	}
}

func TestRefusalPath(t *testing.T) {
	for in, want := range map[string]string{
		"": "", "/isolation": "/isolation", "/isolation/profile": "/isolation/profile", "/capacity": "/capacity",
		"/reasons/3": "/reasons/*", "/checks/anything": "/checks/*", "/reasons/x": "other", "/checks/a/b": "other",
		"/isolation/other": "other", "/nope": "other",
	} {
		if got := refusalPath(in); got != want {
			t.Errorf("refusalPath(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestRefusalKeepsReasons: a refused report's own reasons are kept with
// the refusal (cleaned), and nothing of it becomes a registration.
func TestRefusalKeepsReasons(t *testing.T) { eachBackend(t, testRefusalKeepsReasons) }

func testRefusalKeepsReasons(t *testing.T, b backend) {
	f := newFixture(t, b, fixtureOptions{})
	body := `{"ready":false,"reasons":["the probe sandbox has no egress proxy","read bubblewrap info: EOF\n","token ovs_leak"],` +
		`"isolation":{"host_network":false,"credentials":false,"profile":false,"workspace":"ephemeral"}}`
	if status, resp := f.checkIn(t, f.stream, []byte(body)); status != 422 {
		t.Fatalf("check in: %d %s", status, resp)
	}
	v := f.ownerView(t, f.stream)
	if v.State != "refused" || v.hasReport() || v.Refusal == nil {
		t.Fatalf("view %+v", v)
	}
	var raw struct {
		Refusal struct {
			Reasons     []string `json:"reasons"`
			ServiceName string   `json:"service_name"`
			SubjectName string   `json:"subject_name"`
		} `json:"refusal"`
	}
	_, resp := f.do(t, req{method: "GET", path: checkInPath(f.stream), headers: map[string]string{"Authorization": "Bearer " + f.secrets["person"]}})
	if err := json.Unmarshal(resp, &raw); err != nil {
		t.Fatal(err)
	}
	want := []string{"the probe sandbox has no egress proxy", "read bubblewrap info: EOF", "token [redacted]"}
	if !reflect.DeepEqual(raw.Refusal.Reasons, want) || raw.Refusal.ServiceName != "worker" || raw.Refusal.SubjectName != "Owner" {
		t.Fatalf("refusal %+v, want reasons %q by worker for Owner", raw.Refusal, want)
	}
}

// TestOwnerViewDegraded: the JSON view says what the report shows wrong,
// while the state stays alive.
func TestOwnerViewDegraded(t *testing.T) {
	f := newFixture(t, sqliteBackend, fixtureOptions{})
	if status, resp := f.checkIn(t, f.stream, edit(t, `"ready": true`, `"ready": false`, `"seccomp": true,`, ``)); status != 200 {
		t.Fatalf("check in: %d %s", status, resp)
	}
	_, resp := f.do(t, req{method: "GET", path: checkInPath(f.stream), headers: map[string]string{"Authorization": "Bearer " + f.secrets["person"]}})
	var v struct {
		State    string       `json:"state"`
		Degraded bool         `json:"degraded"`
		Problems []string     `json:"problems"`
		Checks   []live.Check `json:"checks"`
		Service  party        `json:"service"`
		Subject  party        `json:"subject"`
	}
	if err := json.Unmarshal(resp, &v); err != nil {
		t.Fatal(err)
	}
	if v.State != "alive" || !v.Degraded || !reflect.DeepEqual(v.Problems, []string{"the worker says it is not ready", "self-test check seccomp did not run"}) ||
		v.Service != (party{f.services["worker"], "worker"}) || v.Subject != (party{f.owner, "Owner"}) {
		t.Fatalf("view %+v", v)
	}
	if c := v.Checks[6]; c != (live.Check{Name: "seccomp", Result: live.CheckNotRun}) {
		t.Fatalf("checks %+v: seccomp is not reported as not run", v.Checks)
	}
}

// TestHistoryJSON: the history route's segments, uptime and bounds.
func TestHistoryJSON(t *testing.T) {
	f := newFixture(t, sqliteBackend, fixtureOptions{})
	path := checkInPath(f.stream) + "/history"
	get := func(q string) (int, historyView, []byte) {
		status, body := f.do(t, req{method: "GET", path: path + q, headers: map[string]string{"Authorization": "Bearer " + f.secrets["person"]}})
		var h historyView
		if status == 200 {
			if err := json.Unmarshal(body, &h); err != nil {
				t.Fatal(err)
			}
		}
		return status, h, body
	}
	f.clock.Advance(time.Hour) // the stream exists for an hour before its first check-in
	if status, _ := f.checkIn(t, f.stream, validReport(t)); status != 200 {
		t.Fatal(status)
	}
	f.clock.Advance(30 * time.Minute) // stale after a minute
	if status, _ := f.checkIn(t, f.stream, validReport(t)); status != 200 {
		t.Fatal(status)
	}
	f.clock.Advance(30 * time.Second)
	status, h, body := get("")
	if status != 200 {
		t.Fatalf("history: %d %s", status, body)
	}
	t1 := epoch.Add(time.Hour)
	t2 := t1.Add(30 * time.Minute)
	wantSegs := []live.Segment{
		{From: epoch, To: t1, State: live.StateAbsent},
		{From: t1, To: t1.Add(time.Minute), State: live.StateAlive},
		{From: t1.Add(time.Minute), To: t2, State: live.StateStale},
		{From: t2, To: t2.Add(30 * time.Second), State: live.StateAlive},
	}
	if !reflect.DeepEqual(h.Segments, wantSegs) || !h.To.Equal(f.clock.Now()) || !h.From.Equal(f.clock.Now().Add(-24*time.Hour)) {
		t.Fatalf("history %+v\nwant segments %+v", h, wantSegs)
	}
	if want := roundTo(100*(1.5/90.5), 2); h.UptimePercent != want {
		t.Fatalf("uptime %v, want %v", h.UptimePercent, want)
	}
	for _, tc := range []struct {
		q      string
		status int
	}{{"?hours=1", 200}, {"?hours=720", 200}, {"?hours=0", 400}, {"?hours=721", 400}, {"?hours=x", 400}} {
		if status, _, body := get(tc.q); status != tc.status {
			t.Errorf("%s: %d %s, want %d", tc.q, status, body, tc.status)
		}
	}
	for _, tc := range []struct {
		name   string
		r      req
		status int
	}{
		{"ErrNoCredential", req{}, 401},
		{"ErrOtherPerson", req{headers: map[string]string{"Authorization": "Bearer " + f.secrets["other_person"]}}, 404},
		{"ErrServiceToken", req{headers: map[string]string{"Authorization": "Bearer " + f.secrets["service"]}}, 403},
		{"ErrUnknownStream", req{path: checkInPath("str_nothere") + "/history", headers: map[string]string{"Authorization": "Bearer " + f.secrets["person"]}}, 404},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.r
			r.method = "GET"
			if r.path == "" {
				r.path = path
			}
			if status, body := f.do(t, r); status != tc.status {
				t.Fatalf("%d %s, want %d", status, body, tc.status)
			}
		})
	}
}

// TestRootInBrowser: a browser opening / goes on to the owner's streams;
// anything else is told as JSON that there is nothing there.
func TestRootInBrowser(t *testing.T) {
	f := newFixture(t, sqliteBackend, fixtureOptions{})
	r, _ := http.NewRequest("GET", f.srv.URL+"/", nil)
	r.Header.Set("Accept", "text/html,application/xhtml+xml,*/*;q=0.8")
	resp, err := noRedirect(f.srv.Client()).Do(r)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/streams" {
		t.Fatalf("GET / from a browser: %d to %q, want 303 to /streams", resp.StatusCode, resp.Header.Get("Location"))
	}
}
