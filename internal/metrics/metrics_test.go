package metrics

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"openvibe.network/agentsandbox/internal/testenv"
)

func sample() *Registry {
	r := NewRegistry()
	c := r.NewCounterVec("egress_connections_total", "Proxied connections by verdict and reason.", "verdict", "reason")
	c.With("refused", "private-address").Add(3)
	c.With("allowed", "ok").Inc()
	g := r.NewGauge("sandboxes_active", "Sandboxes running now.")
	g.Set(2)
	g.Dec()
	h := r.NewHistogramVec("create_seconds", "Sandbox creation.\nLine two, with a \\ backslash.", []float64{0.005, 0.01, 0.1}, "kind")
	for _, v := range []float64{0.004, 0.006, 0.2} {
		h.With("pool").Observe(v)
	}
	r.NewGaugeVec("build_info", "Build.", "version").With(`1.0 "quoted"` + "\n").Set(1)
	r.NewGaugeFunc("slots", "Slots, read at exposition.", func() float64 { return 4 })
	r.NewGaugeVecFunc("check", "Checks, made at exposition.", []string{"name"}, func(emit func(float64, ...string)) {
		emit(0, "wipe")
		emit(1, "seccomp")
	})
	return r
}

const sampleText = `# HELP build_info Build.
# TYPE build_info gauge
build_info{version="1.0 \"quoted\"\n"} 1
# HELP check Checks, made at exposition.
# TYPE check gauge
check{name="seccomp"} 1
check{name="wipe"} 0
# HELP create_seconds Sandbox creation.\nLine two, with a \\ backslash.
# TYPE create_seconds histogram
create_seconds_bucket{kind="pool",le="0.005"} 1
create_seconds_bucket{kind="pool",le="0.01"} 2
create_seconds_bucket{kind="pool",le="0.1"} 2
create_seconds_bucket{kind="pool",le="+Inf"} 3
create_seconds_sum{kind="pool"} 0.21000000000000002
create_seconds_count{kind="pool"} 3
# HELP egress_connections_total Proxied connections by verdict and reason.
# TYPE egress_connections_total counter
egress_connections_total{verdict="allowed",reason="ok"} 1
egress_connections_total{verdict="refused",reason="private-address"} 3
# HELP sandboxes_active Sandboxes running now.
# TYPE sandboxes_active gauge
sandboxes_active 1
# HELP slots Slots, read at exposition.
# TYPE slots gauge
slots 4
`

func TestWriteText(t *testing.T) {
	var b bytes.Buffer
	sample().WriteText(&b)
	if diff := cmp.Diff(sampleText, b.String()); diff != "" {
		t.Fatalf("exposition (-want +got):\n%s", diff)
	}
}

// TestParses: the Prometheus text parser reads every family back, with its
// type and values.
func TestParses(t *testing.T) {
	var b bytes.Buffer
	sample().WriteText(&b)
	parser := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := parser.TextToMetricFamilies(&b)
	if err != nil {
		t.Fatalf("the Prometheus parser refuses the exposition: %v", err)
	}
	if got := len(fams); got != 6 {
		t.Fatalf("%d families, want 6", got)
	}
	h := fams["create_seconds"].GetMetric()[0].GetHistogram()
	if h.GetSampleCount() != 3 || len(h.GetBucket()) != 4 {
		t.Errorf("histogram read back as %v", h)
	}
}

// TestPromtool: promtool check metrics passes on the exposition. promtool
// comes from PATH, or (scripts/promtool.sh) from Debian's prometheus
// package, unpacked only.
func TestPromtool(t *testing.T) {
	path := promtool(t)
	var b bytes.Buffer
	sample().WriteText(&b)
	cmd := exec.Command(path, "check", "metrics")
	cmd.Stdin = &b
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("promtool check metrics: %v\n%s", err, out)
	}
}

func promtool(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("promtool"); err == nil {
		return p
	}
	out, err := exec.Command(filepath.Join("..", "..", "scripts", "promtool.sh")).Output()
	if err != nil {
		testenv.Missing(t, "promtool is not installed and scripts/promtool.sh could not fetch it: "+err.Error())
	}
	return strings.TrimSpace(string(out))
}

func TestHandler(t *testing.T) {
	srv := httptest.NewServer(sample().Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/plain; version=0.0.4; charset=utf-8" || resp.StatusCode != 200 {
		t.Fatalf("%d %q", resp.StatusCode, ct)
	}
	post, err := http.Post(srv.URL, "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	post.Body.Close()
	if post.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("POST: %d", post.StatusCode)
	}
}

func TestConcurrent(t *testing.T) {
	r := NewRegistry()
	c := r.NewCounterVec("c_total", "c", "k")
	h := r.NewHistogramVec("h", "h", []float64{1})
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for range 1000 {
				c.With(string(rune('a' + i%2))).Inc()
				h.With().Observe(0.5)
			}
		})
	}
	wg.Go(func() { r.WriteText(&bytes.Buffer{}) })
	wg.Wait()
	if got := c.With("a").Value() + c.With("b").Value(); got != 8000 {
		t.Fatalf("counted %v, want 8000", got)
	}
}

func TestMisuse(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    func()
	}{
		{"BadName", func() { NewRegistry().NewCounterVec("1x", "h") }},
		{"BadLabel", func() { NewRegistry().NewCounterVec("x", "h", "le") }},
		{"Duplicate", func() { r := NewRegistry(); r.NewGauge("x", "h"); r.NewGauge("x", "h") }},
		{"LabelCount", func() { NewRegistry().NewCounterVec("x", "h", "a").With() }},
		{"CounterDown", func() { NewRegistry().NewCounter("x", "h").Add(-1) }},
		{"Bounds", func() { NewRegistry().NewHistogramVec("x", "h", []float64{2, 1}) }},
		{"FuncLabelCount", func() {
			r := NewRegistry()
			r.NewGaugeVecFunc("x", "h", []string{"a"}, func(emit func(float64, ...string)) { emit(1) })
			r.WriteText(io.Discard)
		}},
		{"FuncDuplicate", func() { r := NewRegistry(); r.NewGauge("x", "h"); r.NewGaugeFunc("x", "h", nil) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("no panic")
				}
			}()
			tc.f()
		})
	}
}
