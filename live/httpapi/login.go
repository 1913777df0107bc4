package httpapi

import (
	"fmt"
	"net/http"
	"time"

	"openvibe.network/agentsandbox/live"
)

// LoginTicketParam is the query parameter of /login that carries the
// one-time sign-in ticket (ovl_…).
const LoginTicketParam = "ticket"

// handleLogin answers GET /login?ticket=ovl_…: it uses the ticket up, makes
// a session for its person, sets the session cookie and sends the owner to
// their streams. A ticket that is missing, unknown, used or expired is
// answered with a page that says so.
func (s *Server) handleLogin(w http.ResponseWriter, r *http.Request, rl *reqLog) {
	ctx := r.Context()
	secret := r.URL.Query().Get(LoginTicketParam)
	if kind, ok := live.KindOfSecret(secret); !ok || kind != live.KindLoginTicket {
		rl.reason = "no_ticket"
		s.writeRefusalPage(w, rl, live.Errorf(live.EUNAUTHORIZED, "this sign-in link has no valid ticket: open the whole link you were given"))
		return
	}
	ticket, err := s.store.ConsumeLoginTicket(ctx, live.HashSecret(secret))
	switch {
	case live.ErrorCode(err) == live.ENOTFOUND:
		rl.reason = "ticket_not_usable"
		s.writeRefusalPage(w, rl, live.Errorf(live.EUNAUTHORIZED, "this sign-in link is not valid: it was used already, has expired or was never issued; ask for a new one"))
		return
	case err != nil:
		s.writeRefusalPage(w, rl, fmt.Errorf("sign in: %w", err))
		return
	}
	session, hash, err := live.NewSecret(live.KindSession)
	if err != nil {
		s.writeRefusalPage(w, rl, fmt.Errorf("sign in: %w", err))
		return
	}
	expires := s.now().Add(s.sessionTTL).UTC()
	if _, err := s.store.CreateCredential(ctx, live.Credential{Kind: live.KindSession, PersonID: ticket.PersonID, Hash: hash, ExpiresAt: &expires}); err != nil {
		s.writeRefusalPage(w, rl, fmt.Errorf("sign in: %w", err))
		return
	}
	rl.principal, rl.reason, rl.outcome = ticket.PersonID, "ticket_used", "ok"
	http.SetCookie(w, s.sessionCookie(r, session, s.sessionTTL))
	w.Header().Set("Referrer-Policy", "no-referrer")
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, "/streams", http.StatusSeeOther)
}

// sessionCookie is the ov_session cookie holding value for maxAge (a
// negative maxAge removes it): HttpOnly, SameSite=Lax, and Secure over TLS
// or when the server is told its clients use TLS.
func (s *Server) sessionCookie(r *http.Request, value string, maxAge time.Duration) *http.Cookie {
	c := &http.Cookie{Name: SessionCookie, Value: value, Path: "/", HttpOnly: true, SameSite: http.SameSiteLaxMode,
		Secure: r.TLS != nil || s.secure, MaxAge: int(maxAge / time.Second)}
	if maxAge < 0 {
		c.MaxAge = -1
	}
	return c
}

// handleLogout answers GET or POST /logout: it revokes the session of the
// cookie, if any, removes the cookie and says so.
func (s *Server) handleLogout(w http.ResponseWriter, r *http.Request, rl *reqLog) {
	ctx := r.Context()
	p := readCredentials(r)
	if p.hasSession && p.session != "" {
		f, err := s.lookup(ctx, p.session)
		if err != nil {
			s.writeRefusalPage(w, rl, fmt.Errorf("sign out: %w", err))
			return
		}
		if f.cred != nil && f.cred.Kind == live.KindSession && f.cred.RevokedAt == nil {
			if err := s.store.RevokeCredential(ctx, f.cred.ID); err != nil {
				s.writeRefusalPage(w, rl, fmt.Errorf("sign out: %w", err))
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

// streamRow is one stream on the index page.
type streamRow struct {
	ID, Class, State, Note string
}

// indexPage is /streams: the signed-in person's agent streams.
type indexPage struct {
	SignedInAs string
	Streams    []streamRow
}

// handleIndex answers GET /streams: the signed-in person's agent streams
// with their workers' states.
func (s *Server) handleIndex(w http.ResponseWriter, r *http.Request, rl *reqLog) {
	ctx := r.Context()
	person, err := s.authorizePerson(ctx, readCredentials(r), rl)
	if err != nil {
		s.writeRefusalPage(w, rl, err)
		return
	}
	streams, err := s.store.ListStreamsOwnedBy(ctx, person)
	if err != nil {
		s.writeRefusalPage(w, rl, fmt.Errorf("list streams: %w", err))
		return
	}
	names := nameCache{s: s, ctx: ctx}
	page := indexPage{SignedInAs: names.person(person)}
	for _, st := range streams {
		rec, err := s.store.Worker(ctx, st.ID)
		if err != nil {
			s.writeRefusalPage(w, rl, fmt.Errorf("list streams: %w", err))
			return
		}
		v := s.view(rec)
		b := bannerOf(v)
		row := streamRow{ID: st.ID, Class: b.Class, State: b.Title, Note: sentence(v.Reason)}
		if v.ReceivedAt != nil {
			row.Note += "; last check-in " + formatAge(time.Duration(*v.AgeSeconds*float64(time.Second)))
		}
		page.Streams = append(page.Streams, row)
	}
	rl.outcome = "ok"
	writePage(w, http.StatusOK, "index", page)
}
