package image

import (
	"errors"
	"time"

	"openvibe.network/agentsandbox/internal/metrics"
)

// Metric names of the store.
const (
	MetricPulls         = "codes_sandbox_image_pulls_total"
	MetricPullBytes     = "codes_sandbox_image_pull_bytes_total"
	MetricCacheHits     = "codes_sandbox_image_cache_hits_total"
	MetricEvictions     = "codes_sandbox_image_evictions_total"
	MetricUnpackSeconds = "codes_sandbox_image_layer_unpack_seconds"
	MetricPullSeconds   = "codes_sandbox_image_pull_seconds"
	MetricCacheBytes    = "codes_sandbox_image_cache_bytes"
	MetricImages        = "codes_sandbox_images"
)

// storeMetrics are the store's families; a nil *storeMetrics counts
// nothing.
type storeMetrics struct {
	pulls      *metrics.CounterVec
	bytes      *metrics.Counter
	hits       *metrics.Counter
	evictions  *metrics.Counter
	unpackTime *metrics.Histogram
	pullTime   *metrics.Histogram
}

func newStoreMetrics(reg *metrics.Registry, s *Store) *storeMetrics {
	if reg == nil {
		return nil
	}
	secs := []float64{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}
	m := &storeMetrics{
		pulls:      reg.NewCounterVec(MetricPulls, "Image pulls from a registry, by result (ok, or the error's kind).", "result"),
		bytes:      reg.NewCounter(MetricPullBytes, "Compressed layer bytes downloaded from registries."),
		hits:       reg.NewCounter(MetricCacheHits, "Sandbox images served from the store without a pull."),
		evictions:  reg.NewCounter(MetricEvictions, "Images removed from the store (least recently used first, or by DELETE /v1/images)."),
		unpackTime: reg.NewHistogramVec(MetricUnpackSeconds, "Time to download, verify and unpack one layer.", secs).With(),
		pullTime:   reg.NewHistogramVec(MetricPullSeconds, "Time of one pull, layers already held included.", secs).With(),
	}
	reg.NewGaugeFunc(MetricCacheBytes, "Bytes the store's unpacked layers take (and pulls under way reserved).", func() float64 { return float64(s.Used()) })
	reg.NewGaugeFunc(MetricImages, "Images the store holds.", func() float64 {
		s.mu.Lock()
		defer s.mu.Unlock()
		return float64(len(s.images))
	})
	return m
}

func (m *storeMetrics) pulled(err error, d time.Duration) {
	if m == nil {
		return
	}
	m.pulls.With(resultOf(err)).Inc()
	m.pullTime.Observe(d.Seconds())
}

// resultOf is a pull's result label.
func resultOf(err error) string {
	for _, k := range []struct {
		err   error
		label string
	}{
		{ErrNotFound, "not_found"}, {ErrUnauthorized, "unauthorized"}, {ErrUnavailable, "unavailable"},
		{ErrRefused, "refused"}, {ErrPlatform, "platform"}, {ErrCacheFull, "cache_full"}, {ErrNoSpace, "no_space"},
	} {
		if errors.Is(err, k.err) {
			return k.label
		}
	}
	if err != nil {
		return "bad_image"
	}
	return "ok"
}

func (m *storeMetrics) downloaded(n int64) {
	if m != nil {
		m.bytes.Add(float64(n))
	}
}

func (m *storeMetrics) hit() {
	if m != nil {
		m.hits.Inc()
	}
}

func (m *storeMetrics) evicted() {
	if m != nil {
		m.evictions.Inc()
	}
}

func (m *storeMetrics) unpacked(d time.Duration) {
	if m != nil {
		m.unpackTime.Observe(d.Seconds())
	}
}
