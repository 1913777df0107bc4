// Package httpapi is OpenVibe.Live's HTTP side of the sandbox worker
// check-in: the check-in endpoint with its auth rules
// (POST /api/streams/agent/{id}/plays/worker), the owner's view as JSON (GET
// on the same path, and its history at …/history), the owner's pages (the
// worker's page /streams/agent/{id}/worker, the index /streams, sign-in at
// /login with a one-time link and /logout), /healthz and Prometheus
// /metrics.
//
// Auth decisions are values with a reason (see decision). Every refusal of
// the API, unknown routes and wrong methods included, is a JSON body
// {"error":{"code","message"}} whose status comes from one table (codes);
// the pages answer their refusals as pages. Every request is logged as one
// structured line without any secret.
package httpapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"openvibe.network/agentsandbox/internal/buildinfo"
	"openvibe.network/agentsandbox/live"
)

// MaxBody is the largest check-in body accepted; a larger one is answered 413.
const MaxBody = 64 << 10

// SessionCookie is the name of the owner's session cookie.
const SessionCookie = "ov_session"

// SubjectHeader names the person a service checks in for.
const SubjectHeader = "X-OV-Subject"

// DefaultSessionTTL is how long a session made by signing in lasts.
const DefaultSessionTTL = 7 * 24 * time.Hour

// DefaultStoreTimeout is how long a request waits for the store by default.
const DefaultStoreTimeout = 5 * time.Second

// Store is what the server asks of Live's state. Every live.Store is one.
// Its methods fail as live.Store's do: a *live.Error with code
// live.ENOTFOUND for an unknown id, live.EINVALID for bad input, or any other
// error when the store fails.
type Store interface {
	Person(ctx context.Context, id string) (live.Person, error)
	Stream(ctx context.Context, id string) (live.Stream, error)
	Service(ctx context.Context, id string) (live.Service, error)
	ListStreamsOwnedBy(ctx context.Context, owner string) ([]live.Stream, error)
	CredentialByHash(ctx context.Context, hash [32]byte) (live.Credential, error)
	CreateCredential(ctx context.Context, c live.Credential) (live.Credential, error)
	RevokeCredential(ctx context.Context, id string) error
	ConsumeLoginTicket(ctx context.Context, hash [32]byte) (live.Credential, error)
	TouchCredential(ctx context.Context, id string) error
	LookupCheckIn(ctx context.Context, hash [32]byte, stream, subject string) (live.CheckInLookup, error)
	Accept(ctx context.Context, r live.Registration) (live.Registration, error)
	Refuse(ctx context.Context, r live.Refusal) (live.Refusal, error)
	Worker(ctx context.Context, streamID string) (live.WorkerRecord, error)
	History(ctx context.Context, streamID string, since time.Time) ([]live.Transition, error)
	CountStates(ctx context.Context, now time.Time, window time.Duration) (map[live.State]int, error)
	Probe(ctx context.Context) error
}

var _ Store = live.Store(nil)

// Config configures a Server. Only Store is required.
type Config struct {
	// Store keeps Live's state (a live.Store).
	Store Store
	// Now is the server's clock, which derives health; nil means time.Now.
	Now func() time.Time
	// Window is how long an accepted check-in keeps a stream alive; 0 means
	// live.AliveWindow. (The store records history with its own window.)
	Window time.Duration
	// SessionTTL is how long a session made at /login lasts; 0 means
	// DefaultSessionTTL.
	SessionTTL time.Duration
	// SecureCookies sets Secure on the session cookie even when the request
	// did not come over TLS (for a TLS-terminating proxy in front). Over
	// TLS it is always set.
	SecureCookies bool
	// StoreTimeout bounds how long a request waits for the store in all;
	// past it the request is answered 503 unavailable, "Live's database did
	// not answer within …". 0 means DefaultStoreTimeout. Keep it below the
	// HTTP server's write timeout and the workers' client timeout (10 s).
	StoreTimeout time.Duration
	// Build is reported by the ovlive_build_info metric.
	Build buildinfo.Info
	// Logger receives one line per request; nil discards them.
	Logger *slog.Logger
	// Registerer and Gatherer hold the server's metrics. When both are nil
	// the server uses a fresh registry of its own (with Go and process
	// collectors); set both or neither.
	Registerer prometheus.Registerer
	Gatherer   prometheus.Gatherer
}

// Server serves the check-in endpoint, the owner's view and pages,
// /healthz and /metrics. Make one with New.
type Server struct {
	store      Store
	now        func() time.Time
	window     time.Duration
	sessionTTL time.Duration
	secure     bool
	// storeTimeout bounds each request's time in the store.
	storeTimeout time.Duration
	// crossOrigin refuses sign-ins and sign-outs sent from another site.
	crossOrigin *http.CrossOriginProtection
	log         *slog.Logger
	metrics     *metrics
	lookups     *lookupCache
	assessed    *assessCache
	mux         *http.ServeMux
}

// New returns a Server for cfg. It fails when cfg has no Store, a negative
// Window or SessionTTL, only one of Registerer and Gatherer, or when the
// metrics cannot be registered (for example twice on one registry).
func New(cfg Config) (*Server, error) {
	if cfg.Store == nil {
		return nil, errors.New("new server: config has no store")
	}
	if cfg.Window < 0 || cfg.SessionTTL < 0 || cfg.StoreTimeout < 0 {
		return nil, fmt.Errorf("new server: negative alive window %s, session lifetime %s or store timeout %s", cfg.Window, cfg.SessionTTL, cfg.StoreTimeout)
	}
	if (cfg.Registerer == nil) != (cfg.Gatherer == nil) {
		return nil, errors.New("new server: set both Registerer and Gatherer, or neither")
	}
	s := &Server{now: cfg.Now, window: cfg.Window, sessionTTL: cfg.SessionTTL, secure: cfg.SecureCookies, storeTimeout: cfg.StoreTimeout,
		crossOrigin: http.NewCrossOriginProtection(), log: cfg.Logger, lookups: newLookupCache(), assessed: newAssessCache()}
	if s.storeTimeout == 0 {
		s.storeTimeout = DefaultStoreTimeout
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.window == 0 {
		s.window = live.AliveWindow
	}
	if s.sessionTTL == 0 {
		s.sessionTTL = DefaultSessionTTL
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
	m, err := newMetrics(reg, cfg.Build)
	if err != nil {
		return nil, fmt.Errorf("new server: %w", err)
	}
	s.metrics = m
	s.store = timedStore{s: cfg.Store, m: m, timeout: s.storeTimeout}
	if err := reg.Register(streamsCollector{s: s}); err != nil {
		return nil, fmt.Errorf("new server: %w", err)
	}
	s.mux = s.routes(promhttp.HandlerFor(gat, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
	return s, nil
}

// routes is the server's one table of routes. A path that matches with
// another method answers 405 with Allow; any other path 404; both as the
// API's JSON error.
func (s *Server) routes(metricsHandler http.Handler) *http.ServeMux {
	table := []struct {
		method, path, name string
		h                  handlerFunc
	}{
		{"POST", "/api/streams/agent/{id}/plays/worker", routeCheckIn, s.handleCheckIn},
		{"GET", "/api/streams/agent/{id}/plays/worker", routeOwnerJSON, s.handleOwnerJSON},
		{"GET", "/api/streams/agent/{id}/plays/worker/history", routeHistory, s.handleHistory},
		{"GET", "/streams/agent/{id}/worker", routeOwnerPage, s.handleOwnerPage},
		{"GET", "/streams", routeIndex, s.handleIndex},
		{"GET", "/login", routeLogin, s.handleLogin},
		{"POST", "/login", routeLogin, s.handleLoginPost},
		{"GET", "/logout", routeLogout, s.handleLogout},
		{"POST", "/logout", routeLogout, s.handleLogoutPost},
		{"GET", "/{$}", routeRoot, s.handleRoot},
		{"GET", "/healthz", routeHealthz, s.handleHealthz},
		{"GET", "/metrics", routeMetrics, func(w http.ResponseWriter, r *http.Request, rl *reqLog) {
			rl.outcome = "ok"
			metricsHandler.ServeHTTP(w, r)
		}},
	}
	mux := http.NewServeMux()
	allow := map[string][]string{} // path -> methods, in table order
	var paths []string
	for _, r := range table {
		mux.Handle(r.method+" "+r.path, route(r.name, r.h))
		if allow[r.path] == nil {
			paths = append(paths, r.path)
		}
		allow[r.path] = append(allow[r.path], r.method)
		if r.method == "GET" {
			allow[r.path] = append(allow[r.path], "HEAD")
		}
	}
	for _, p := range paths {
		methods := strings.Join(allow[p], ", ")
		mux.Handle(p, route(routeUnmatched, func(w http.ResponseWriter, r *http.Request, rl *reqLog) {
			w.Header().Set("Allow", methods)
			writeError(w, rl, live.Errorf(EMETHOD, "%s is not allowed here: use %s", describe(r.Method), methods))
		}))
	}
	mux.Handle("/", route(routeUnmatched, func(w http.ResponseWriter, r *http.Request, rl *reqLog) {
		writeError(w, rl, live.Errorf(live.ENOTFOUND, "there is nothing at %s: see the routes in docs/live.md", describe(r.URL.Path)))
	}))
	return mux
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

// handleHealthz answers 200 when the store answers and can write (it
// commits a probe row), 503 otherwise, with the store's own words when it
// knows why it cannot write (a full disk, say).
func (s *Server) handleHealthz(w http.ResponseWriter, r *http.Request, rl *reqLog) {
	if err := s.store.Probe(r.Context()); err != nil {
		rl.err = err
		why := "the store does not answer or cannot write"
		if live.ErrorCode(err) == live.EUNAVAILABLE {
			why = live.ErrorMessage(err)
		}
		writeError(w, rl, live.Errorf(live.EUNAVAILABLE, "store not writable: %s", why))
		return
	}
	rl.outcome = "ok"
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}
