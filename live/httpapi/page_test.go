package httpapi

import (
	"context"
	"flag"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"openvibe.network/agentsandbox"
	"openvibe.network/agentsandbox/internal/testenv"
	"openvibe.network/agentsandbox/live"
)

var screenshotDir = flag.String("screenshot-dir", "", "write screenshots of the owner's pages to this directory")

// browser starts headless Chromium with a fresh profile and returns a tab.
// It is pointed only at the test's loopback server.
func browser(t *testing.T) context.Context {
	t.Helper()
	path := testenv.RequireBinary(t, "chromium", "apt-get install -y chromium")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx,
		chromedp.ExecPath(path),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1100, 1600),
	)
	t.Cleanup(cancelAlloc)
	tab, cancelTab := chromedp.NewContext(alloc)
	t.Cleanup(cancelTab)
	if err := chromedp.Do(tab); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return tab
}

// pageText loads url and returns what a person reads on it.
func pageText(t *testing.T, tab context.Context, url string) string {
	t.Helper()
	if err := chromedp.Do(tab, chromedp.Navigate(url)); err != nil {
		t.Fatalf("navigate: %v", err)
	}
	return bodyText(t, tab)
}

// bodyText returns what a person reads on the tab's page.
func bodyText(t *testing.T, tab context.Context) string {
	t.Helper()
	text, err := chromedp.Run(tab, chromedp.Text(chromedp.CSS("body")))
	if err != nil {
		t.Fatalf("read page: %v", err)
	}
	return text
}

// eval runs a JavaScript expression on the tab's page.
func eval[T any](t *testing.T, tab context.Context, js string) T {
	t.Helper()
	v, err := chromedp.Run(tab, chromedp.Evaluate[T](js))
	if err != nil {
		t.Fatalf("evaluate %s: %v", js, err)
	}
	return v
}

// screenshot writes the tab's page to name in -screenshot-dir, if set.
func screenshot(t *testing.T, tab context.Context, name string) {
	t.Helper()
	if *screenshotDir == "" {
		return
	}
	png, err := chromedp.Run(tab, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if err := os.WriteFile(filepath.Join(*screenshotDir, name), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// mustRead fails t unless text contains each of want.
func mustRead(t *testing.T, text string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(text, w) {
			t.Errorf("the page does not read %q; it reads:\n%s", w, text)
		}
	}
}

// mustNotRead fails t if text contains any of unwanted.
func mustNotRead(t *testing.T, text string, unwanted ...string) {
	t.Helper()
	for _, w := range unwanted {
		if strings.Contains(text, w) {
			t.Errorf("the page reads %q; it must not:\n%s", w, text)
		}
	}
}

// edit returns the seed's report with each old replaced by new.
func edit(tb testing.TB, pairs ...string) []byte {
	tb.Helper()
	s := string(validReport(tb))
	for i := 0; i+1 < len(pairs); i += 2 {
		if !strings.Contains(s, pairs[i]) {
			tb.Fatalf("the seed report has no %q", pairs[i])
		}
		s = strings.Replace(s, pairs[i], pairs[i+1], 1)
	}
	return []byte(s)
}

// TestOwnerPageStatesInChromium loads the owner's page of one stream in
// each state in real headless Chromium, signed in with the owner's session
// cookie, and checks what a person reads and the banner's colour class.
func TestOwnerPageStatesInChromium(t *testing.T) {
	f := newFixture(t, sqliteBackend, fixtureOptions{})
	tab := browser(t)
	if _, err := chromedp.Call(tab, network.SetCookie, network.SetCookieParams{Name: SessionCookie, Value: f.secrets["session"], URL: f.srv.URL}); err != nil {
		t.Fatalf("set cookie: %v", err)
	}
	streams := map[string]string{}
	for _, name := range []string{"alive", "degraded", "stale", "refused", "absent"} {
		streams[name] = f.newStream(t, f.owner)
	}
	checkIn := func(stream string, body []byte, want int) {
		t.Helper()
		if status, resp := f.checkIn(t, stream, body); status != want {
			t.Fatalf("check in %s: %d %s", stream, status, resp)
		}
	}
	checkIn(streams["alive"], []byte(strings.Replace(string(validReport(t)), `"sbw-ovhost"`, `"<script>alert(1)</script>"`, 1)), http.StatusOK)
	checkIn(streams["degraded"], edit(t, `"ready": true`, `"ready": false, "reasons": ["slot 1 is out of use: its wipe could not be verified", "cgroup <b>limits</b> not enforced"]`,
		`"limits": true,`, `"limits": false,`, `,
    "wipe": true`, ``, `"enforced": true`, `"enforced": false`), http.StatusOK)
	checkIn(streams["stale"], validReport(t), http.StatusOK)
	checkIn(streams["refused"], edit(t, `"workspace": "ephemeral",`, ``, `"ready": true`, `"ready": false, "reasons": ["slot 1 is out of use: its wipe could not be verified", "read bubblewrap info: EOF"]`),
		http.StatusUnprocessableEntity)
	page := func(name string) string { return f.srv.URL + "/streams/agent/" + streams[name] + "/worker" }
	bannerClass := func() string { return eval[string](t, tab, `document.getElementById('state').className`) }
	bannerText := func() string { return eval[string](t, tab, `document.getElementById('state').innerText`) }

	f.clock.Set(epoch.Add(12300 * time.Millisecond))
	t.Run("Alive", func(t *testing.T) {
		text := pageText(t, tab, page("alive"))
		mustRead(t, text, "ALIVE", "12.3 s ago", "<script>alert(1)</script>", "0 active of capacity 2", "2026-11-07T12:00:00.000Z",
			"service worker ("+f.services["worker"]+"), for Owner ("+f.owner+")", "Signed in as Owner",
			"Goes out via\nproxy", "Public addresses only\nyes", "Ports\n80, 443", "Memory (MB)\n2048", "Enforced\nyes",
			"Version\n0.7.0", "bubblewrap\n0.9.0", "Browser\nno", "Alive 100.0 % of the")
		mustNotRead(t, text, "reports a problem", "FAILED", "\tnot run", "as of")
		for _, name := range agentsandbox.IsolationFacts() {
			mustRead(t, text, name, factMeanings[name])
		}
		for _, c := range agentsandbox.Checks() {
			mustRead(t, text, c+"\tpassed")
		}
		if n := strings.Count(text, "Yes"); n != 5 {
			t.Errorf("the page says %d facts are stated, want 5", n)
		}
		if c := bannerClass(); c != "banner alive" {
			t.Errorf("banner class %q, want alive", c)
		}
		if n := eval[int](t, tab, `document.querySelectorAll('script, b').length`); n != 0 {
			t.Errorf("report content became markup: %d elements", n)
		}
		if n := eval[int](t, tab, `document.querySelectorAll('#timeline rect.alive').length`); n != 1 {
			t.Errorf("the timeline has %d alive segments, want 1", n)
		}
		screenshot(t, tab, "owner-page-alive.png")
	})
	t.Run("Degraded", func(t *testing.T) {
		text := pageText(t, tab, page("degraded"))
		if c := bannerClass(); c != "banner degraded" {
			t.Errorf("banner class %q, want degraded", c)
		}
		mustRead(t, bannerText(), "ALIVE — the worker reports a problem", "the worker says it is not ready",
			"self-test check limits failed", "self-test check wipe did not run", "the cgroup limits are not enforced",
			"The worker's own reasons:", "slot 1 is out of use: its wipe could not be verified")
		mustRead(t, text, "limits\tFAILED", "wipe\tnot run", "network_namespace\tpassed", "slot 1 is out of use: its wipe could not be verified",
			"cgroup <b>limits</b> not enforced", "Enforced\nno", "Says it is ready\nno")
		mustNotRead(t, text, "wipe\tpassed")
		screenshot(t, tab, "owner-page-degraded.png")
	})
	f.clock.Set(epoch.Add(3*time.Minute + 5*time.Second))
	t.Run("Stale", func(t *testing.T) {
		text := pageText(t, tab, page("stale"))
		if c := bannerClass(); c != "banner stale" {
			t.Errorf("banner class %q, want stale", c)
		}
		asOf := "as of " + formatTime(epoch) + ", 3 minutes ago"
		mustRead(t, text, "STALE", "3 min 5 s ago", asOf, "The worker has not checked in since")
		for _, id := range []string{"facts", "checks", "worker", "egress", "limits"} {
			if !eval[bool](t, tab, `document.getElementById('`+id+`').closest('.asof') !== null`) {
				t.Errorf("#%s is not dimmed as of its time", id)
			}
		}
		if n := eval[int](t, tab, `document.querySelectorAll('#timeline rect.stale').length`); n != 1 {
			t.Errorf("the timeline has %d stale segments, want 1", n)
		}
		screenshot(t, tab, "owner-page-stale.png")
	})
	t.Run("Refused", func(t *testing.T) {
		text := pageText(t, tab, page("refused"))
		if c := bannerClass(); c != "banner refused" {
			t.Errorf("banner class %q, want refused", c)
		}
		mustRead(t, bannerText(), "REFUSED", "not registered at all", "What to fix:", `workspace is missing: it must be "ephemeral"`, "The worker's own reasons:",
			"slot 1 is out of use: its wipe could not be verified", "read bubblewrap info: EOF")
		mustRead(t, text, "/isolation", "must have required property 'workspace'", "There is no accepted report: the table shows what the refused report stated",
			"workspace\tThe workspace is the sandbox's own and is gone with the wipe.\t\"ephemeral\"\tNot stated", "by service worker ("+f.services["worker"]+") for Owner ("+f.owner+")",
			"The refused report's own reasons:")
		if n := strings.Count(text, "Yes"); n != 4 {
			t.Errorf("the page says %d facts are stated by the refused report, want 4", n)
		}
		screenshot(t, tab, "owner-page-refused.png")
	})
	t.Run("Absent", func(t *testing.T) {
		text := pageText(t, tab, page("absent"))
		if c := bannerClass(); c != "banner absent" {
			t.Errorf("banner class %q, want absent", c)
		}
		mustRead(t, text, "ABSENT", "The worker has never checked in", "No check-in has been refused", "No accepted report", "Alive 0.0 % of the")
		screenshot(t, tab, "owner-page-absent.png")
	})
}

// TestSignInInChromium follows the sign-in flow in real Chromium: a
// one-time link sets the HttpOnly session cookie and lands on the owner's
// streams; their page opens; the link does not work twice; signing out
// revokes the session.
func TestSignInInChromium(t *testing.T) {
	f := newFixture(t, sqliteBackend, fixtureOptions{})
	if status, body := f.checkIn(t, f.stream, validReport(t)); status != http.StatusOK {
		t.Fatalf("check in: %d %s", status, body)
	}
	link := f.loginLink(t, f.owner, time.Hour)
	tab := browser(t)

	text := pageText(t, tab, pageURL(f, "/streams"))
	mustRead(t, text, "Sign in to see your streams", "ovlive admin session link")

	mustRead(t, pageText(t, tab, link), "Sign in as Owner?")
	if err := chromedp.Do(tab, chromedp.Click(chromedp.CSS(`#confirm button`)), chromedp.WaitVisible(chromedp.ID("streams"))); err != nil {
		t.Fatalf("confirm the sign-in: %v", err)
	}
	if u := eval[string](t, tab, `location.pathname`); u != "/streams" {
		t.Fatalf("after signing in the browser is at %s, want /streams", u)
	}
	text = bodyText(t, tab)
	mustRead(t, text, "Your agent streams", "Signed in as Owner", f.stream, "ALIVE")
	mustNotRead(t, text, f.other2)
	if js := eval[string](t, tab, `document.cookie`); strings.Contains(js, SessionCookie) {
		t.Errorf("the session cookie is visible to scripts: %q", js)
	}
	cookies, err := chromedp.Call(tab, network.GetCookies, network.GetCookiesParams{URLs: []string{f.srv.URL}})
	if err != nil {
		t.Fatal(err)
	}
	var got *network.Cookie
	for _, c := range cookies.Cookies {
		if c.Name == SessionCookie {
			got = c
		}
	}
	if got == nil || !got.HTTPOnly || got.SameSite != network.CookieSameSiteLax || got.Path != "/" || got.Secure || !strings.HasPrefix(got.Value, "ovsess_") {
		t.Fatalf("session cookie %+v, want HttpOnly, SameSite=Lax, Path=/, not Secure over plain HTTP", got)
	}
	if err := chromedp.Do(tab, chromedp.Click(chromedp.CSS(`a[href="/streams/agent/`+f.stream+`/worker"]`)), chromedp.WaitVisible(chromedp.ID("state"))); err != nil {
		t.Fatalf("follow the stream's link: %v", err)
	}
	mustRead(t, bodyText(t, tab), "Sandbox worker of agent stream "+f.stream, "ALIVE")
	screenshot(t, tab, "signed-in-page.png")

	// Their own link again, signed in: on to their streams.
	pageText(t, tab, link)
	if u := eval[string](t, tab, `location.pathname`); u != "/streams" {
		t.Fatalf("the used link, signed in, is at %s, want /streams", u)
	}
	mustRead(t, pageText(t, tab, pageURL(f, "/logout")), "Sign this browser out?")
	if err := chromedp.Do(tab, chromedp.Click(chromedp.CSS(`#confirm button`)), chromedp.WaitNotPresent(chromedp.CSS("#confirm"))); err != nil {
		t.Fatalf("sign out: %v", err)
	}
	mustRead(t, bodyText(t, tab), "Signed out")
	mustRead(t, pageText(t, tab, pageURL(f, "/streams")), "Sign in to see your streams")
	mustRead(t, pageText(t, tab, link), "This sign-in link is not valid", "used already")
	rec, err := f.store.CredentialByHash(t.Context(), live.HashSecret(got.Value))
	if err != nil || rec.RevokedAt == nil {
		t.Fatalf("the session after sign-out: %+v, %v; want revoked", rec, err)
	}
}

func pageURL(f *fixture, path string) string { return f.srv.URL + path }

// loginLink issues a login ticket for person, valid for ttl, and returns
// its link on the fixture's server.
func (f *fixture) loginLink(tb testing.TB, person string, ttl time.Duration) string {
	tb.Helper()
	exp := f.clock.Now().Add(ttl)
	f.credential(tb, "ticket_"+person+ttl.String(), live.Credential{Kind: live.KindLoginTicket, PersonID: person, ExpiresAt: &exp})
	return f.srv.URL + "/login?" + LoginTicketParam + "=" + f.secrets["ticket_"+person+ttl.String()]
}

// TestOwnerPageRefusals: the page is for the owner (session or person
// token), and its refusals are pages that say what to do.
func TestOwnerPageRefusals(t *testing.T) {
	f := newFixture(t, sqliteBackend, fixtureOptions{})
	path := "/streams/agent/" + f.stream + "/worker"
	for _, tc := range []struct {
		name   string
		r      req
		status int
		reads  string
	}{
		{"NoCookie", req{}, 401, "ovlive admin session link"},
		{"PersonTokenIsAccepted", req{headers: map[string]string{"Authorization": "Bearer " + f.secrets["person"]}}, 200, "ABSENT"},
		{"UnknownSession", req{cookies: []string{"ovsess_nope"}}, 401, "You are not signed in here, or your sign-in has ended."},
		{"RevokedPersonToken", req{headers: map[string]string{"Authorization": "Bearer " + f.secrets["person_revoked"]}}, 401, "your sign-in has ended"},
		{"OtherPersonsSession", req{cookies: []string{f.secrets["other_session"]}}, 404, "You have no agent stream"},
		{"ServiceToken", req{headers: map[string]string{"Authorization": "Bearer " + f.secrets["service"]}}, 403, "A service token cannot"},
		{"UnknownStream", req{cookies: []string{f.secrets["session"]}, path: "/streams/agent/str_nothere/worker"}, 404, "You have no agent stream"},
		{"Owner", req{cookies: []string{f.secrets["session"]}}, 200, "ABSENT"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.r
			r.method = "GET"
			if r.path == "" {
				r.path = path
			}
			status, body := f.do(t, r)
			if status != tc.status || !strings.Contains(string(body), tc.reads) || !strings.HasPrefix(string(body), "<!doctype html>") {
				t.Fatalf("status %d, want %d reading %q:\n%s", status, tc.status, tc.reads, body)
			}
		})
	}
}
