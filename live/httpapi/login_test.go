package httpapi

import (
	"crypto/tls"
	"io"
	"net/http"
	"net/http/httptest"
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

// TestLogin: a ticket signs in once (303 to /streams, a session cookie
// that works and is HttpOnly and SameSite=Lax), and every bad ticket is a
// page that says so.
func TestLogin(t *testing.T) {
	f := newFixture(t, sqliteBackend, fixtureOptions{logs: true})
	c := noRedirect(f.srv.Client())
	link := f.loginLink(t, f.owner, time.Hour)
	expired := f.loginLink(t, f.owner, -time.Second)
	resp, err := c.Get(link)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	f.nextLog(t)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/streams" {
		t.Fatalf("login: %d to %q, want 303 to /streams", resp.StatusCode, resp.Header.Get("Location"))
	}
	var cookie *http.Cookie
	for _, ck := range resp.Cookies() {
		if ck.Name == SessionCookie {
			cookie = ck
		}
	}
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
		})
	}
	t.Run("Logout", func(t *testing.T) {
		status, body := f.do(t, req{method: "POST", path: "/logout", cookies: []string{cookie.Value}})
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
			resp, err := c.Get(link)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if cs := resp.Cookies(); resp.StatusCode != http.StatusSeeOther || len(cs) != 1 || !cs[0].Secure || !cs[0].HttpOnly {
				t.Fatalf("%d with cookies %+v, want one Secure HttpOnly cookie", resp.StatusCode, cs)
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
