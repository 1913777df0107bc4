package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"openvibe.network/agentsandbox/live"
)

// row is one request of the check-in answer table and what it must get.
type row struct {
	name    string
	auth    string   // Authorization header ("" none); "<name>" is replaced by that secret
	cookies []string // ov_session cookies, same replacement
	subject []string // nil: the owner; []string{}: none
	stream  string   // "" the fixture's stream
	ctype   string   // "-" none; "" application/json
	body    func(testing.TB) io.Reader
	status  int
	code    string // error.code ("" for 200)
	reason  string // the log line's reason
}

func bodyOf(s string) func(testing.TB) io.Reader {
	return func(testing.TB) io.Reader { return strings.NewReader(s) }
}

// oversized is a 64 KiB + 1 body of an otherwise valid report.
func oversized(tb testing.TB) io.Reader {
	return bytes.NewReader(padTo(tb, isolationOnly, MaxBody+1))
}

// oversizedChunked is the same without a Content-Length (sent chunked).
func oversizedChunked(tb testing.TB) io.Reader {
	return io.MultiReader(oversized(tb))
}

// checkInTable is the design's answer table, each row and the order of the
// checks between rows.
var checkInTable = []row{
	// Row 1: no credential, or an unknown, revoked or expired one: 401.
	{name: "NoCredential", auth: "-", status: 401, code: "unauthorized", reason: "no_credential"},
	{name: "BasicScheme", auth: "Basic dXNlcjpwYXNz", status: 401, code: "unauthorized", reason: "bad_authorization"},
	{name: "BearerWithoutSecret", auth: "Bearer ", status: 401, code: "unauthorized", reason: "bad_authorization"},
	{name: "UnknownToken", auth: "Bearer ovs_notAtokenThatExists", status: 401, code: "unauthorized", reason: "unknown_credential"},
	{name: "RevokedToken", auth: "Bearer <service_revoked>", status: 401, code: "unauthorized", reason: "revoked_credential"},
	{name: "ExpiredToken", auth: "Bearer <service_expired>", status: 401, code: "unauthorized", reason: "expired_credential"},
	{name: "UnknownSessionOnly", auth: "-", cookies: []string{"ovsess_unknown"}, status: 401, code: "unauthorized", reason: "unknown_credential"},
	{name: "RevokedBeforeSessionCookie", auth: "Bearer <service_revoked>", cookies: []string{"<session>"}, status: 401, code: "unauthorized", reason: "revoked_credential"},
	// Row 2: a person token, a desk ticket, or any ov_session cookie: 403.
	{name: "PersonToken", auth: "Bearer <person>", status: 403, code: "forbidden", reason: "person_token"},
	{name: "DeskTicket", auth: "Bearer <desk>", status: 403, code: "forbidden", reason: "desk_ticket"},
	{name: "OwnerSessionOnly", auth: "-", cookies: []string{"<session>"}, status: 403, code: "forbidden", reason: "session_cookie"},
	{name: "ServiceTokenBesideOwnerSession", cookies: []string{"<session>"}, status: 403, code: "forbidden", reason: "session_cookie"},
	{name: "ServiceTokenBesideUnknownSession", cookies: []string{"whatever"}, status: 403, code: "forbidden", reason: "session_cookie"},
	{name: "SessionAsBearer", auth: "Bearer <session>", status: 403, code: "forbidden", reason: "not_service_token"},
	// Row 3: not first-party, or lacking live.agent_sandbox.register: 403.
	{name: "ThirdPartyService", auth: "Bearer <third_party>", status: 403, code: "forbidden", reason: "not_first_party"},
	{name: "LacksCapability", auth: "Bearer <no_capability>", status: 403, code: "forbidden", reason: "lacks_capability"},
	// Row 4: X-OV-Subject missing or empty: 400.
	{name: "MissingSubject", subject: []string{}, status: 400, code: "invalid", reason: "missing_subject"},
	{name: "EmptySubject", subject: []string{""}, status: 400, code: "invalid", reason: "missing_subject"},
	{name: "BlankSubject", subject: []string{"   "}, status: 400, code: "invalid", reason: "missing_subject"},
	{name: "TwoSubjects", subject: []string{"<owner>", "<owner>"}, status: 400, code: "invalid", reason: "several_subjects"},
	// Row 5: no agent stream with that id: 404.
	{name: "UnknownStream", stream: "str_nothere", status: 404, code: "not_found", reason: "no_stream"},
	// Row 6: the subject is not a known person who owns the stream: 403.
	{name: "UnknownSubject", subject: []string{"per_nobody"}, status: 403, code: "forbidden", reason: "unknown_subject"},
	{name: "SubjectIsASecret", subject: []string{"<service>"}, status: 403, code: "forbidden", reason: "unknown_subject"},
	{name: "SubjectNotOwner", subject: []string{"<other>"}, status: 403, code: "forbidden", reason: "subject_not_owner"},
	{name: "OwnerOfAnotherStream", subject: []string{"<owner>"}, stream: "<other2>", status: 403, code: "forbidden", reason: "subject_not_owner"},
	// Row 7: body over 64 KiB: 413.
	{name: "BodyOver64KiB", body: oversized, status: 413, code: "too_large", reason: "subject_owns_stream"},
	{name: "BodyOver64KiBChunked", body: oversizedChunked, status: 413, code: "too_large", reason: "subject_owns_stream"},
	{name: "BodyExactly64KiB", body: func(tb testing.TB) io.Reader { return bytes.NewReader(padTo(tb, isolationOnly, MaxBody)) }, status: 200, reason: "subject_owns_stream"},
	// Row 8: Content-Type not application/json: 415.
	{name: "NoContentType", ctype: "-", status: 415, code: "unsupported_media_type", reason: "subject_owns_stream"},
	{name: "TextPlain", ctype: "text/plain", status: 415, code: "unsupported_media_type", reason: "subject_owns_stream"},
	{name: "JSONSuffixType", ctype: "application/vnd.api+json", status: 415, code: "unsupported_media_type", reason: "subject_owns_stream"},
	{name: "Latin1Charset", ctype: "application/json; charset=latin1", status: 415, code: "unsupported_media_type", reason: "subject_owns_stream"},
	{name: "UnparsableContentType", ctype: "application/json; =", status: 415, code: "unsupported_media_type", reason: "subject_owns_stream"},
	{name: "UTF8Charset", ctype: "application/json; charset=UTF-8", status: 200, reason: "subject_owns_stream"},
	{name: "UpperCaseType", ctype: "Application/JSON", status: 200, reason: "subject_owns_stream"},
	// Row 9: not well-formed JSON, trailing data, duplicate keys, invalid UTF-8: 400.
	{name: "EmptyBody", body: bodyOf(""), status: 400, code: "malformed_json", reason: "subject_owns_stream"},
	{name: "MalformedJSON", body: bodyOf(`{"isolation":`), status: 400, code: "malformed_json", reason: "subject_owns_stream"},
	{name: "TrailingData", body: bodyOf(isolationOnly + ` {}`), status: 400, code: "malformed_json", reason: "subject_owns_stream"},
	{name: "DuplicateKeys", body: bodyOf(`{"isolation":{},"isolation":` + isolationOnly[13:]), status: 400, code: "malformed_json", reason: "subject_owns_stream"},
	{name: "InvalidUTF8", body: bodyOf(`{"worker_id":"` + "\xff\xfe" + `",` + isolationOnly[1:]), status: 400, code: "malformed_json", reason: "subject_owns_stream"},
	// Row 10: contract violation: 422.
	{name: "NoProfileFact", body: bodyOf(noProfile), status: 422, code: "contract_violation", reason: "subject_owns_stream"},
	{name: "HostNetworkTrue", body: bodyOf(strings.Replace(isolationOnly, `"host_network":false`, `"host_network":true`, 1)), status: 422, code: "contract_violation", reason: "subject_owns_stream"},
	{name: "NotAnObject", body: bodyOf(`[]`), status: 422, code: "contract_violation", reason: "subject_owns_stream"},
	// Row 11: accepted.
	{name: "Accepted", status: 200, reason: "subject_owns_stream"},
	{name: "AcceptedMinimal", body: bodyOf(isolationOnly), status: 200, reason: "subject_owns_stream"},
	// The order: the first failing row answers.
	{name: "OrderNoCredentialBeforeEverything", auth: "-", subject: []string{}, stream: "str_nothere", ctype: "text/plain", body: oversized, status: 401, code: "unauthorized", reason: "no_credential"},
	{name: "OrderPersonTokenBeforeSize", auth: "Bearer <person>", body: oversized, status: 403, code: "forbidden", reason: "person_token"},
	{name: "OrderSessionBeforeSubject", cookies: []string{"<session>"}, subject: []string{}, status: 403, code: "forbidden", reason: "session_cookie"},
	{name: "OrderThirdPartyBeforeSubject", auth: "Bearer <third_party>", subject: []string{}, status: 403, code: "forbidden", reason: "not_first_party"},
	{name: "OrderSubjectBeforeStream", subject: []string{}, stream: "str_nothere", status: 400, code: "invalid", reason: "missing_subject"},
	{name: "OrderSubjectBeforeContentType", subject: []string{}, ctype: "text/plain", status: 400, code: "invalid", reason: "missing_subject"},
	{name: "OrderStreamBeforeOwnership", subject: []string{"per_nobody"}, stream: "str_nothere", status: 404, code: "not_found", reason: "no_stream"},
	{name: "OrderStreamBeforeSize", stream: "str_nothere", body: oversized, status: 404, code: "not_found", reason: "no_stream"},
	{name: "OrderOwnershipBeforeSize", subject: []string{"<other>"}, body: oversized, status: 403, code: "forbidden", reason: "subject_not_owner"},
	{name: "OrderSizeBeforeContentType", ctype: "text/plain", body: oversized, status: 413, code: "too_large", reason: "subject_owns_stream"},
	{name: "OrderContentTypeBeforeJSON", ctype: "text/plain", body: bodyOf("not json"), status: 415, code: "unsupported_media_type", reason: "subject_owns_stream"},
	{name: "OrderJSONBeforeContract", body: bodyOf(noProfile + "x"), status: 400, code: "malformed_json", reason: "subject_owns_stream"},
}

// TestCheckInTable sends every row of the answer table to a real server
// over the real SQLite store and checks status, error code, the logged
// reason, and that no secret appears in any body or log line.
func TestCheckInTable(t *testing.T) { eachBackend(t, testCheckInTable) }

func testCheckInTable(t *testing.T, b backend) {
	f := newFixture(t, b, fixtureOptions{logs: true})
	outcomes := map[string]int{}
	for _, tc := range checkInTable {
		t.Run(tc.name, func(t *testing.T) {
			status, body := f.do(t, f.rowRequest(t, tc))
			line := f.nextLog(t)
			t.Logf("%d %s", status, body)
			if status != tc.status {
				t.Fatalf("status %d, want %d; body %s", status, tc.status, body)
			}
			if got := line["reason"]; got != tc.reason {
				t.Errorf("logged reason %q, want %q", got, tc.reason)
			}
			if got := line["status"]; got != float64(tc.status) {
				t.Errorf("logged status %v, want %d", got, tc.status)
			}
			if line["route"] != routeCheckIn || line["stream"] == "" || line["duration_ms"] == nil {
				t.Errorf("log line lacks route, stream or duration: %v", line)
			}
			if tc.status == http.StatusOK && line["principal"] != f.services["worker"] {
				t.Errorf("logged principal %v, want the worker's service %s", line["principal"], f.services["worker"])
			}
			outcomes[line["outcome"].(string)]++
			checkAnswer(t, tc, body)
		})
	}
	t.Run("Metrics", func(t *testing.T) {
		_, body := f.do(t, req{method: "GET", path: "/metrics"})
		for outcome, n := range outcomes {
			want := fmt.Sprintf("ovlive_checkins_total{outcome=%q} %d\n", outcome, n)
			if !strings.Contains(string(body), want) {
				t.Errorf("metrics lack %q", want)
			}
		}
		if !strings.Contains(string(body), `ovlive_http_request_duration_seconds_count{route="checkin"} `+strconv.Itoa(len(checkInTable))) {
			t.Errorf("latency histogram does not count %d check-ins", len(checkInTable))
		}
	})
}

// rowRequest builds tc's request; every part not named by tc is right.
func (f *fixture) rowRequest(tb testing.TB, tc row) req {
	sub := func(s string) string {
		return regexp.MustCompile(`<[a-z_0-9]+>`).ReplaceAllStringFunc(s, func(m string) string {
			switch name := m[1 : len(m)-1]; name {
			case "owner":
				return f.owner
			case "other":
				return f.other
			case "other2":
				return f.other2
			default:
				if s, ok := f.secrets[name]; ok {
					return s
				}
				tb.Fatalf("no secret %s", name)
				return ""
			}
		})
	}
	r := req{method: "POST", path: checkInPath(f.stream), headers: map[string]string{}}
	switch tc.auth {
	case "":
		r.headers["Authorization"] = "Bearer " + f.secrets["service"]
	case "-":
	default:
		r.headers["Authorization"] = sub(tc.auth)
	}
	for _, c := range tc.cookies {
		r.cookies = append(r.cookies, sub(c))
	}
	r.subject = []string{f.owner}
	if tc.subject != nil {
		r.subject = nil
		for _, s := range tc.subject {
			r.subject = append(r.subject, sub(s))
		}
	}
	if tc.stream != "" {
		r.path = checkInPath(sub(tc.stream))
	}
	switch tc.ctype {
	case "":
		r.headers["Content-Type"] = "application/json"
	case "-":
	default:
		r.headers["Content-Type"] = tc.ctype
	}
	r.body = bytes.NewReader(validReport(tb))
	if tc.body != nil {
		r.body = tc.body(tb)
	}
	return r
}

// checkAnswer checks the body's shape: 200 registered and alive, a refusal
// {"error":{code,message}} (422 with valid:false and errors).
func checkAnswer(tb testing.TB, tc row, body []byte) {
	tb.Helper()
	var got struct {
		Registered bool   `json:"registered"`
		State      string `json:"state"`
		AliveUntil string `json:"alive_until"`
		ReceivedAt string `json:"received_at"`
		Error      *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
		Valid  *bool             `json:"valid"`
		Errors []json.RawMessage `json:"errors"`
	}
	if err := json.Unmarshal(body, &got); err != nil {
		tb.Fatalf("body is not JSON: %v: %s", err, body)
	}
	if tc.status == http.StatusOK {
		if !got.Registered || got.State != string(live.StateAlive) || got.AliveUntil == "" || got.ReceivedAt == "" || got.Error != nil {
			tb.Fatalf("accepted body %s", body)
		}
		return
	}
	if got.Error == nil || got.Error.Code != tc.code || len(got.Error.Message) < 20 {
		tb.Fatalf("refusal body %s, want code %q and a message", body, tc.code)
	}
	if tc.status == http.StatusUnprocessableEntity && (got.Valid == nil || *got.Valid || len(got.Errors) == 0) {
		tb.Fatalf("422 body %s, want valid:false and errors", body)
	}
}
