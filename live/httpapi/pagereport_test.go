package httpapi

import (
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"regexp"
	"strings"
	"testing"
)

// ownerPage gets the owner's page of stream with the owner's session and
// returns its HTML with the entities decoded, and the banner's class.
func (f *fixture) ownerPage(tb testing.TB, stream string) (string, string) {
	tb.Helper()
	status, body := f.do(tb, req{method: "GET", path: "/streams/agent/" + stream + "/worker", cookies: []string{f.secrets["session"]}})
	if status != http.StatusOK {
		tb.Fatalf("owner's page: %d %s", status, body)
	}
	m := regexp.MustCompile(`<section class="banner ([a-z]+)"`).FindSubmatch(body)
	if m == nil {
		tb.Fatalf("the page has no banner:\n%s", body)
	}
	return html.UnescapeString(string(body)), string(m[1])
}

// ownerViewRaw gets the owner's JSON view of stream as a map.
func (f *fixture) ownerViewRaw(tb testing.TB, stream string) map[string]any {
	tb.Helper()
	status, body := f.do(tb, req{method: "GET", path: checkInPath(stream), headers: map[string]string{"Authorization": "Bearer " + f.secrets["person"]}})
	if status != http.StatusOK {
		tb.Fatalf("owner view: %d %s", status, body)
	}
	var v map[string]any
	if err := json.Unmarshal(body, &v); err != nil {
		tb.Fatal(err)
	}
	return v
}

// checkResults returns the view's checks by name.
func checkResults(v map[string]any) map[string]string {
	out := map[string]string{}
	for _, c := range v["checks"].([]any) {
		m := c.(map[string]any)
		out[m["name"].(string)] = m["result"].(string)
	}
	return out
}

func problemsOf(v map[string]any) []string {
	var out []string
	for _, p := range v["problems"].([]any) {
		out = append(out, p.(string))
	}
	return out
}

// factCell returns what the facts table says of fact.
func factCell(tb testing.TB, page, fact string) string {
	tb.Helper()
	m := regexp.MustCompile(`(?s)<td data-label="Fact"><code>` + fact + `</code></td>.*?<td data-label="Stated[^"]*">(.*?)</td>`).FindStringSubmatch(page)
	if m == nil {
		tb.Fatalf("the facts table has no row %s", fact)
	}
	return regexp.MustCompile(`<[^>]+>`).ReplaceAllString(m[1], "")
}

// TestPageReadsReportAsContract: the page and the owner's view read a
// stored report as the contract does, keys matched exactly: the two
// reports of issue 29 (a "CHECKS" beside checks without wipe; Host_Network
// and WORKSPACE beside the right facts) do not read as a green page.
func TestPageReadsReportAsContract(t *testing.T) {
	f := newFixture(t, sqliteBackend, fixtureOptions{})
	t.Run("CHECKS", func(t *testing.T) {
		st := f.newStream(t, f.owner)
		if status, body := f.checkIn(t, st, edit(t, `,
    "wipe": true`, ``, `"capacity": 2,`, `"capacity": 2, "CHECKS": {"wipe": true},`)); status != 200 {
			t.Fatalf("check in: %d %s", status, body)
		}
		v := f.ownerViewRaw(t, st)
		if checkResults(v)["wipe"] != "not_run" || v["degraded"] != true {
			t.Errorf("view: checks %v, degraded %v; want wipe not_run, degraded", checkResults(v), v["degraded"])
		}
		page, class := f.ownerPage(t, st)
		if class != "degraded" || !strings.Contains(page, "self-test check wipe did not run") || !strings.Contains(page, `a key "CHECKS" that differs from checks only in case`) {
			t.Errorf("page: banner %s; want degraded, saying wipe did not run and naming CHECKS", class)
		}
	})
	t.Run("Host_Network", func(t *testing.T) {
		st := f.newStream(t, f.owner)
		if status, body := f.checkIn(t, st, edit(t, `"host_network": false,`, `"Host_Network": true, "WORKSPACE": "persistent", "host_network": false,`)); status != 200 {
			t.Fatalf("check in: %d %s", status, body)
		}
		page, class := f.ownerPage(t, st)
		for _, fact := range []string{"host_network", "credentials", "profile", "egress_proxy", "workspace"} {
			if got := factCell(t, page, fact); got != "Yes" {
				t.Errorf("the facts table says %q of %s, want Yes", got, fact)
			}
		}
		if class != "degraded" || !strings.Contains(page, `a key "Host_Network" that differs from host_network only in case`) {
			t.Errorf("page banner %s; want degraded, naming Host_Network", class)
		}
	})
}

// TestPageNumbersAsContract: integers the contract accepts however they
// are written (2.0, 1e2, past 2^63) are read as integers; the page never
// shows Go's own words.
func TestPageNumbersAsContract(t *testing.T) {
	f := newFixture(t, sqliteBackend, fixtureOptions{})
	for _, tc := range []struct{ capacity, active, reads string }{
		{"2.0", "0", "0 active of capacity 2"},
		{"1e2", "2.0", "2 active of capacity 100"},
		{"18446744073709551616", "9223372036854775808", "9223372036854775808 active of capacity 18446744073709551616"},
	} {
		st := f.newStream(t, f.owner)
		if status, body := f.checkIn(t, st, edit(t, `"capacity": 2`, `"capacity": `+tc.capacity, `"active": 0`, `"active": `+tc.active)); status != 200 {
			t.Fatalf("check in: %d %s", status, body)
		}
		v := f.ownerViewRaw(t, st)
		page, class := f.ownerPage(t, st)
		if v["degraded"] != false || class != "alive" || !strings.Contains(page, tc.reads) {
			t.Errorf("capacity %s, active %s: degraded %v %v, banner %s; want alive, reading %q", tc.capacity, tc.active, v["degraded"], v["problems"], class, tc.reads)
		}
		for _, goWords := range []string{"Go struct", "unmarshal", "cannot be read", "json:"} {
			if strings.Contains(page, goWords) {
				t.Errorf("the page reads %q", goWords)
			}
		}
	}
}

// TestPageFlagsContradictions: a report whose own details contradict the
// isolation it claims, or that names a limit it does not enforce, is shown
// degraded (never green) with the problem in its words; the state stays
// alive, as the contract says.
func TestPageFlagsContradictions(t *testing.T) {
	f := newFixture(t, sqliteBackend, fixtureOptions{})
	for _, tc := range []struct {
		name  string
		edits []string
		reads string
	}{
		{"PublicOnlyFalse", []string{`"public_only": true`, `"public_only": false`}, "egress.public_only: false"},
		{"DirectAllowed", []string{`"direct": "none"`, `"direct": "allowed"`}, "egress.direct: allowed"},
		{"Capabilities", []string{`"capabilities": "none"`, `"capabilities": "CAP_SYS_ADMIN"`}, "capabilities: CAP_SYS_ADMIN"},
		{"SeccompFalse", []string{`"seccomp": true,
    "host_network"`, `"seccomp": false,
    "host_network"`}, "seccomp: false"},
		{"NetworkNamespaceFalse", []string{`"network_namespace": true,
    "egress"`, `"network_namespace": false,
    "egress"`}, "network_namespace: false"},
		{"ActiveOverCapacity", []string{`"active": 0`, `"active": 3`}, "3 active sandboxes, more than its capacity of 2"},
		{"UnchargedLimit", []string{`"enforced": true,`, `"enforced": true, "socket_memory": "uncharged (cgroup v1)",`}, "limit socket_memory is not enforced: uncharged (cgroup v1)"},
		{"UnenforcedList", []string{`"enforced": true,`, `"enforced": true, "unenforced": ["io_bandwidth"],`}, "limits it does not enforce: io_bandwidth"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := f.newStream(t, f.owner)
			if status, body := f.checkIn(t, st, edit(t, tc.edits...)); status != 200 {
				t.Fatalf("check in: %d %s", status, body)
			}
			v := f.ownerViewRaw(t, st)
			page, class := f.ownerPage(t, st)
			if v["state"] != "alive" || v["degraded"] != true || !strings.Contains(strings.Join(problemsOf(v), "\n"), tc.reads) {
				t.Errorf("view: %v degraded %v problems %q; want alive, degraded, reading %q", v["state"], v["degraded"], problemsOf(v), tc.reads)
			}
			if class != "degraded" || !strings.Contains(page, tc.reads) {
				t.Errorf("page banner %s; want degraded, reading %q", class, tc.reads)
			}
		})
	}
}

// TestPageCleansReports: what a worker wrote is shown safely: anything that
// looks like a secret redacted, text that reorders itself (U+202E) and
// control characters neutralised, in accepted reports and refusals alike.
func TestPageCleansReports(t *testing.T) {
	f := newFixture(t, sqliteBackend, fixtureOptions{})
	st := f.newStream(t, f.owner)
	body := edit(t, `"version": "0.7.0"`, `"version": "0.7.0 ovs_leakedsecret1"`,
		`"ready": true`, `"ready": false, "reasons": ["cgroup\u202etxt.exe", "line\nbreak ovp_token99"]`,
		`"sandbox": "bubblewrap"`, `"sandbox": "bubblewrap\u2066x\u0007"`)
	if status, resp := f.checkIn(t, st, body); status != 200 {
		t.Fatalf("check in: %d %s", status, resp)
	}
	page, _ := f.ownerPage(t, st)
	for _, want := range []string{"0.7.0 [redacted]", "cgroup[U+202E]txt.exe", "line break [redacted]", "bubblewrap[U+2066]x"} {
		if !strings.Contains(page, want) {
			t.Errorf("the page does not read %q", want)
		}
	}
	for _, bad := range []string{"ovs_leakedsecret1", "ovp_token99", "\u202e", "\u2066", "\u0007"} {
		if strings.Contains(page, bad) {
			t.Errorf("the page holds %q", bad)
		}
	}
	refused := f.newStream(t, f.owner)
	if status, resp := f.checkIn(t, refused, []byte(`{"checks":{"a\u202eb":1},"reasons":["x\u202ey"],"isolation":{}}`)); status != 422 {
		t.Fatalf("check in: %d %s", status, resp)
	}
	page, _ = f.ownerPage(t, refused)
	if !strings.Contains(page, "/checks/a[U+202E]b") || !strings.Contains(page, "x[U+202E]y") || strings.Contains(page, "\u202e") {
		t.Errorf("the refusal is not cleaned:\n%s", page)
	}
}

// TestRefusalErrorsBounded: a refusal keeps at most 20 errors and says how
// many more there were (6,000 made a 552 KB page); the 422 answer still
// gives the contract's whole verdict.
func TestRefusalErrorsBounded(t *testing.T) {
	f := newFixture(t, sqliteBackend, fixtureOptions{})
	var b strings.Builder
	b.WriteString(`{"isolation":{"host_network":false,"credentials":false,"profile":false,"egress_proxy":true,"workspace":"ephemeral"},"checks":{`)
	const n = 6000
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"c%d":1`, i)
	}
	b.WriteString(`}}`)
	status, resp := f.checkIn(t, f.stream, []byte(b.String()))
	var verdict struct {
		Errors []struct{ Path, Message string } `json:"errors"`
	}
	if err := json.Unmarshal(resp, &verdict); status != 422 || err != nil || len(verdict.Errors) != n {
		t.Fatalf("check in: %d with %d errors (%v), want 422 with %d", status, len(verdict.Errors), err, n)
	}
	v := f.ownerViewRaw(t, f.stream)
	ref := v["refusal"].(map[string]any)
	if len(ref["errors"].([]any)) != 20 || ref["errors_total"] != float64(n) {
		t.Errorf("the view's refusal has %d errors of %v, want 20 of %d", len(ref["errors"].([]any)), ref["errors_total"], n)
	}
	page, _ := f.ownerPage(t, f.stream)
	if len(page) > 40<<10 || !strings.Contains(page, "and 5980 more errors") {
		t.Errorf("the page is %d bytes (want at most 40 KiB) and says %v of the errors it leaves out", len(page), strings.Contains(page, "and 5980 more errors"))
	}
}
