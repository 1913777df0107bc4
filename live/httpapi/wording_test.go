package httpapi

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestPageWording: the page says what a person needs: which fact a refused
// report got wrong and what it must be, with the value it stated in the
// facts table (while the API's 422 keeps the contract's own words); what to
// check when the worker is stale or absent; a 401 that speaks to a person;
// degraded time drawn as such and not counted as uptime; "1 second".
func TestPageWording(t *testing.T) {
	f := newFixture(t, sqliteBackend, fixtureOptions{})
	t.Run("Refused", func(t *testing.T) {
		st := f.newStream(t, f.owner)
		status, resp := f.checkIn(t, st, edit(t, `"egress_proxy": true`, `"egress_proxy": false`))
		var verdict struct {
			Errors []struct{ Path, Message string } `json:"errors"`
		}
		if err := json.Unmarshal(resp, &verdict); status != 422 || err != nil || len(verdict.Errors) != 1 ||
			verdict.Errors[0].Path != "/isolation/egress_proxy" || verdict.Errors[0].Message != "must be equal to constant" {
			t.Fatalf("check in: %d %s; want 422 with the contract's own words", status, resp)
		}
		page, class := f.ownerPage(t, st)
		if class != "refused" || !strings.Contains(page, "<li>egress_proxy reported false, must be true</li>") {
			t.Errorf("the refused banner (%s) does not say which fact and what it must be", class)
		}
		if got := factCell(t, page, "egress_proxy"); got != "No — reports false" {
			t.Errorf("the facts table says %q of egress_proxy, want the refused report's value", got)
		}
		if got := factCell(t, page, "host_network"); got != "Yes" {
			t.Errorf("the facts table says %q of host_network, want Yes", got)
		}
	})
	t.Run("Absent", func(t *testing.T) {
		page, class := f.ownerPage(t, f.newStream(t, f.owner))
		if class != "absent" || !strings.Contains(page, "The worker has never checked in. Check that a worker is set to check in for this stream") {
			t.Errorf("the absent banner (%s) does not say what to check", class)
		}
	})
	t.Run("Stale", func(t *testing.T) {
		st := f.newStream(t, f.owner)
		if status, resp := f.checkIn(t, st, validReport(t)); status != 200 {
			t.Fatalf("check in: %d %s", status, resp)
		}
		f.clock.Advance(3 * time.Minute)
		defer f.clock.Advance(-3 * time.Minute)
		page, class := f.ownerPage(t, st)
		if class != "stale" || !strings.Contains(page, "The worker has not checked in for 3 minutes. Check that the worker (codes-sandbox serve) is running") {
			t.Errorf("the stale banner (%s) does not say what to check", class)
		}
	})
	t.Run("NotSignedIn", func(t *testing.T) {
		status, body := f.do(t, req{method: "GET", path: "/streams"})
		if status != 401 || !strings.Contains(string(body), "You are not signed in here") || strings.Contains(string(body), "Authorization") ||
			strings.Contains(string(body), "Bearer") {
			t.Errorf("401 page: %d\n%s\nwant words for a person", status, body)
		}
	})
	t.Run("OneSecond", func(t *testing.T) {
		st := f.newStream(t, f.owner)
		f.clock.Advance(time.Second)
		page, _ := f.ownerPage(t, st)
		if !strings.Contains(page, "the 1 second since the stream was created") || strings.Contains(page, "1 seconds") {
			t.Errorf("the page does not say 1 second")
		}
	})
}

// TestDegradedTimeline: time a stream was alive but degraded is recorded,
// drawn in the warning colour and not counted as uptime.
func TestDegradedTimeline(t *testing.T) {
	f := newFixture(t, sqliteBackend, fixtureOptions{})
	if status, resp := f.checkIn(t, f.stream, validReport(t)); status != 200 {
		t.Fatalf("check in: %d %s", status, resp)
	}
	f.clock.Advance(10 * time.Second)
	if status, resp := f.checkIn(t, f.stream, edit(t, `"ready": true`, `"ready": false`)); status != 200 {
		t.Fatalf("check in: %d %s", status, resp)
	}
	f.clock.Advance(30 * time.Second)
	status, body := f.do(t, req{method: "GET", path: checkInPath(f.stream) + "/history", headers: map[string]string{"Authorization": "Bearer " + f.secrets["person"]}})
	var h historyView
	if err := json.Unmarshal(body, &h); status != 200 || err != nil {
		t.Fatalf("history: %d %s", status, body)
	}
	if h.UptimePercent != 25 || h.DegradedPercent != 75 || len(h.Segments) != 2 || h.Segments[1].State != "degraded" {
		t.Fatalf("history %+v; want 25 %% uptime, 75 %% degraded", h)
	}
	page, _ := f.ownerPage(t, f.stream)
	if !strings.Contains(page, `<rect class="degraded"`) || !strings.Contains(page, "Alive 25.0 % of the 40 seconds since the stream was created, and alive but with a problem the worker reported 75.0 %") {
		t.Errorf("the timeline does not show the degraded time apart:\n%s", page)
	}
}
