package httpapi

import (
	"context"
	"log/slog"
	"net/http"
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
	routeHealthz   = "healthz"
	routeMetrics   = "metrics"
	routeUnmatched = "unmatched" // no route, or not with this method: 404 or 405
)

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

// logKey finds a request's *reqLog in its context.
type logKey struct{}

// route adapts h to the mux: it names the route in the request's log record
// and passes the record on.
func route(name string, h handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rl := r.Context().Value(logKey{}).(*reqLog) // set by serve, the mux's only caller
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

// statusWriter remembers the status a handler answered.
type statusWriter struct {
	http.ResponseWriter
	status int
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

// serve routes r through the mux and then writes the request's one log
// line and its metrics (requests no route matches included).
func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rl := &reqLog{route: routeUnmatched}
	sw := &statusWriter{ResponseWriter: w}
	s.mux.ServeHTTP(sw, r.WithContext(context.WithValue(r.Context(), logKey{}, rl)))
	took := time.Since(start)
	s.metrics.latency.WithLabelValues(rl.route).Observe(took.Seconds())
	if rl.route == routeCheckIn && rl.outcome != "" {
		s.metrics.checkins.WithLabelValues(rl.outcome).Inc()
	}
	level := slog.LevelInfo
	attrs := []slog.Attr{
		slog.String("route", rl.route),
		slog.String("method", r.Method),
		slog.Int("status", sw.status),
		slog.String("principal", rl.principal),
		slog.String("stream", rl.stream),
		slog.Float64("duration_ms", float64(took.Microseconds())/1000),
		slog.String("outcome", rl.outcome),
		slog.String("code", rl.code),
		slog.String("reason", rl.reason),
	}
	if rl.err != nil {
		level = slog.LevelError
		attrs = append(attrs, slog.String("err", rl.err.Error()))
	}
	s.log.LogAttrs(r.Context(), level, "request", attrs...)
}
