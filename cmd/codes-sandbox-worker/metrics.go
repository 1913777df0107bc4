package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"openvibe.network/agentsandbox/internal/buildinfo"

	"openvibe.network/agentsandbox"
	"openvibe.network/agentsandbox/client"
	"openvibe.network/agentsandbox/internal/metrics"
	"openvibe.network/agentsandbox/sandbox"
	"openvibe.network/agentsandbox/worker"
)

// Metric names of the worker (the proxy's are egress.Metric*).
const (
	metricBuildInfo      = "codes_sandbox_build_info"
	metricSlots          = "codes_sandbox_slots"
	metricActive         = "codes_sandbox_sandboxes_active"
	metricPooled         = "codes_sandbox_sandboxes_pooled"
	metricCreated        = "codes_sandbox_sandboxes_created_total"
	metricWiped          = "codes_sandbox_sandboxes_wiped_total"
	metricWipeFailures   = "codes_sandbox_wipe_failures_total"
	metricCreateSeconds  = "codes_sandbox_create_seconds"
	metricExecSeconds    = "codes_sandbox_exec_seconds"
	metricSelfTestCheck  = "codes_sandbox_selftest_check_passed"
	metricSelfTestPassed = "codes_sandbox_selftest_passed"
	metricSelfTestAt     = "codes_sandbox_selftest_last_run_timestamp_seconds"
	metricCheckIns       = "codes_sandbox_checkins_total"
)

// createBounds are the create histogram's bounds, in seconds: about a
// millisecond from the pool, tens without it.
func createBounds() []float64 {
	return []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5}
}

// execBounds are the exec histogram's bounds, in seconds: an exec takes as
// long as its command.
func execBounds() []float64 {
	return []float64{0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300}
}

// workerMetrics are the worker's own families (the proxy registers its
// own on the same registry).
type workerMetrics struct {
	reg          *metrics.Registry
	created      *metrics.CounterVec
	wiped        *metrics.CounterVec
	wipeFailures *metrics.Counter
	createTime   *metrics.HistogramVec
	execTime     *metrics.HistogramVec
	checkIns     *metrics.CounterVec
}

// newWorkerMetrics registers the families that do not need the stack.
func newWorkerMetrics(reg *metrics.Registry) *workerMetrics {
	build := buildinfo.Read()
	reg.NewGaugeVec(metricBuildInfo, "The worker's build: always 1, with its version, VCS revision and Go version as labels.",
		"version", "revision", "goversion").With(build.Version, build.Revision, build.GoVersion).Set(1)
	return &workerMetrics{
		reg:          reg,
		created:      reg.NewCounterVec(metricCreated, "Sandboxes created through the API, by egress mode.", "egress"),
		wiped:        reg.NewCounterVec(metricWiped, "Sandboxes wiped, by why they ended (deleted, time_box, memory, exited).", "reason"),
		wipeFailures: reg.NewCounter(metricWipeFailures, "Wipes that could not verify that nothing of the sandbox is left (its slot stays out of use)."),
		createTime:   reg.NewHistogramVec(metricCreateSeconds, "Time to create a sandbox through the API, by outcome.", createBounds(), "outcome"),
		execTime:     reg.NewHistogramVec(metricExecSeconds, "Time of a foreground exec through the API, command included, by outcome.", execBounds(), "outcome"),
		checkIns: reg.NewCounterVec(metricCheckIns,
			"Check-ins by Live URL and outcome (accepted, refused_contract, unauthorized, refused, failed, no_answer).", "live", "outcome"),
	}
}

// onWipe counts a wipe (sandbox.Config.OnWipe).
func (m *workerMetrics) onWipe(reason string, rep sandbox.WipeReport) {
	m.wiped.With(reason).Inc()
	if !rep.Verified {
		m.wipeFailures.Inc()
	}
}

// observeStack registers the families read from the running stack.
func (m *workerMetrics) observeStack(st *stack) {
	m.reg.NewGaugeFunc(metricSlots, "Sandbox slots of this worker.", func() float64 { return float64(st.rt.Capacity()) })
	m.reg.NewGaugeFunc(metricActive, "Slots in use: running sandboxes, those being wiped, and those kept out of use.",
		func() float64 { return float64(st.rt.Active()) })
	m.reg.NewGaugeFunc(metricPooled, "Sandboxes started ahead, ready for the next create.", func() float64 { return float64(st.rt.Pooled()) })
	last := func() *worker.Result { return st.tester.Last() }
	m.reg.NewGaugeVecFunc(metricSelfTestCheck, "The last self-test, per check that ran: 1 passed, 0 failed (a check that did not run is absent).",
		[]string{"check"}, func(emit func(float64, ...string)) {
			if r := last(); r != nil {
				for c, ok := range r.Checks {
					emit(b2f(ok), c)
				}
			}
		})
	m.reg.NewGaugeVecFunc(metricSelfTestPassed, "Whether the last self-test passed every check (absent before the first).", nil,
		func(emit func(float64, ...string)) {
			if r := last(); r != nil {
				emit(b2f(r.Passed))
			}
		})
	m.reg.NewGaugeVecFunc(metricSelfTestAt, "When the last self-test started, in Unix seconds (absent before the first).", nil,
		func(emit func(float64, ...string)) {
			if r := last(); r != nil {
				emit(float64(r.CheckedAt.UnixMilli()) / 1000)
			}
		})
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// meteredRuntime is the runtime as the API sees it, timing creates and
// execs; every other method is the runtime's.
type meteredRuntime struct {
	*sandbox.Runtime
	m *workerMetrics
}

// Create is the runtime's, timed and counted.
func (r meteredRuntime) Create(ctx context.Context, opts sandbox.Options) (sandbox.Info, error) {
	start := time.Now()
	info, err := r.Runtime.Create(ctx, opts)
	r.m.createTime.With(outcome(err)).Observe(time.Since(start).Seconds())
	if err == nil {
		mode := agentsandbox.EgressNone
		if info.Egress {
			mode = agentsandbox.EgressPublic
			if info.EgressPolicy.Mode != "" {
				mode = info.EgressPolicy.Mode
			}
		}
		r.m.created.With(mode).Inc()
	}
	return info, err
}

// Exec is the runtime's, timed.
func (r meteredRuntime) Exec(ctx context.Context, id string, req agentsandbox.ExecRequest, stdout, stderr io.Writer) (agentsandbox.ExecResult, error) {
	start := time.Now()
	res, err := r.Runtime.Exec(ctx, id, req, stdout, stderr)
	r.m.execTime.With(outcome(err)).Observe(time.Since(start).Seconds())
	return res, err
}

// outcome labels an operation's result: ok, at_capacity or error.
func outcome(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, sandbox.ErrCapacity):
		return "at_capacity"
	}
	return "error"
}

// meteredLive counts a target's check-ins by outcome.
type meteredLive struct {
	worker.Live
	url string
	m   *workerMetrics
}

// CheckIn is the Live's, counted.
func (l meteredLive) CheckIn(ctx context.Context, stream, subject string, report []byte) (client.CheckInAnswer, error) {
	a, err := l.Live.CheckIn(ctx, stream, subject, report)
	l.m.checkIns.With(l.url, checkInOutcome(a, err)).Inc()
	return a, err
}

func checkInOutcome(a client.CheckInAnswer, err error) string {
	switch {
	case err != nil:
		return "no_answer"
	case a.OK():
		return "accepted"
	case a.Status == http.StatusUnprocessableEntity:
		return "refused_contract"
	case a.Status == http.StatusUnauthorized || a.Status == http.StatusForbidden:
		return "unauthorized"
	case a.Status == http.StatusTooManyRequests || a.Status >= 500:
		return "failed"
	}
	return "refused"
}

// meterTargets wraps every target's Live to count its check-ins.
func (m *workerMetrics) meterTargets(ts []worker.Target) []worker.Target {
	out := make([]worker.Target, len(ts))
	for i, t := range ts {
		t.Live = meteredLive{Live: t.Live, url: t.LiveURL, m: m}
		out[i] = t
	}
	return out
}

// serveMetrics serves reg at /metrics on ln, without the API's token (keep
// it on loopback or behind a firewall), and with withPprof Go's profiles
// at /debug/pprof/ (serve checks that ln is then on loopback); served gets
// the server's end.
func serveMetrics(reg *metrics.Registry, ln net.Listener, withPprof bool, log *slog.Logger) (*http.Server, <-chan error) {
	mux := http.NewServeMux()
	mux.Handle("/metrics", reg.Handler())
	if withPprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "metrics are at /metrics", http.StatusNotFound)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	log.Info("serving metrics", "addr", ln.Addr().String(), "pprof", withPprof)
	return srv, served
}

// listenMetrics listens on addr for the metrics ("" : none), warning when
// it is not loopback. Errors: the listen failed.
func listenMetrics(addr string, log *slog.Logger) (net.Listener, error) {
	if addr == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen for metrics: %w", err)
	}
	if ta, ok := ln.Addr().(*net.TCPAddr); ok && !ta.IP.IsLoopback() {
		log.Warn("the metrics listener is not on loopback: they are served without a token", "addr", ln.Addr().String())
	}
	return ln, nil
}

// checkPprof refuses --pprof without a metrics listener or with one off
// loopback: the profiles (a command line, stacks, heap contents' shapes)
// are served without a token. Errors: say which flag to give.
func checkPprof(on bool, ln net.Listener) error {
	switch {
	case !on:
		return nil
	case ln == nil:
		return errors.New("--pprof serves Go's profiles on the metrics listener: give --metrics-listen 127.0.0.1:PORT too")
	case !isLoopback(ln.Addr()):
		return fmt.Errorf("--pprof needs the metrics listener on loopback, and it is on %s: give --metrics-listen 127.0.0.1:PORT", ln.Addr())
	}
	return nil
}
