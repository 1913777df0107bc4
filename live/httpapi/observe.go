package httpapi

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The routes, as they appear in logs and metrics.
const (
	routeCheckIn   = "checkin"
	routeOwnerJSON = "owner_json"
	routeOwnerPage = "owner_page"
	routeHealthz   = "healthz"
	routeMetrics   = "metrics"
	routeUnmatched = "unmatched" // no route matched: the mux answered 404 or 405
)

// outcomeAccepted is the outcome of a check-in that was stored.
const outcomeAccepted = "accepted"

// metrics are the server's Prometheus collectors.
type metrics struct {
	checkins *prometheus.CounterVec   // by outcome
	latency  *prometheus.HistogramVec // by route
}

// newMetrics registers the server's collectors on reg. Every check-in
// outcome starts at zero so dashboards see it before it happens.
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		checkins: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ovlive_checkins_total",
			Help: "Worker check-ins by outcome (accepted, refused_contract, unauthorized, forbidden, bad_request, ...).",
		}, []string{"outcome"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "ovlive_http_request_duration_seconds",
			Help:    "Time to answer a request, by route.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}, []string{"route"}),
	}
	for _, c := range []prometheus.Collector{m.checkins, m.latency} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	m.checkins.WithLabelValues(outcomeAccepted)
	for _, ci := range codes {
		m.checkins.WithLabelValues(ci.outcome)
	}
	return m, nil
}

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
		rl.route, rl.stream = name, redact(r.PathValue("id"))
		h(w, r, rl)
	})
}

// statusWriter remembers the status a handler answered.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

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
		slog.Duration("duration", took),
		slog.String("outcome", rl.outcome),
		slog.String("code", rl.code),
		slog.String("reason", rl.reason),
	}
	if rl.err != nil {
		level = slog.LevelError
		attrs = append(attrs, slog.String("error", rl.err.Error()))
	}
	s.log.LogAttrs(r.Context(), level, "request", attrs...)
}
