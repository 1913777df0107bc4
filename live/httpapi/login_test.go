package httpapi

import (
	"crypto/tls"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"openvibe.network/agentsandbox/live"
)

// noRedirect is a client that shows redirects instead of following them.
func noRedirect(c *http.Client) *http.Client {
	cc := *c
	cc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &cc
}

// signIn opens link with c (not following redirects) and confirms with
// the page's button, as a browser on the same site does: it returns the
// confirmation's answer.
func signIn(tb testing.TB, f *fixture, c *http.Client, link string, header map[string]string) *http.Response {
	tb.Helper()
	u, err := url.Parse(link)
	if err != nil {
		tb.Fatal(err)
	}
	form := url.Values{LoginTicketParam: {u.Query().Get(LoginTicketParam)}}
	if next := u.Query().Get(NextParam); next != "" {
		form.Set(NextParam, next)
	}
	r, err := http.NewRequest("POST", u.Scheme+"://"+u.Host+"/login", strings.NewReader(form.Encode()))
	if err != nil {
		tb.Fatal(err)
	}
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.Header.Set("Origin", u.Scheme+"://"+u.Host)
	r.Header.Set("Sec-Fetch-Site", "same-origin")
	for k, v := range header {
		if v == "" {
			r.Header.Del(k)
		} else {
			r.Header.Set(k, v)
		}
	}
	resp, err := c.Do(r)
	if err != nil {
		tb.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

// sessionOf returns the session cookie resp sets, or nil.
func sessionOf(resp *http.Response) *http.Cookie {
	for _, ck := range resp.Cookies() {
		if ck.Name == SessionCookie && ck.MaxAge > 0 {
			return ck
		}
	}
	return nil
}

// TestLogin: opening a sign-in link shows a page with a button and uses
// nothing up; the button (a POST from this site) signs in once (303 to
// /streams, a session cookie that works and is HttpOnly and SameSite=Lax);
// every bad ticket is a page that says so.
func TestLogin(t *testing.T) {
	f := newFixture(t, sqliteBackend, fixtureOptions{logs: true})
	c := noRedirect(f.srv.Client())
	link := f.loginLink(t, f.owner, time.Hour)
	expired := f.loginLink(t, f.owner, -time.Second)
	for range 2 { // a link previewer, then the person: neither uses the ticket up
		resp, err := c.Get(link)
		if err != nil {
			t.Fatal(err)
		}
		body := readAll(t, resp)
		resp.Body.Close()
		f.nextLog(t)
		if resp.StatusCode != 200 || !strings.Contains(body, "Sign in as Owner") || !strings.Contains(body, `method="post" action="/login"`) || len(resp.Cookies()) != 0 {
			t.Fatalf("GET %s: %d %v\n%s\nwant 200, a page with a button, no cookie", link, resp.StatusCode, resp.Cookies(), body)
		}
	}
	resp := signIn(t, f, c, link, nil)
	f.nextLog(t)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/streams" {
		t.Fatalf("login: %d to %q, want 303 to /streams", resp.StatusCode, resp.Header.Get("Location"))
	}
	cookie := sessionOf(resp)
	if cookie == nil || !cookie.HttpOnly || cookie.SameSite != http.SameSiteLaxMode || cookie.Secure || cookie.Path != "/" ||
		cookie.MaxAge != int(DefaultSessionTTL/time.Second) || !strings.HasPrefix(cookie.Value, "ovsess_") {
		t.Fatalf("session cookie %+v", cookie)
	}
	c2, err := f.store.CredentialByHash(t.Context(), live.HashSecret(cookie.Value))
	if err != nil || c2.Kind != live.KindSession || c2.PersonID != f.owner || c2.ExpiresAt == nil || !c2.ExpiresAt.Equal(f.clock.Now().Add(DefaultSessionTTL)) {
		t.Fatalf("the session %+v, %v; want the owner's, expiring in %s", c2, err, DefaultSessionTTL)
	}
	f.secrets["made_session"] = cookie.Value
	if status, body := f.do(t, req{method: "GET", path: "/streams", cookies: []string{cookie.Value}}); status != 200 || !strings.Contains(string(body), f.stream) {
		t.Fatalf("/streams with the new session: %d %s", status, body)
	}
	f.nextLog(t)
	t.Run("OwnUsedLinkWhileSignedIn", func(t *testing.T) {
		r, _ := http.NewRequest("GET", link, nil)
		r.AddCookie(cookie)
		resp, err := c.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		f.nextLog(t)
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/streams" {
			t.Fatalf("%d to %q, want 303 to /streams", resp.StatusCode, resp.Header.Get("Location"))
		}
	})
	for _, tc := range []struct{ name, url, reads string }{
		{"ErrUsedTwice", link, "used already"},
		{"ErrExpired", expired, "has expired"},
		{"ErrUnknown", f.srv.URL + "/login?ticket=ovl_unknown", "was never issued"},
		{"ErrNoTicket", f.srv.URL + "/login", "no valid ticket"},
		{"ErrNotATicket", f.srv.URL + "/login?ticket=" + f.secrets["session"], "no valid ticket"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := c.Get(tc.url)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body := readAll(t, resp)
			f.nextLog(t)
			if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body, tc.reads) || len(resp.Cookies()) != 0 {
				t.Fatalf("%d, cookies %v, body %s; want 401 reading %q and no cookie", resp.StatusCode, resp.Cookies(), body, tc.reads)
			}
			resp = signIn(t, f, c, tc.url, nil)
			f.nextLog(t)
			if resp.StatusCode != http.StatusUnauthorized || sessionOf(resp) != nil {
				t.Fatalf("POST: %d, cookies %v; want 401 and no cookie", resp.StatusCode, resp.Cookies())
			}
		})
	}
	t.Run("Logout", func(t *testing.T) {
		status, body := f.do(t, req{method: "POST", path: "/logout", cookies: []string{cookie.Value}, headers: map[string]string{"Sec-Fetch-Site": "same-origin"}})
		line := f.nextLog(t)
		if status != 200 || !strings.Contains(string(body), "Signed out") || line["reason"] != "session_revoked" {
			t.Fatalf("logout: %d %s, log %v", status, body, line)
		}
		if status, _ := f.do(t, req{method: "GET", path: "/streams", cookies: []string{cookie.Value}}); status != 401 {
			t.Fatalf("/streams after logout: %d, want 401", status)
		}
		f.nextLog(t)
	})
}

// TestLoginCSRF: no other site can sign a browser in or out. A link a
// page navigates to shows a confirmation and uses nothing; a POST to
// /login or /logout from another site (its Sec-Fetch-Site, or else its
// Origin, says so) is refused with nothing changed; GET /logout only asks.
func TestLoginCSRF(t *testing.T) {
	f := newFixture(t, sqliteBackend, fixtureOptions{})
	c := noRedirect(f.srv.Client())
	mallory := f.person(t, "Mallory")
	link := f.loginLink(t, mallory, time.Hour)
	session := func() bool {
		t.Helper()
		cred, err := f.store.CredentialByHash(t.Context(), live.HashSecret(f.secrets["session"]))
		if err != nil {
			t.Fatal(err)
		}
		return cred.RevokedAt == nil
	}
	for _, tc := range []struct {
		name   string
		header map[string]string
	}{
		{"CrossSite", map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "http://evil.example"}},
		{"SameSiteOtherOrigin", map[string]string{"Sec-Fetch-Site": "same-site", "Origin": "http://sub.127.0.0.1.example"}},
		{"OtherOriginNoFetchMetadata", map[string]string{"Sec-Fetch-Site": "", "Origin": "http://evil.example"}},
	} {
		t.Run("SignIn"+tc.name, func(t *testing.T) {
			resp := signIn(t, f, c, link, tc.header)
			if resp.StatusCode != http.StatusForbidden || sessionOf(resp) != nil {
				t.Fatalf("%d, cookies %v; want 403 and no cookie", resp.StatusCode, resp.Cookies())
			}
		})
		t.Run("SignOut"+tc.name, func(t *testing.T) {
			h := map[string]string{"Content-Type": "application/x-www-form-urlencoded"}
			for k, v := range tc.header {
				h[k] = v
			}
			status, body := f.do(t, req{method: "POST", path: "/logout", cookies: []string{f.secrets["session"]}, headers: h})
			if status != http.StatusForbidden || !session() {
				t.Fatalf("%d %s, session usable %v; want 403 and the session kept", status, body, session())
			}
		})
	}
	t.Run("GetLogoutOnlyAsks", func(t *testing.T) {
		status, body := f.do(t, req{method: "GET", path: "/logout", cookies: []string{f.secrets["session"]}})
		if status != 200 || !strings.Contains(string(body), `method="post" action="/logout"`) || !session() {
			t.Fatalf("%d %s, session usable %v; want a page with a button and the session kept", status, body, session())
		}
	})
	t.Run("LinkOpenedByAnotherSiteUsesNothing", func(t *testing.T) {
		r, _ := http.NewRequest("GET", link, nil)
		r.Header.Set("Sec-Fetch-Site", "cross-site")
		r.AddCookie(&http.Cookie{Name: SessionCookie, Value: f.secrets["session"]})
		resp, err := c.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		body := readAll(t, resp)
		resp.Body.Close()
		if resp.StatusCode != 200 || len(resp.Cookies()) != 0 || !strings.Contains(body, "signed in as Owner now") || !strings.Contains(body, "Sign in as Mallory") {
			t.Fatalf("%d %v %s; want a page that names both and sets nothing", resp.StatusCode, resp.Cookies(), body)
		}
		// The ticket is still good for Mallory's own browser.
		if resp := signIn(t, f, c, link, nil); resp.StatusCode != http.StatusSeeOther || sessionOf(resp) == nil {
			t.Fatalf("the ticket after the other site's visit: %d", resp.StatusCode)
		}
	})
	t.Run("SameOriginWithoutFetchMetadata", func(t *testing.T) {
		status, _ := f.do(t, req{method: "POST", path: "/logout", cookies: []string{f.secrets["session"]}, headers: map[string]string{"Origin": f.srv.URL}})
		if status != 200 || session() {
			t.Fatalf("%d, session usable %v; want signed out", status, session())
		}
	})
}

// TestLoginGoesBack: after signing in, the browser goes on to the page
// that asked for it: the one whose 401 it saw (remembered in a cookie), or
// the link's next; never to another site.
func TestLoginGoesBack(t *testing.T) {
	f := newFixture(t, sqliteBackend, fixtureOptions{})
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	c := noRedirect(f.srv.Client())
	c.Jar = jar
	page := "/streams/agent/" + f.stream + "/worker"
	resp, err := c.Get(f.srv.URL + page)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Fatalf("the page before signing in: %d", resp.StatusCode)
	}
	if resp := signIn(t, f, c, f.loginLink(t, f.owner, time.Hour), nil); resp.StatusCode != 303 || resp.Header.Get("Location") != page {
		t.Fatalf("after signing in: %d to %q, want %s", resp.StatusCode, resp.Header.Get("Location"), page)
	}
	u, _ := url.Parse(f.srv.URL)
	for _, ck := range jar.Cookies(u) {
		if ck.Name == NextCookie {
			t.Fatalf("the page to go back to is still remembered: %+v", ck)
		}
	}
	for _, tc := range []struct{ next, want string }{
		{page, page},
		{"/streams", "/streams"},
		{"https://evil.example/streams", "/streams"},
		{"//evil.example/streams", "/streams"},
		{"/streams/../metrics", "/streams"},
		{"/metrics", "/streams"},
		{"/streams/x?y=1", "/streams"},
	} {
		link := f.loginLink(t, f.owner, time.Hour+time.Duration(len(tc.next))) + "&" + NextParam + "=" + url.QueryEscape(tc.next)
		resp := signIn(t, f, noRedirect(f.srv.Client()), link, nil)
		if resp.StatusCode != 303 || resp.Header.Get("Location") != tc.want {
			t.Errorf("next=%s: %d to %q, want %s", tc.next, resp.StatusCode, resp.Header.Get("Location"), tc.want)
		}
	}
}

// TestLoginSecureCookie: over TLS, or when told, the cookie is Secure.
func TestLoginSecureCookie(t *testing.T) {
	for _, tc := range []struct {
		name   string
		tls    bool
		config bool
	}{{"TLS", true, false}, {"Configured", false, true}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, sqliteBackend, fixtureOptions{})
			srv, err := New(Config{Store: f.store, Now: f.clock.Now, SecureCookies: tc.config})
			if err != nil {
				t.Fatal(err)
			}
			ts := httptest.NewUnstartedServer(srv.Handler())
			if tc.tls {
				ts.StartTLS()
			} else {
				ts.Start()
			}
			defer ts.Close()
			link := strings.Replace(f.loginLink(t, f.owner, time.Hour), f.srv.URL, ts.URL, 1)
			c := noRedirect(ts.Client())
			if tc.tls {
				c.Transport.(*http.Transport).TLSClientConfig = &tls.Config{InsecureSkipVerify: true} // the test server's own certificate
			}
			resp := signIn(t, f, c, link, nil)
			if cs := resp.Cookies(); resp.StatusCode != http.StatusSeeOther || len(cs) != 2 || sessionOf(resp) == nil || !cs[0].Secure || !cs[0].HttpOnly || !cs[1].Secure {
				t.Fatalf("%d with cookies %+v, want a Secure HttpOnly session cookie (and the page to go back to removed)", resp.StatusCode, cs)
			}
			if got := resp.Header.Get("Strict-Transport-Security"); (got != "") != tc.tls {
				t.Fatalf("Strict-Transport-Security %q over TLS %v", got, tc.tls)
			}
		})
	}
}

func readAll(tb testing.TB, resp *http.Response) string {
	tb.Helper()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatal(err)
	}
	return string(b)
}

// TestIndex: /streams lists the signed-in person's streams only, with
// their states.
func TestIndex(t *testing.T) {
	f := newFixture(t, sqliteBackend, fixtureOptions{})
	second := f.newStream(t, f.owner)
	if status, body := f.checkIn(t, f.stream, validReport(t)); status != 200 {
		t.Fatalf("check in: %d %s", status, body)
	}
	for _, tc := range []struct {
		name   string
		r      req
		status int
		reads  []string
		not    []string
	}{
		{"Owner", req{cookies: []string{f.secrets["session"]}}, 200, []string{f.stream, second, "ALIVE", "ABSENT", "Signed in as Owner"}, []string{f.other2}},
		{"PersonToken", req{headers: map[string]string{"Authorization": "Bearer " + f.secrets["person"]}}, 200, []string{f.stream}, nil},
		{"Other", req{cookies: []string{f.secrets["other_session"]}}, 200, []string{f.other2, "Signed in as Other"}, []string{f.stream}},
		{"ErrNoCredential", req{}, 401, []string{"Sign in"}, nil},
		{"ErrServiceToken", req{headers: map[string]string{"Authorization": "Bearer " + f.secrets["service"]}}, 403, []string{"service token"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.r
			r.method, r.path = "GET", "/streams"
			status, body := f.do(t, r)
			if status != tc.status {
				t.Fatalf("status %d, want %d: %s", status, tc.status, body)
			}
			for _, w := range tc.reads {
				if !strings.Contains(string(body), w) {
					t.Errorf("the index does not read %q", w)
				}
			}
			for _, w := range tc.not {
				if strings.Contains(string(body), w) {
					t.Errorf("the index reads %q", w)
				}
			}
		})
	}
}
