package egress

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the proxy's Prometheus collectors.
type metrics struct {
	conns    *prometheus.CounterVec
	bytes    *prometheus.CounterVec
	active   prometheus.Gauge
	attached prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		conns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "egress_connections_total",
			Help: "Proxied connections by verdict (allowed, refused, failed) and reason.",
		}, []string{"verdict", "reason"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "egress_bytes_total",
			Help: "Bytes through the proxy, up (sandbox to destination) and down.",
		}, []string{"direction"}),
		active: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "egress_active_connections",
			Help: "Connections being proxied now.",
		}),
		attached: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "egress_attached_sandboxes",
			Help: "Sandboxes with a proxy socket.",
		}),
	}
	for _, c := range []prometheus.Collector{m.conns, m.bytes, m.active, m.attached} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register metrics: %w", err)
		}
	}
	return m, nil
}

// finish counts a connection and writes its one log line, unless the
// sandbox's log budget is spent (see logLimiter): then the line is counted
// in the next summary instead.
func (p *Proxy) finish(a *attachment, rec *record) {
	verdict := verdictOf(rec.reason)
	p.metrics.conns.WithLabelValues(verdict, rec.reason).Inc()
	p.metrics.bytes.WithLabelValues("up").Add(float64(rec.up))
	p.metrics.bytes.WithLabelValues("down").Add(float64(rec.down))
	ok, suppressed := a.logs.allow(verdict + "/" + rec.reason)
	if len(suppressed) > 0 {
		p.logSuppressed(a.id, suppressed)
	}
	if !ok {
		return
	}
	address := ""
	if rec.address.IsValid() {
		address = rec.address.Addr().String()
	}
	level := slog.LevelInfo
	if verdict != "allowed" {
		level = slog.LevelWarn
	}
	p.log.LogAttrs(context.Background(), level, "egress",
		slog.String("sandbox", rec.sandbox),
		slog.String("method", rec.method),
		slog.String("target", clip(rec.target)),
		slog.String("host", rec.host),
		slog.Int("port", int(rec.port)),
		slog.String("address", address),
		slog.String("verdict", verdict),
		slog.String("reason", rec.reason),
		slog.String("detail", rec.detail),
		slog.Int("status", rec.status),
		slog.Int64("bytes_up", rec.up),
		slog.Int64("bytes_down", rec.down),
		slog.Float64("duration_ms", float64(time.Since(rec.start).Microseconds())/1000),
	)
}

// logSuppressed writes the summary of a sandbox's connections whose lines
// were not written, counted by verdict/reason.
func (p *Proxy) logSuppressed(sandbox string, counts map[string]int) {
	total := 0
	attrs := []slog.Attr{slog.String("sandbox", sandbox)}
	for _, k := range slices.Sorted(maps.Keys(counts)) {
		total += counts[k]
		attrs = append(attrs, slog.Int("suppressed_"+strings.ReplaceAll(k, "/", "_"), counts[k]))
	}
	attrs = append(attrs, slog.Int("suppressed", total))
	p.log.LogAttrs(context.Background(), slog.LevelWarn, "egress lines suppressed: the sandbox makes connections faster than its log budget", attrs...)
}
