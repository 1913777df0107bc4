// Package httpapi is OpenVibe.Live's HTTP side of the sandbox worker
// check-in: the check-in endpoint with its auth rules
// (POST /api/streams/agent/{id}/plays/worker), the owner's view as JSON
// (GET on the same path) and as an HTML page (/streams/agent/{id}/worker),
// /healthz and Prometheus /metrics.
//
// Auth decisions are values with a reason (see decision). Every refusal is a
// JSON body {"error":{"code","message"}} whose status comes from one table
// (codes), and every request is logged as one structured line without any
// secret.
package httpapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"openvibe.network/agentsandbox/live"
)

// MaxBody is the largest check-in body accepted; a larger one is answered 413.
const MaxBody = 64 << 10

// SessionCookie is the name of the owner's session cookie.
const SessionCookie = "ov_session"

// SubjectHeader names the person a service checks in for.
const SubjectHeader = "X-OV-Subject"

// Store is what the server asks of Live's state: the lookups of its auth
// rules, and the worker records of a stream. Every live.Store is one. Its
// methods fail as live.Store's do: a *live.Error with code live.ENOTFOUND
// for an unknown id, live.EINVALID for bad input, or any other error when
// the store fails.
type Store interface {
	Person(ctx context.Context, id string) (live.Person, error)
	Stream(ctx context.Context, id string) (live.Stream, error)
	Service(ctx context.Context, id string) (live.Service, error)
	CredentialByHash(ctx context.Context, hash [32]byte) (live.Credential, error)
	Accept(ctx context.Context, r live.Registration) (live.Registration, error)
	Refuse(ctx context.Context, r live.Refusal) (live.Refusal, error)
	Worker(ctx context.Context, streamID string) (live.WorkerRecord, error)
}

var _ Store = live.Store(nil)

// Config configures a Server. Only Store is required.
type Config struct {
	// Store keeps Live's state (a live.Store).
	Store Store
	// Now is the server's clock, which derives health; nil means time.Now.
	Now func() time.Time
	// Window is how long an accepted check-in keeps a stream alive; 0 means
	// live.AliveWindow.
	Window time.Duration
	// Logger receives one line per request; nil discards them.
	Logger *slog.Logger
	// Registerer and Gatherer hold the server's metrics. When both are nil
	// the server uses a fresh registry of its own (with Go and process
	// collectors); set both or neither.
	Registerer prometheus.Registerer
	Gatherer   prometheus.Gatherer
}

// Server serves the check-in endpoint, the owner's view, /healthz and
// /metrics. Make one with New.
type Server struct {
	store   Store
	now     func() time.Time
	window  time.Duration
	log     *slog.Logger
	metrics *metrics
	mux     *http.ServeMux
}

// New returns a Server for cfg. It fails when cfg has no Store, a negative
// Window, only one of Registerer and Gatherer, or when the metrics cannot be
// registered (for example twice on one registry).
func New(cfg Config) (*Server, error) {
	if cfg.Store == nil {
		return nil, errors.New("new server: config has no store")
	}
	if cfg.Window < 0 {
		return nil, fmt.Errorf("new server: negative alive window %s", cfg.Window)
	}
	if (cfg.Registerer == nil) != (cfg.Gatherer == nil) {
		return nil, errors.New("new server: set both Registerer and Gatherer, or neither")
	}
	s := &Server{store: cfg.Store, now: cfg.Now, window: cfg.Window, log: cfg.Logger}
	if s.now == nil {
		s.now = time.Now
	}
	if s.window == 0 {
		s.window = live.AliveWindow
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	reg, gat := cfg.Registerer, cfg.Gatherer
	if reg == nil {
		r, err := ownRegistry()
		if err != nil {
			return nil, fmt.Errorf("new server: %w", err)
		}
		reg, gat = r, r
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("new server: %w", err)
	}
	s.metrics = m
	metricsHandler := promhttp.HandlerFor(gat, promhttp.HandlerOpts{})
	s.mux = http.NewServeMux()
	s.mux.Handle("POST /api/streams/agent/{id}/plays/worker", route(routeCheckIn, s.handleCheckIn))
	s.mux.Handle("GET /api/streams/agent/{id}/plays/worker", route(routeOwnerJSON, s.handleOwnerJSON))
	s.mux.Handle("GET /streams/agent/{id}/worker", route(routeOwnerPage, s.handleOwnerPage))
	s.mux.Handle("GET /healthz", route(routeHealthz, s.handleHealthz))
	s.mux.Handle("GET /metrics", route(routeMetrics, func(w http.ResponseWriter, r *http.Request, rl *reqLog) {
		rl.outcome = "ok"
		metricsHandler.ServeHTTP(w, r)
	}))
	return s, nil
}

// ownRegistry returns a fresh registry with the Go and process collectors.
func ownRegistry() (*prometheus.Registry, error) {
	r := prometheus.NewRegistry()
	for _, c := range []prometheus.Collector{collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})} {
		if err := r.Register(c); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// Handler returns the server's routes as one http.Handler that logs one
// line per request.
func (s *Server) Handler() http.Handler { return http.HandlerFunc(s.serve) }

// handleHealthz answers 200 when the store answers, 503 otherwise.
func (s *Server) handleHealthz(w http.ResponseWriter, r *http.Request, rl *reqLog) {
	err := s.probeStore(r.Context())
	if err != nil {
		rl.err = err
		writeError(w, rl, live.Errorf(EUNAVAILABLE, "the store does not answer"))
		return
	}
	rl.outcome = "ok"
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// probeStore asks the store a cheap question whose "not found" proves that
// it answers.
func (s *Server) probeStore(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err := s.store.Stream(ctx, "healthz-probe")
	if live.ErrorCode(err) == live.ENOTFOUND {
		return nil
	}
	return err
}
