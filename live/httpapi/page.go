package httpapi

import (
	"bytes"
	"embed"
	"fmt"
	"html/template"
	"net/http"
	"time"
	"unicode"
	"unicode/utf8"

	"openvibe.network/agentsandbox/live"
)

//go:embed templates/*.html
var templateFiles embed.FS

// pages renders the owner's pages: "worker", "index" and "message" (a
// refusal or a notice).
var pages = template.Must(template.New("pages").Funcs(template.FuncMap{"percent": percent, "more": moreErrors}).ParseFS(templateFiles, "templates/*.html"))

// refreshSeconds is how often the owner's page reloads itself.
const refreshSeconds = 5

// contentSecurityPolicy lets a page load nothing: its style and its SVG are
// inline, it has no script and no external asset, and its forms (signing in
// and out) post only to this site.
const contentSecurityPolicy = "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"

// handleOwnerPage answers GET /streams/agent/{id}/worker: the owner's page,
// for the owner's session cookie (or person token). Refusals are pages too.
func (s *Server) handleOwnerPage(w http.ResponseWriter, r *http.Request, rl *reqLog) {
	ctx := r.Context()
	streamID := r.PathValue("id")
	st, err := s.authorizeOwner(ctx, readCredentials(r), streamID, rl)
	if err != nil {
		s.writeRefusalPage(w, r, rl, err)
		return
	}
	v, err := s.ownerView(ctx, st.ID)
	if err != nil {
		s.writeRefusalPage(w, r, rl, err)
		return
	}
	h, err := s.history(ctx, st, 24*time.Hour)
	if err != nil {
		s.writeRefusalPage(w, r, rl, err)
		return
	}
	names := nameCache{s: s, ctx: ctx}
	person := cleanName(names.person(rl.principal), rl.principal)
	rl.outcome = "ok"
	writePage(w, http.StatusOK, "worker", s.workerPageOf(st.ID, person, v, timelineOf(h, st.CreatedAt)))
}

// message is a page that says one thing: a refusal or a notice, with a
// button (Form) or a link to go on, when set.
type message struct {
	Title, Message, Hint string
	Form                 *form
	Link, LinkText       string
}

// form is a page's one button: a POST of Fields (Label is the field's
// name) to Action.
type form struct {
	Action, Button string
	Fields         []item
}

// notSignedIn are the reasons of a 401 that mean the browser is not
// signed in (rather than a sign-in link that did not work).
var notSignedIn = map[string]bool{"no_credential": true, "bad_authorization": true, "unknown_credential": true,
	"revoked_credential": true, "expired_credential": true}

// writeRefusalPage answers err as a page, with the status of the codes
// table. A 401 speaks to a person: how to sign in; for one of the owner's
// pages it also remembers the page (NextCookie), so that signing in goes
// on to it.
func (s *Server) writeRefusalPage(w http.ResponseWriter, r *http.Request, rl *reqLog, err error) {
	_, ci := rl.refusal(err)
	m := message{Title: fmt.Sprintf("%d %s", ci.status, http.StatusText(ci.status)), Message: sentence(live.RedactSecrets(live.ErrorMessage(err))) + "."}
	if ci.status == http.StatusUnauthorized {
		m.Title = "Sign in to see your streams"
		if notSignedIn[rl.reason] {
			m.Message = "You are not signed in here, or your sign-in has ended."
		}
		m.Hint = "Open the sign-in link you were given: it works once, for a short while. If it has been used or has expired, " +
			"ask the operator of this Live for a new one (they make it with ovlive admin session link)."
		if p, ok := ownerPagePath(r.URL.Path); ok && r.Method == http.MethodGet {
			http.SetCookie(w, s.nextCookie(r, p, nextCookieTTL))
		}
	}
	writePage(w, ci.status, "message", m)
}

// writePage renders the named template with status.
func writePage(w http.ResponseWriter, status int, name string, data any) {
	var buf bytes.Buffer
	if err := pages.ExecuteTemplate(&buf, name, data); err != nil {
		status = http.StatusInternalServerError
		buf.Reset()
		buf.WriteString("<!doctype html><title>Internal error</title><p>internal error</p>")
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// formatTime shows t for a person, in UTC.
func formatTime(t time.Time) string {
	return t.UTC().Format("2006-01-02 15:04:05.0 UTC")
}

// formatAge shows how long ago something happened, for a person.
func formatAge(d time.Duration) string {
	switch {
	case d < 0:
		return "just now (the clock is behind the store's)"
	case d < time.Minute:
		return fmt.Sprintf("%.1f s ago", d.Seconds())
	case d < time.Hour:
		return fmt.Sprintf("%d min %d s ago", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%d h %d min ago", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%d days ago", int(d.Hours()/24))
}

// minutesAgo says how old a stale report is, in whole minutes (or hours and
// days when that is more readable).
func minutesAgo(d time.Duration) string {
	switch m := int(d.Minutes()); {
	case m < 1:
		return "less than a minute ago"
	case m == 1:
		return "1 minute ago"
	case m < 120:
		return fmt.Sprintf("%d minutes ago", m)
	case m < 48*60:
		return fmt.Sprintf("%d hours ago", m/60)
	default:
		return fmt.Sprintf("%d days ago", m/(24*60))
	}
}

// sentence starts s with a capital letter.
func sentence(s string) string {
	if s == "" {
		return s
	}
	r, n := utf8.DecodeRuneInString(s)
	return string(unicode.ToUpper(r)) + s[n:]
}

// moreErrors says how many more errors a refusal had.
func moreErrors(n int) string { return live.Plural(int64(n), "more error") }

// percent shows a share in percent with one decimal.
func percent(p float64) string { return fmt.Sprintf("%.1f %%", p) }
