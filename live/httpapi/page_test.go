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

	"openvibe.network/agentsandbox/internal/testenv"
)

var screenshotDir = flag.String("screenshot-dir", "", "write screenshots of the owner's page to this directory")

// browser starts headless Chromium with a fresh profile and returns a tab.
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
	text, err := chromedp.Run(tab, chromedp.Text(chromedp.CSS("body")))
	if err != nil {
		t.Fatalf("read page: %v", err)
	}
	return text
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

// TestOwnerPageInChromium loads the owner's page in real headless Chromium
// with the owner's session cookie and checks what a person reads: the state,
// the five facts, the checks, and after a 422 the refusal's errors.
func TestOwnerPageInChromium(t *testing.T) {
	f := newFixture(t, sqliteBackend, fixtureOptions{})
	tab := browser(t)
	url := f.srv.URL + "/streams/agent/" + f.stream + "/worker"
	if _, err := chromedp.Call(tab, network.SetCookie, network.SetCookieParams{Name: SessionCookie, Value: f.secrets["session"], URL: f.srv.URL}); err != nil {
		t.Fatalf("set cookie: %v", err)
	}

	text := pageText(t, tab, url)
	mustRead(t, text, "ABSENT", "The worker has never checked in", "No check-in has been refused")

	report := strings.Replace(string(validReport(t)), `"sbw-ovhost"`, `"<script>alert(1)</script>"`, 1)
	report = strings.Replace(report, `"limits": true`, `"limits": false`, 1)
	report = strings.Replace(report, `"ready": true`, `"ready": false, "reasons": ["cgroup <b>limits</b> not enforced"]`, 1)
	if status, body := f.checkIn(t, f.stream, []byte(report)); status != http.StatusOK {
		t.Fatalf("check in: %d %s", status, body)
	}
	f.clock.Set(epoch.Add(12300 * time.Millisecond))
	text = pageText(t, tab, url)
	mustRead(t, text, "ALIVE", "12.3 s ago", "0.7.0", "codes-sandbox", "<script>alert(1)</script>",
		"cgroup <b>limits</b> not enforced", "0 active of capacity 2", "2026-11-07T12:00:00.000Z")
	for _, fc := range requiredFacts {
		mustRead(t, text, fc.Name, fc.Meaning)
	}
	mustRead(t, text, "network_namespace\tpassed", "limits\tFAILED", "egress_refuses_private\tpassed")
	if n := strings.Count(text, "Yes"); n != 5 {
		t.Errorf("the page says %d facts are stated, want 5:\n%s", n, text)
	}
	scripts, err := chromedp.Run(tab, chromedp.Evaluate[int]("document.querySelectorAll('script, b').length"))
	if err != nil || scripts != 0 {
		t.Fatalf("report content became markup: %d elements (%v)", scripts, err)
	}
	screenshot(t, tab, "owner-page-alive.png")

	f.clock.Set(epoch.Add(61 * time.Second))
	mustRead(t, pageText(t, tab, url), "STALE", "1 min 1 s ago")

	if status, body := f.checkIn(t, f.stream, []byte(noProfile)); status != http.StatusUnprocessableEntity {
		t.Fatalf("check in: %d %s", status, body)
	}
	text = pageText(t, tab, url)
	mustRead(t, text, "REFUSED", "refused by the contract", "/isolation", "must have required property 'profile'",
		"There is no accepted report", "Not stated")
	screenshot(t, tab, "owner-page-refused.png")
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

// TestOwnerPageRefusals: the page is for the owner's session only, and its
// refusals are HTML pages.
func TestOwnerPageRefusals(t *testing.T) {
	f := newFixture(t, sqliteBackend, fixtureOptions{})
	path := "/streams/agent/" + f.stream + "/worker"
	for _, tc := range []struct {
		name   string
		r      req
		status int
		reads  string
	}{
		{"NoCookie", req{}, 401, "sign in"},
		{"PersonTokenIsNotASession", req{headers: map[string]string{"Authorization": "Bearer " + f.secrets["person"]}}, 401, "sign in"},
		{"UnknownSession", req{cookies: []string{"ovsess_nope"}}, 401, "not known"},
		{"OtherPersonsSession", req{cookies: []string{f.secrets["other_session"]}}, 403, "only the owner"},
		{"UnknownStream", req{cookies: []string{f.secrets["session"]}, path: "/streams/agent/str_nothere/worker"}, 404, "no agent stream"},
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
