package httpapi

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"openvibe.network/agentsandbox/live"
)

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
		s.writeRefusalPage(w, r, rl, err)
		return
	}
	streams, err := s.store.ListStreamsOwnedBy(ctx, person)
	if err != nil {
		s.writeRefusalPage(w, r, rl, fmt.Errorf("list streams: %w", err))
		return
	}
	names := nameCache{s: s, ctx: ctx}
	page := indexPage{SignedInAs: cleanName(names.person(person), person)}
	for _, st := range streams {
		rec, err := s.store.Worker(ctx, st.ID)
		if err != nil {
			s.writeRefusalPage(w, r, rl, fmt.Errorf("list streams: %w", err))
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

// handleRoot answers GET /: a browser (it accepts HTML) goes on to
// /streams; anything else is told, as JSON, that there is nothing here.
func (s *Server) handleRoot(w http.ResponseWriter, r *http.Request, rl *reqLog) {
	if !wantsHTML(r) {
		writeError(w, rl, live.Errorf(live.ENOTFOUND, "there is nothing at /: the owner's pages are at /streams, the API at /api/streams/agent/{id}/plays/worker (docs/live.md)"))
		return
	}
	rl.outcome = "ok"
	http.Redirect(w, r, "/streams", http.StatusSeeOther)
}

// wantsHTML reports whether r comes from a browser navigating: it accepts
// text/html.
func wantsHTML(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept") {
		if strings.Contains(v, "text/html") {
			return true
		}
	}
	return false
}
