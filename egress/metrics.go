package egress

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"openvibe.network/agentsandbox/internal/metrics"
)

// proxyMetrics are the proxy's metric families.
type proxyMetrics struct {
	requests *metrics.CounterVec
	bytes    *metrics.CounterVec
	active   *metrics.Gauge
	attached *metrics.GaugeVec
}

// Metric names of the proxy.
const (
	MetricRequests = "codes_sandbox_egress_requests_total"
	MetricBytes    = "codes_sandbox_egress_bytes_total"
	MetricActive   = "codes_sandbox_egress_active_requests"
	MetricAttached = "codes_sandbox_egress_attached_sandboxes"
)

func newProxyMetrics(reg *metrics.Registry) *proxyMetrics {
	return &proxyMetrics{
		requests: reg.NewCounterVec(MetricRequests,
			"Proxied requests (a CONNECT, or one HTTP request) by verdict (allowed, refused, failed) and precise reason.",
			"verdict", "reason"),
		bytes: reg.NewCounterVec(MetricBytes,
			"Bytes through the proxy, up (sandbox to destination) and down, by the verdict and reason of their request.",
			"direction", "verdict", "reason"),
		active:   reg.NewGauge(MetricActive, "Requests being proxied now (a tunnel counts until it ends)."),
		attached: reg.NewGaugeVec(MetricAttached, "Sandboxes with a proxy socket, by egress mode.", "mode"),
	}
}

// finish counts a decision and writes its one log line, unless the
// sandbox's log budget is spent (see logLimiter): then the line is counted
// in the next summary instead.
func (p *Proxy) finish(a *attachment, rec *record) {
	verdict := verdictOf(rec.reason)
	p.metrics.requests.With(verdict, rec.reason).Inc()
	if rec.up > 0 {
		p.metrics.bytes.With("up", verdict, rec.reason).Add(float64(rec.up))
	}
	if rec.down > 0 {
		p.metrics.bytes.With("down", verdict, rec.reason).Add(float64(rec.down))
	}
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
		slog.String("policy", a.mode),
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
