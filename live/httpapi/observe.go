package httpapi

import (
	"log/slog"
	"net/http"
	"net/url"
	"path"
	"time"

	"openvibe.network/agentsandbox/live"
)

// The routes, as they appear in logs and metrics.
const (
	routeCheckIn   = "checkin"
	routeOwnerJSON = "owner_json"
	routeHistory   = "history"
	routeOwnerPage = "owner_page"
	routeIndex     = "index"
	routeLogin     = "login"
	routeLogout    = "logout"
	routeRoot      = "root"
	routeHealthz   = "healthz"
	routeMetrics   = "metrics"
	routeUnmatched = "unmatched" // no route, or not with this method: 404 or 405
)

// routes are all the routes.
var routes = []string{routeCheckIn, routeOwnerJSON, routeHistory, routeOwnerPage, routeIndex, routeLogin, routeLogout,
	routeRoot, routeHealthz, routeMetrics, routeUnmatched}

// outcomeAccepted is the outcome of a check-in that was stored.
const outcomeAccepted = "accepted"

// reqLog is what a handler tells the request's one log line. It never holds
// a secret.
type reqLog struct {
	route     string
	stream    string
	principal string
	outcome   string
	code      string
	reason    string
	err       error // internal detail, logged only
}

// note records a refusal's code and outcome.
func (rl *reqLog) note(code, outcome string) {
	rl.code, rl.outcome = code, outcome
}

// decided records a decision's principal and reason.
func (rl *reqLog) decided(d decision) {
	if d.principal != "" {
		rl.principal = d.principal
	}
	rl.reason = d.reason
}

// handlerFunc is a route's handler, given the request's log record.
type handlerFunc func(w http.ResponseWriter, r *http.Request, rl *reqLog)

// route adapts h to the mux: it names the route in the request's log record
// and passes the record on. The record comes with the *statusWriter that
// serve, the mux's only caller, hands the mux (rather than in the request's
// context, which would copy the request).
func route(name string, h handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rl := w.(*statusWriter).rl
		rl.route, rl.stream = name, describeID(r.PathValue("id"))
		h(w, r, rl)
	})
}

// describeID is a path's stream id as the log shows it: never a value that
// looks like a secret, at most 128 bytes.
func describeID(id string) string {
	if id == "" {
		return ""
	}
	return clip(live.RedactSecrets(id), 128)
}

// statusWriter remembers the status a handler answered, and carries the
// request's log record to the route's handler.
type statusWriter struct {
	http.ResponseWriter
	status int
	rl     *reqLog
}

// WriteHeader notes the first status written.
func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

// Write notes status 200 when nothing was written before.
func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// hsts is the Strict-Transport-Security of every answer over TLS: a
// browser that reached Live over HTTPS keeps to HTTPS for a year.
const hsts = "max-age=31536000"

// cleanPath is the canonical form of a request's path, as http.ServeMux
// makes it before it redirects: one leading slash, no "." or ".." element,
// no double slash, a trailing slash kept.
func cleanPath(p string) string {
	if p == "" {
		return "/"
	}
	if p[0] != '/' {
		p = "/" + p
	}
	np := path.Clean(p)
	if p[len(p)-1] == '/' && np != "/" {
		np += "/"
	}
	return np
}

// serve routes r through the mux and then writes the request's one log
// line and its metrics (requests no route matches included).
func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rl := &reqLog{route: routeUnmatched}
	sw := &statusWriter{ResponseWriter: w, rl: rl}
	if r.TLS != nil {
		w.Header()["Strict-Transport-Security"] = []string{hsts}
	}
	if ep := r.URL.EscapedPath(); r.Method != "CONNECT" && cleanPath(ep) != ep {
		// The mux would answer this itself, with a redirect as text.
		u := &url.URL{Path: cleanPath(ep), RawQuery: r.URL.RawQuery}
		w.Header().Set("Location", u.String())
		writeError(sw, rl, live.Errorf(EMOVED, "the path is not in its canonical form: send the request to %s", describe(u.Path)))
	} else {
		s.mux.ServeHTTP(sw, r)
	}
	took := time.Since(start)
	s.metrics.request(rl.route, took, rl.outcome)
	level := slog.LevelInfo
	if rl.err != nil {
		level = slog.LevelError
	}
	// The record is handed to the handler directly: Logger.LogAttrs would
	// also walk the stack for a source location the line never shows.
	h := s.log.Handler()
	if !h.Enabled(r.Context(), level) {
		return
	}
	rec := slog.NewRecord(time.Now(), level, "request", 0)
	rec.AddAttrs(
		slog.String("route", rl.route),
		slog.String("method", r.Method),
		slog.Int("status", sw.status),
		slog.String("principal", rl.principal),
		slog.String("stream", rl.stream),
		slog.Float64("duration_ms", float64(took.Microseconds())/1000),
		slog.String("outcome", rl.outcome),
		slog.String("code", rl.code),
		slog.String("reason", rl.reason),
	)
	if rl.err != nil {
		rec.AddAttrs(slog.String("err", rl.err.Error()))
	}
	_ = h.Handle(r.Context(), rec)
}
