// Package metrics keeps counters, gauges and histograms with labels and
// serves them in the Prometheus text exposition format (version 0.0.4).
// The worker uses it instead of the Prometheus client library, whose
// package initialisation (its default collectors, protobuf) every
// `codes-sandbox` process, a one-off `run` included, would pay at start.
//
// A Registry holds metric families; a family is made once with its name,
// help and label names, and its series are found by label values. All
// types are safe for concurrent use.
package metrics

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// Registry is a set of metric families, written in name order.
type Registry struct {
	mu       sync.Mutex
	families map[string]family
}

// family is one metric family: it writes its own samples.
type family interface {
	write(w io.Writer)
}

// NewRegistry returns an empty Registry.
func NewRegistry() *Registry { return &Registry{families: map[string]family{}} }

// validName reports whether s is a metric name ([a-zA-Z_:][a-zA-Z0-9_:]*)
// or, without colons, a label name.
func validName(s string, colons bool) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || colons && c == ':' || i > 0 && c >= '0' && c <= '9'
		if !ok {
			return false
		}
	}
	return s != ""
}

// register adds f as name; it panics on an invalid or duplicate name, a
// programming error caught by the first test that makes the metric.
func (r *Registry) register(name string, labels []string, f family) {
	if !validName(name, true) {
		panic(fmt.Sprintf("metrics: invalid metric name %q", name))
	}
	for _, l := range labels {
		if !validName(l, false) || strings.HasPrefix(l, "__") || l == "le" {
			panic(fmt.Sprintf("metrics: invalid label name %q of %s", l, name))
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.families[name]; dup {
		panic(fmt.Sprintf("metrics: %s registered twice", name))
	}
	r.families[name] = f
}

// WriteText writes every family in the text exposition format.
func (r *Registry) WriteText(w io.Writer) {
	r.mu.Lock()
	names := make([]string, 0, len(r.families))
	for n := range r.families {
		names = append(names, n)
	}
	fams := make([]family, len(names))
	sort.Strings(names)
	for i, n := range names {
		fams[i] = r.families[n]
	}
	r.mu.Unlock()
	for _, f := range fams {
		f.write(w)
	}
}

// Handler serves the registry's metrics (GET or HEAD).
func (r *Registry) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodGet && req.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "use GET", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		r.WriteText(w)
	})
}

// vec is the series of one family, by their label values.
type vec[T any] struct {
	name, help, kind string
	labels           []string
	make             func() *T
	mu               sync.Mutex
	series           map[string]*series[T]
}

type series[T any] struct {
	values []string
	m      *T
}

func newVec[T any](r *Registry, name, help, kind string, labels []string, mk func() *T, write func(v *vec[T], w io.Writer)) *vec[T] {
	v := &vec[T]{name: name, help: help, kind: kind, labels: slices.Clone(labels), make: mk, series: map[string]*series[T]{}}
	r.register(name, labels, writer(func(w io.Writer) { write(v, w) }))
	return v
}

// writer adapts a function to family.
type writer func(io.Writer)

func (f writer) write(w io.Writer) { f(w) }

// with returns the series of values, making it on first use. It panics
// when the number of values is not the number of labels.
func (v *vec[T]) with(values []string) *T {
	if len(values) != len(v.labels) {
		panic(fmt.Sprintf("metrics: %s takes %d label values, got %d", v.name, len(v.labels), len(values)))
	}
	key := strings.Join(values, "\xff")
	v.mu.Lock()
	defer v.mu.Unlock()
	s, ok := v.series[key]
	if !ok {
		s = &series[T]{values: slices.Clone(values), m: v.make()}
		v.series[key] = s
	}
	return s.m
}

// sorted returns the series in label-value order.
func (v *vec[T]) sorted() []*series[T] {
	v.mu.Lock()
	out := make([]*series[T], 0, len(v.series))
	for _, s := range v.series {
		out = append(out, s)
	}
	v.mu.Unlock()
	slices.SortFunc(out, func(a, b *series[T]) int { return slices.Compare(a.values, b.values) })
	return out
}

func (v *vec[T]) header(w io.Writer) {
	fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n", v.name, escapeHelp(v.help), v.name, v.kind)
}

// labelText renders {a="x",b="y"} for names and values, plus extra pairs.
func labelText(names, values []string, extra ...string) string {
	if len(names) == 0 && len(extra) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteByte('{')
	for i, n := range names {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s=\"%s\"", n, escapeValue(values[i]))
	}
	for i := 0; i+1 < len(extra); i += 2 {
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s=\"%s\"", extra[i], escapeValue(extra[i+1]))
	}
	b.WriteByte('}')
	return b.String()
}

var (
	helpEscaper  = strings.NewReplacer(`\`, `\\`, "\n", `\n`)
	valueEscaper = strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`)
)

func escapeHelp(s string) string  { return helpEscaper.Replace(s) }
func escapeValue(s string) string { return valueEscaper.Replace(s) }

// formatFloat writes a sample value as the format wants it.
func formatFloat(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "+Inf"
	case math.IsInf(f, -1):
		return "-Inf"
	case math.IsNaN(f):
		return "NaN"
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// atomicFloat is a float64 updated atomically.
type atomicFloat struct{ bits atomic.Uint64 }

func (a *atomicFloat) add(d float64) {
	for {
		old := a.bits.Load()
		if a.bits.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+d)) {
			return
		}
	}
}

func (a *atomicFloat) set(v float64) { a.bits.Store(math.Float64bits(v)) }
func (a *atomicFloat) get() float64  { return math.Float64frombits(a.bits.Load()) }
