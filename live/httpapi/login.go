package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"

	"openvibe.network/agentsandbox/live"
)

// LoginTicketParam is the query parameter of /login (and the form field of
// its confirmation) that carries the one-time sign-in ticket (ovl_…).
const LoginTicketParam = "ticket"

// NextParam is the query parameter of /login (and the form field of its
// confirmation) that names the page to go on to after signing in.
const NextParam = "next"

// NextCookie remembers, for a browser that asked for a page before it was
// signed in, which page that was, so that signing in goes on to it.
const NextCookie = "ov_next"

// nextCookieTTL is how long NextCookie is kept.
const nextCookieTTL = 30 * time.Minute

// handleLogin answers GET /login?ticket=ovl_…: a page that asks the person
// to confirm with a button (a POST), so that opening the link alone (a
// link previewer, a mail scanner, a page of someone else's that navigates
// to it) neither uses the ticket up nor signs anyone in. Someone already
// signed in who opens a link of their own (used or not) goes on to their
// streams. A ticket that is missing, unknown, used or expired is answered
// with a page that says so.
func (s *Server) handleLogin(w http.ResponseWriter, r *http.Request, rl *reqLog) {
	ctx := r.Context()
	secret := r.URL.Query().Get(LoginTicketParam)
	next := s.nextPage(r, r.URL.Query().Get(NextParam))
	if kind, ok := live.KindOfSecret(secret); !ok || kind != live.KindLoginTicket {
		rl.reason = "no_ticket"
		s.writeRefusalPage(w, r, rl, live.Errorf(live.EUNAUTHORIZED, "this sign-in link has no valid ticket: open the whole link you were given"))
		return
	}
	f, err := s.lookup(ctx, secret)
	if err != nil {
		s.writeRefusalPage(w, r, rl, fmt.Errorf("sign in: %w", err))
		return
	}
	ticket := f.cred
	if ticket != nil && ticket.Kind != live.KindLoginTicket {
		ticket = nil
	}
	current, err := s.signedIn(ctx, r)
	if err != nil {
		s.writeRefusalPage(w, r, rl, fmt.Errorf("sign in: %w", err))
		return
	}
	if ticket != nil && current != "" && ticket.PersonID == current {
		rl.principal, rl.reason, rl.outcome = current, "signed_in_already", "ok"
		noStore(w)
		http.Redirect(w, r, next, http.StatusSeeOther)
		return
	}
	if ticket == nil || ticket.RevokedAt != nil || !ticket.Usable(s.now()) {
		rl.reason = "ticket_not_usable"
		s.writeRefusalPage(w, r, rl, live.Errorf(live.EUNAUTHORIZED, "this sign-in link is not valid: it was used already, has expired or was never issued; ask for a new one"))
		return
	}
	names := nameCache{s: s, ctx: ctx}
	who := cleanName(names.person(ticket.PersonID), ticket.PersonID)
	m := message{Title: "Sign in to OpenVibe Live", Message: "Sign in as " + who + "?",
		Hint: "Sign in only if you asked for this link: it signs this browser in as " + who + ".",
		Form: &form{Action: "/login", Button: "Sign in as " + who, Fields: []item{{LoginTicketParam, secret}, {NextParam, next}}}}
	if current != "" {
		m.Hint = "This browser is signed in as " + cleanName(names.person(current), current) + " now. Signing in with this link signs it in as " + who + " instead."
	}
	if names.err != nil {
		s.writeRefusalPage(w, r, rl, fmt.Errorf("sign in: %w", names.err))
		return
	}
	rl.principal, rl.reason, rl.outcome = ticket.PersonID, "ticket_shown", "ok"
	writePage(w, http.StatusOK, "message", m)
}

// cleanName shows a person's name (or, when it is gone, their id) safely.
func cleanName(name, id string) string {
	if name == "" {
		return id
	}
	return live.CleanText(name, 100)
}

// handleLoginPost answers POST /login (the confirmation's button): it uses
// the ticket up, makes a session for its person, sets the session cookie
// and goes on to the page that asked for the sign-in (or /streams). A
// request that did not come from this site's own page is refused with
// nothing changed.
func (s *Server) handleLoginPost(w http.ResponseWriter, r *http.Request, rl *reqLog) {
	ctx := r.Context()
	if err := s.sameOrigin(r, rl); err != nil {
		s.writeRefusalPage(w, r, rl, err)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 4<<10)
	if err := r.ParseForm(); err != nil {
		rl.reason = "bad_form"
		s.writeRefusalPage(w, r, rl, live.Errorf(live.EINVALID, "the sign-in form could not be read: open your sign-in link again"))
		return
	}
	secret := r.PostForm.Get(LoginTicketParam)
	if kind, ok := live.KindOfSecret(secret); !ok || kind != live.KindLoginTicket {
		rl.reason = "no_ticket"
		s.writeRefusalPage(w, r, rl, live.Errorf(live.EUNAUTHORIZED, "this sign-in has no valid ticket: open the whole link you were given"))
		return
	}
	ticket, err := s.store.ConsumeLoginTicket(ctx, live.HashSecret(secret))
	switch {
	case live.ErrorCode(err) == live.ENOTFOUND:
		rl.reason = "ticket_not_usable"
		s.writeRefusalPage(w, r, rl, live.Errorf(live.EUNAUTHORIZED, "this sign-in link is not valid: it was used already, has expired or was never issued; ask for a new one"))
		return
	case err != nil:
		s.writeRefusalPage(w, r, rl, fmt.Errorf("sign in: %w", err))
		return
	}
	session, hash, err := live.NewSecret(live.KindSession)
	if err != nil {
		s.writeRefusalPage(w, r, rl, fmt.Errorf("sign in: %w", err))
		return
	}
	expires := s.now().Add(s.sessionTTL).UTC()
	if _, err := s.store.CreateCredential(ctx, live.Credential{Kind: live.KindSession, PersonID: ticket.PersonID, Hash: hash, ExpiresAt: &expires}); err != nil {
		s.writeRefusalPage(w, r, rl, fmt.Errorf("sign in: %w", err))
		return
	}
	rl.principal, rl.reason, rl.outcome = ticket.PersonID, "ticket_used", "ok"
	http.SetCookie(w, s.sessionCookie(r, session, s.sessionTTL))
	http.SetCookie(w, s.nextCookie(r, "", -1))
	noStore(w)
	http.Redirect(w, r, s.nextPage(r, r.PostForm.Get(NextParam)), http.StatusSeeOther)
}

// noStore marks an answer as not to be kept or referred from.
func noStore(w http.ResponseWriter) {
	w.Header().Set("Referrer-Policy", "no-referrer")
	w.Header().Set("Cache-Control", "no-store")
}

// signedIn returns the person whose usable session r carries ("" for none).
// It fails only when the store does.
func (s *Server) signedIn(ctx context.Context, r *http.Request) (string, error) {
	p := readCredentials(r)
	if !p.hasSession || p.session == "" {
		return "", nil
	}
	f, err := s.lookup(ctx, p.session)
	if err != nil || f.cred == nil || f.cred.Kind != live.KindSession || f.cred.RevokedAt != nil || !f.cred.Usable(s.now()) {
		return "", err
	}
	return f.cred.PersonID, nil
}

// sameOrigin refuses (403) a request that a browser sent from another site
// (its Sec-Fetch-Site, or else its Origin, says so): signing in and out
// change what the browser is signed in as, so only this site's own pages
// may ask for them.
func (s *Server) sameOrigin(r *http.Request, rl *reqLog) error {
	if err := s.crossOrigin.Check(r); err != nil {
		rl.reason = "cross_origin"
		return live.Errorf(live.EFORBIDDEN, "this request came from another site, so it was refused and nothing changed: use the buttons on this site's own pages")
	}
	return nil
}

// nextPage is the page to go on to after signing in: want when it is one
// of the owner's pages, else the one NextCookie remembers, else /streams.
func (s *Server) nextPage(r *http.Request, want string) string {
	if p, ok := ownerPagePath(want); ok {
		return p
	}
	if c, err := r.Cookie(NextCookie); err == nil {
		if p, ok := ownerPagePath(c.Value); ok {
			return p
		}
	}
	return "/streams"
}

// ownerPagePath returns v when it is the path of one of the owner's pages
// on this site (/streams or below it), clean and without a query.
func ownerPagePath(v string) (string, bool) {
	if v == "" || len(v) > 512 || strings.ContainsAny(v, "\\?#%") {
		return "", false
	}
	u, err := url.Parse(v)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Path != v || path.Clean(v) != v {
		return "", false
	}
	if v != "/streams" && !strings.HasPrefix(v, "/streams/") {
		return "", false
	}
	return v, true
}

// sessionCookie is the ov_session cookie holding value for maxAge (a
// negative maxAge removes it): HttpOnly, SameSite=Lax, and Secure over TLS
// or when the server is told its clients use TLS.
func (s *Server) sessionCookie(r *http.Request, value string, maxAge time.Duration) *http.Cookie {
	return s.cookie(r, SessionCookie, value, maxAge)
}

// nextCookie is NextCookie, holding the page to go on to.
func (s *Server) nextCookie(r *http.Request, value string, maxAge time.Duration) *http.Cookie {
	return s.cookie(r, NextCookie, value, maxAge)
}

func (s *Server) cookie(r *http.Request, name, value string, maxAge time.Duration) *http.Cookie {
	c := &http.Cookie{Name: name, Value: value, Path: "/", HttpOnly: true, SameSite: http.SameSiteLaxMode,
		Secure: r.TLS != nil || s.secure, MaxAge: int(maxAge / time.Second)}
	if maxAge < 0 {
		c.MaxAge = -1
	}
	return c
}

// handleLogout answers GET /logout: a page with a button that signs out (a
// POST: a link or a page of another site cannot sign anyone out).
func (s *Server) handleLogout(w http.ResponseWriter, r *http.Request, rl *reqLog) {
	current, err := s.signedIn(r.Context(), r)
	if err != nil {
		s.writeRefusalPage(w, r, rl, fmt.Errorf("sign out: %w", err))
		return
	}
	rl.principal, rl.outcome = current, "ok"
	if current == "" {
		writePage(w, http.StatusOK, "message", message{Title: "You are not signed in", Message: "This browser is not signed in to OpenVibe Live.",
			Link: "/streams", LinkText: "Your agent streams"})
		return
	}
	names := nameCache{s: s, ctx: r.Context()}
	who := cleanName(names.person(current), current)
	writePage(w, http.StatusOK, "message", message{Title: "Sign out", Message: "Sign this browser out? It is signed in as " + who + ".",
		Form: &form{Action: "/logout", Button: "Sign out"}})
}

// handleLogoutPost answers POST /logout from this site's own page: it
// revokes the session of the cookie, if any, removes the cookie and says
// so. A request from another site is refused with nothing changed.
func (s *Server) handleLogoutPost(w http.ResponseWriter, r *http.Request, rl *reqLog) {
	ctx := r.Context()
	if err := s.sameOrigin(r, rl); err != nil {
		s.writeRefusalPage(w, r, rl, err)
		return
	}
	p := readCredentials(r)
	if p.hasSession && p.session != "" {
		f, err := s.lookup(ctx, p.session)
		if err != nil {
			s.writeRefusalPage(w, r, rl, fmt.Errorf("sign out: %w", err))
			return
		}
		if f.cred != nil && f.cred.Kind == live.KindSession && f.cred.RevokedAt == nil {
			if err := s.store.RevokeCredential(ctx, f.cred.ID); err != nil {
				s.writeRefusalPage(w, r, rl, fmt.Errorf("sign out: %w", err))
				return
			}
			rl.principal, rl.reason = f.cred.PersonID, "session_revoked"
		}
	}
	rl.outcome = "ok"
	http.SetCookie(w, s.sessionCookie(r, "", -1))
	writePage(w, http.StatusOK, "message", message{Title: "Signed out", Message: "You are signed out: this browser's session is revoked.",
		Hint: "To sign in again, open a new sign-in link."})
}
