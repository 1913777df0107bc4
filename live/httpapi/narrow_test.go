package httpapi

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// TestPagesAt390px loads every kind of page in real headless Chromium with
// a 390 px wide viewport (a phone) and checks that none scrolls sideways:
// labels stack over their values, the facts become cards, and long values
// (a 64-character worker id, long keys, reasons and errors without a space)
// wrap.
func TestPagesAt390px(t *testing.T) {
	f := newFixture(t, sqliteBackend, fixtureOptions{})
	tab := browser(t)
	if err := chromedp.Do(tab, chromedp.EmulateViewport(390, 844)); err != nil {
		t.Fatalf("emulate a 390 px viewport: %v", err)
	}
	long := strings.Repeat("x", 64)
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
	checkIn(streams["alive"], edit(t, `"sbw-ovhost"`, `"`+long+`"`, `"sandbox": "bubblewrap"`,
		`"sandbox": "bubblewrap", "`+strings.Repeat("k", 120)+`": "`+strings.Repeat("v", 300)+`"`), http.StatusOK)
	checkIn(streams["degraded"], edit(t, `"ready": true`, `"ready": false, "reasons": ["`+strings.Repeat("r", 500)+`"]`,
		`"direct": "none"`, `"direct": "`+strings.Repeat("d", 200)+`"`), http.StatusOK)
	checkIn(streams["stale"], validReport(t), http.StatusOK)
	checkIn(streams["refused"], []byte(`{"checks":{"`+strings.Repeat("c", 300)+`":1},"isolation":{"workspace":"`+strings.Repeat("w", 300)+`"}}`), http.StatusUnprocessableEntity)
	f.clock.Advance(30 * time.Second)
	checkIn(streams["alive"], edit(t, `"sbw-ovhost"`, `"`+long+`"`), http.StatusOK)
	checkIn(streams["degraded"], edit(t, `"ready": true`, `"ready": false, "reasons": ["`+strings.Repeat("r", 500)+`"]`), http.StatusOK)
	pages := map[string]string{"sign-in": "/streams", "login": f.loginLink(t, f.owner, time.Hour)[len(f.srv.URL):]}
	for name, id := range streams {
		pages[name] = "/streams/agent/" + id + "/worker"
	}
	overflow := func(name, path string) {
		t.Helper()
		if err := chromedp.Do(tab, chromedp.Navigate(f.srv.URL+path)); err != nil {
			t.Fatalf("%s: navigate: %v", name, err)
		}
		width := eval[int](t, tab, `window.innerWidth`)
		scroll := eval[int](t, tab, `document.scrollingElement.scrollWidth`)
		if width != 390 || scroll > width {
			t.Errorf("%s (%s): scroll width %d, viewport %d: the page scrolls sideways", name, path, scroll, width)
		}
		screenshot(t, tab, "narrow-"+name+".png")
	}
	overflow("sign-in", pages["sign-in"])
	overflow("login", pages["login"])
	if _, err := chromedp.Call(tab, network.SetCookie, network.SetCookieParams{Name: SessionCookie, Value: f.secrets["session"], URL: f.srv.URL}); err != nil {
		t.Fatalf("set cookie: %v", err)
	}
	overflow("index", "/streams")
	for _, name := range []string{"alive", "degraded", "refused", "absent"} {
		overflow(name, pages[name])
	}
	f.clock.Advance(3 * time.Minute)
	overflow("stale", pages["stale"])
	// The facts are cards: each label above its value, within the viewport.
	if n := eval[int](t, tab, `[...document.querySelectorAll('#facts td')].filter(td => td.getBoundingClientRect().right > window.innerWidth).length`); n != 0 {
		t.Errorf("%d cells of the facts reach past the viewport", n)
	}
}
