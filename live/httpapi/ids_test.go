package httpapi

import (
	"net/http"
	"strings"
	"testing"
)

// TestIDsNoStoreCanHold: an id with a NUL or invalid UTF-8, in the path or
// in X-OV-Subject, names nothing, on both stores alike: the check-in is
// answered 404 (no such stream) or 403 (no such person), the owner's routes
// 404, never a 500 (PostgreSQL refuses such text as SQLSTATE 22021).
func TestIDsNoStoreCanHold(t *testing.T) { eachBackend(t, testIDsNoStoreCanHold) }

func testIDsNoStoreCanHold(t *testing.T, b backend) {
	f := newFixture(t, b, fixtureOptions{logs: true})
	service := map[string]string{"Authorization": "Bearer " + f.secrets["service"], "Content-Type": "application/json"}
	person := map[string]string{"Authorization": "Bearer " + f.secrets["person"]}
	for _, tc := range []struct {
		name    string
		r       req
		status  int
		subject string
	}{
		{"CheckInNUL", req{method: "POST", path: checkInPath("a%00b"), headers: service}, 404, ""},
		{"CheckInInvalidUTF8", req{method: "POST", path: checkInPath("a%FFb"), headers: service}, 404, ""},
		{"CheckInSubjectInvalidUTF8", req{method: "POST", path: checkInPath(f.stream), headers: service}, 403, "per_\xff"},
		{"OwnerViewNUL", req{method: "GET", path: checkInPath("%00"), headers: person}, 404, ""},
		{"OwnerViewInvalidUTF8", req{method: "GET", path: checkInPath("%C3%28"), headers: person}, 404, ""},
		{"HistoryNUL", req{method: "GET", path: checkInPath("x%00") + "/history", headers: person}, 404, ""},
		{"PageInvalidUTF8", req{method: "GET", path: "/streams/agent/%FF/worker", headers: person}, 404, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.r
			r.subject = []string{f.owner}
			if tc.subject != "" {
				r.subject = []string{tc.subject}
			}
			if r.method == "POST" {
				r.body = strings.NewReader(isolationOnly)
			}
			status, body := f.do(t, r)
			line := f.nextLog(t)
			if status != tc.status || line["level"] != "INFO" {
				t.Fatalf("%d %s (log %v), want %d and no error", status, body, line, tc.status)
			}
		})
	}
}

// TestSomeoneElsesStream: to a signed-in person, someone else's stream
// answers exactly as one that does not exist (the JSON view, its history
// and the page); ?hours= is looked at only once the person may see the
// stream.
func TestSomeoneElsesStream(t *testing.T) {
	f := newFixture(t, sqliteBackend, fixtureOptions{})
	person := map[string]string{"Authorization": "Bearer " + f.secrets["person"]}
	const unknown = "str_nothere0000000"
	for _, path := range []string{checkInPath("%s"), checkInPath("%s") + "/history", "/streams/agent/%s/worker"} {
		theirs := strings.Replace(path, "%s", f.other2, 1)
		none := strings.Replace(path, "%s", unknown, 1)
		s1, b1 := f.do(t, req{method: "GET", path: theirs, headers: person})
		s2, b2 := f.do(t, req{method: "GET", path: none, headers: person})
		if s1 != http.StatusNotFound || s1 != s2 || strings.ReplaceAll(string(b1), f.other2, unknown) != string(b2) {
			t.Errorf("%s: someone else's stream %d %s\nan unknown one %d %s\nwant the same 404", path, s1, b1, s2, b2)
		}
	}
	for _, tc := range []struct {
		name   string
		r      req
		status int
	}{
		{"NoCredential", req{}, 401},
		{"OtherPerson", req{headers: map[string]string{"Authorization": "Bearer " + f.secrets["other_person"]}}, 404},
		{"Owner", req{headers: person}, 400},
	} {
		r := tc.r
		r.method, r.path = "GET", checkInPath(f.stream)+"/history?hours=0"
		if status, body := f.do(t, r); status != tc.status {
			t.Errorf("%s: hours=0: %d %s, want %d", tc.name, status, body, tc.status)
		}
	}
}
