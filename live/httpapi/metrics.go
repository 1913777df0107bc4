package httpapi

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"openvibe.network/agentsandbox"
	"openvibe.network/agentsandbox/internal/buildinfo"
	"openvibe.network/agentsandbox/live"
)

// metrics are the server's Prometheus collectors. Every label takes values
// from a bounded set.
type metrics struct {
	checkins  *prometheus.CounterVec   // by outcome
	refusals  *prometheus.CounterVec   // contract refusals, by error path (refusalPath)
	latency   *prometheus.HistogramVec // by route
	storeTime *prometheus.HistogramVec // by store operation

	// The children of latency, storeTime and checkins for every route, store
	// operation and outcome the server has, found once: WithLabelValues
	// hashes its labels and looks them up on every call.
	routeLatency map[string]prometheus.Observer
	opTime       map[string]prometheus.Observer
	outcomes     map[string]prometheus.Counter
}

// newMetrics registers the server's collectors on reg. Every check-in
// outcome starts at zero so dashboards see it before it happens.
func newMetrics(reg prometheus.Registerer, build buildinfo.Info) (*metrics, error) {
	m := &metrics{
		checkins: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ovlive_checkins_total",
			Help: "Worker check-ins by outcome (accepted, refused_contract, unauthorized, forbidden, bad_request, ...).",
		}, []string{"outcome"}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ovlive_contract_refusals_total",
			Help: "Contract violations in refused check-ins, by the error's path (array items and check names as *).",
		}, []string{"path"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "ovlive_http_request_duration_seconds",
			Help:    "Time to answer a request, by route.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}, []string{"route"}),
		storeTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "ovlive_store_duration_seconds",
			Help:    "Time the store took, by operation (accept and refuse include the wait for their durable commit).",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1},
		}, []string{"op"}),
	}
	info := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "ovlive_build_info",
		Help:        "The running ovlive's build: always 1, with its version, VCS revision and Go version as labels.",
		ConstLabels: prometheus.Labels{"version": build.Version, "revision": build.Revision, "goversion": build.GoVersion},
	})
	info.Set(1)
	for _, c := range []prometheus.Collector{m.checkins, m.refusals, m.latency, m.storeTime, info} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	m.routeLatency, m.opTime, m.outcomes = map[string]prometheus.Observer{}, map[string]prometheus.Observer{}, map[string]prometheus.Counter{}
	for _, r := range routes {
		m.routeLatency[r] = m.latency.WithLabelValues(r)
	}
	for _, op := range storeOps {
		m.opTime[op] = m.storeTime.WithLabelValues(op)
	}
	m.outcomes[outcomeAccepted] = m.checkins.WithLabelValues(outcomeAccepted)
	for _, ci := range codes {
		m.outcomes[ci.outcome] = m.checkins.WithLabelValues(ci.outcome)
	}
	return m, nil
}

// request observes a request of route that took took, and counts a
// check-in's outcome (when outcome is not empty).
func (m *metrics) request(route string, took time.Duration, outcome string) {
	o, ok := m.routeLatency[route]
	if !ok {
		o = m.latency.WithLabelValues(route)
	}
	o.Observe(took.Seconds())
	if route != routeCheckIn || outcome == "" {
		return
	}
	c, ok := m.outcomes[outcome]
	if !ok {
		c = m.checkins.WithLabelValues(outcome)
	}
	c.Inc()
}

// store observes a store operation that took took.
func (m *metrics) store(op string, took time.Duration) {
	o, ok := m.opTime[op]
	if !ok {
		o = m.storeTime.WithLabelValues(op)
	}
	o.Observe(took.Seconds())
}

// refused counts a contract refusal's errors by path.
func (m *metrics) refused(errs []agentsandbox.ValidationError) {
	for _, e := range errs {
		m.refusals.WithLabelValues(refusalPath(e.Path)).Inc()
	}
}

// refusalPaths are the contract's property paths that a violation may
// name as they are; any other path is reduced (see refusalPath).
var refusalPaths = func() map[string]bool {
	m := map[string]bool{"": true}
	for _, p := range []string{"worker_id", "service", "version", "ready", "reasons", "checks", "checked_at", "isolation", "browser", "capacity", "active", "at"} {
		m["/"+p] = true
	}
	for _, f := range agentsandbox.IsolationFacts() {
		m["/isolation/"+f] = true
	}
	return m
}()

// refusalPath bounds a violation's path for a metric label: the
// contract's paths stay, an array item or a check's name becomes *
// (/reasons/*, /checks/*), anything else "other".
func refusalPath(p string) string {
	if refusalPaths[p] {
		return p
	}
	for _, prefix := range []string{"/reasons/", "/checks/"} {
		if rest, ok := strings.CutPrefix(p, prefix); ok && !strings.Contains(rest, "/") {
			if _, err := strconv.Atoi(rest); err == nil || prefix == "/checks/" {
				return prefix + "*"
			}
		}
	}
	return "other"
}

// streamsCollector reports ovlive_streams{state}: the streams in each state
// now, counted by the store at each scrape.
type streamsCollector struct{ s *Server }

var streamsDesc = prometheus.NewDesc("ovlive_streams", "Agent streams by the state of their worker (alive, stale, refused, absent), at the scrape.", []string{"state"}, nil)

// Describe implements prometheus.Collector.
func (c streamsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- streamsDesc }

// Collect implements prometheus.Collector; a store failure is reported as an
// invalid metric (the scrape shows the error, the other metrics stay).
func (c streamsCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	counts, err := c.s.store.CountStates(ctx, c.s.now(), c.s.window)
	if err != nil {
		c.s.log.LogAttrs(ctx, slog.LevelError, "count streams by state", slog.String("err", err.Error()))
		ch <- prometheus.NewInvalidMetric(streamsDesc, err)
		return
	}
	for _, st := range []live.State{live.StateAlive, live.StateStale, live.StateRefused, live.StateAbsent} {
		ch <- prometheus.MustNewConstMetric(streamsDesc, prometheus.GaugeValue, float64(counts[st]), string(st))
	}
}
