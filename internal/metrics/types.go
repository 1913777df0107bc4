package metrics

import (
	"fmt"
	"io"
	"math"
	"slices"
	"sync"
)

// Counter is a value that only goes up.
type Counter struct{ v atomicFloat }

// Inc adds 1.
func (c *Counter) Inc() { c.v.add(1) }

// Add adds d; a negative d panics (a counter never goes down).
func (c *Counter) Add(d float64) {
	if d < 0 {
		panic("metrics: a counter cannot go down")
	}
	c.v.add(d)
}

// Value is the counter's value.
func (c *Counter) Value() float64 { return c.v.get() }

// Gauge is a value that goes up and down.
type Gauge struct{ v atomicFloat }

// Set sets the value.
func (g *Gauge) Set(v float64) { g.v.set(v) }

// Add adds d (negative to subtract).
func (g *Gauge) Add(d float64) { g.v.add(d) }

// Inc adds 1; Dec subtracts 1.
func (g *Gauge) Inc() { g.v.add(1) }

// Dec subtracts 1.
func (g *Gauge) Dec() { g.v.add(-1) }

// Value is the gauge's value.
func (g *Gauge) Value() float64 { return g.v.get() }

// Histogram counts observations into cumulative buckets.
type Histogram struct {
	bounds []float64 // upper bounds, ascending, +Inf implied
	mu     sync.Mutex
	counts []uint64 // per bucket, not cumulative; the last is +Inf
	sum    float64
	count  uint64
}

// Observe records one value.
func (h *Histogram) Observe(v float64) {
	i, _ := slices.BinarySearch(h.bounds, v)
	h.mu.Lock()
	h.counts[i]++
	h.sum += v
	h.count++
	h.mu.Unlock()
}

// CounterVec is a family of counters by label values.
type CounterVec struct{ v *vec[Counter] }

// NewCounterVec registers a counter family on r. It panics on an invalid or
// duplicate name (a programming error).
func (r *Registry) NewCounterVec(name, help string, labels ...string) *CounterVec {
	return &CounterVec{newVec(r, name, help, "counter", labels, func() *Counter { return &Counter{} }, writeScalars[Counter])}
}

// With returns the counter of the label values (in the order of the
// family's labels), making it at 0 on first use.
func (c *CounterVec) With(values ...string) *Counter { return c.v.with(values) }

// GaugeVec is a family of gauges by label values.
type GaugeVec struct{ v *vec[Gauge] }

// NewGaugeVec registers a gauge family on r. It panics on an invalid or
// duplicate name.
func (r *Registry) NewGaugeVec(name, help string, labels ...string) *GaugeVec {
	return &GaugeVec{newVec(r, name, help, "gauge", labels, func() *Gauge { return &Gauge{} }, writeScalars[Gauge])}
}

// With returns the gauge of the label values, making it at 0 on first use.
func (g *GaugeVec) With(values ...string) *Gauge { return g.v.with(values) }

// NewGauge registers a gauge without labels.
func (r *Registry) NewGauge(name, help string) *Gauge { return r.NewGaugeVec(name, help).With() }

// NewCounter registers a counter without labels.
func (r *Registry) NewCounter(name, help string) *Counter { return r.NewCounterVec(name, help).With() }

// HistogramVec is a family of histograms by label values.
type HistogramVec struct{ v *vec[Histogram] }

// NewHistogramVec registers a histogram family with the given upper bounds
// (ascending; +Inf is added). It panics on an invalid or duplicate name or
// bounds that are not ascending.
func (r *Registry) NewHistogramVec(name, help string, bounds []float64, labels ...string) *HistogramVec {
	if !slices.IsSorted(bounds) || slices.ContainsFunc(bounds, func(b float64) bool { return math.IsInf(b, 0) || math.IsNaN(b) }) {
		panic(fmt.Sprintf("metrics: bounds of %s must be finite and ascending", name))
	}
	bounds = slices.Compact(slices.Clone(bounds))
	mk := func() *Histogram { return &Histogram{bounds: bounds, counts: make([]uint64, len(bounds)+1)} }
	return &HistogramVec{newVec(r, name, help, "histogram", labels, mk, writeHistograms)}
}

// With returns the histogram of the label values, making it on first use.
func (h *HistogramVec) With(values ...string) *Histogram { return h.v.with(values) }

// scalar is what a counter or a gauge offers the writer.
type scalar interface {
	Counter | Gauge
}

func valueOf[T scalar](m *T) float64 {
	switch x := any(m).(type) {
	case *Counter:
		return x.Value()
	case *Gauge:
		return x.Value()
	}
	return 0
}

func writeScalars[T scalar](v *vec[T], w io.Writer) {
	v.header(w)
	for _, s := range v.sorted() {
		fmt.Fprintf(w, "%s%s %s\n", v.name, labelText(v.labels, s.values), formatFloat(valueOf(s.m)))
	}
}

func writeHistograms(v *vec[Histogram], w io.Writer) {
	v.header(w)
	for _, s := range v.sorted() {
		h := s.m
		h.mu.Lock()
		counts, sum, count := slices.Clone(h.counts), h.sum, h.count
		h.mu.Unlock()
		var cum uint64
		for i, c := range counts {
			cum += c
			le := "+Inf"
			if i < len(h.bounds) {
				le = formatFloat(h.bounds[i])
			}
			fmt.Fprintf(w, "%s_bucket%s %d\n", v.name, labelText(v.labels, s.values, "le", le), cum)
		}
		fmt.Fprintf(w, "%s_sum%s %s\n", v.name, labelText(v.labels, s.values), formatFloat(sum))
		fmt.Fprintf(w, "%s_count%s %d\n", v.name, labelText(v.labels, s.values), count)
	}
}

// NewGaugeFunc registers a gauge without labels whose value is read from
// value at every exposition (value must be quick and safe for concurrent
// use). It panics on an invalid or duplicate name.
func (r *Registry) NewGaugeFunc(name, help string, value func() float64) {
	r.NewGaugeVecFunc(name, help, nil, func(emit func(float64, ...string)) { emit(value()) })
}

// NewGaugeVecFunc registers a gauge family whose series are made at every
// exposition: collect calls emit once per series with its value and label
// values (in the order of labels). Series are written in label-value order;
// a call with the wrong number of values panics. It panics on an invalid or
// duplicate name.
func (r *Registry) NewGaugeVecFunc(name, help string, labels []string, collect func(emit func(value float64, values ...string))) {
	v := &vec[Gauge]{name: name, help: help, kind: "gauge", labels: slices.Clone(labels)}
	r.register(name, labels, writer(func(w io.Writer) {
		type sample struct {
			values []string
			value  float64
		}
		var samples []sample
		collect(func(value float64, values ...string) {
			if len(values) != len(v.labels) {
				panic(fmt.Sprintf("metrics: %s takes %d label values, got %d", name, len(v.labels), len(values)))
			}
			samples = append(samples, sample{slices.Clone(values), value})
		})
		slices.SortFunc(samples, func(a, b sample) int { return slices.Compare(a.values, b.values) })
		v.header(w)
		for _, s := range samples {
			fmt.Fprintf(w, "%s%s %s\n", name, labelText(v.labels, s.values), formatFloat(s.value))
		}
	}))
}
