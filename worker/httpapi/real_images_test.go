package httpapi

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"openvibe.network/agentsandbox/client"
	"openvibe.network/agentsandbox/image"
	"openvibe.network/agentsandbox/image/registrytest"
	"openvibe.network/agentsandbox/internal/imagetest"
	"openvibe.network/agentsandbox/internal/metrics"
	"openvibe.network/agentsandbox/sandbox"
)

// newImageAPI serves the API on a real runtime (static init) of capacity
// slots and a real image store that allows reg (private), with its
// metrics in reg's registry.
func newImageAPI(tb testing.TB, capacity int, reg *registrytest.Registry, m *metrics.Registry) *realAPI {
	tb.Helper()
	r, err := image.ParseRegistry(reg.Name, true)
	if err != nil {
		tb.Fatal(err)
	}
	store, err := image.Open(image.Config{Dir: filepath.Join(tb.TempDir(), "images"), Registries: []image.Registry{r}, Metrics: m})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { store.Close() })
	return newRealAPI(tb, sandbox.Config{Capacity: capacity, InitBinary: imagetest.StaticInit(tb)}, func(c *Config) { c.Images = store })
}

// TestRealImageCreatesOnePull: many concurrent creates of one image the
// worker does not hold are all answered, with one pull and one download of
// its layer; each sandbox runs on the image.
func TestRealImageCreatesOnePull(t *testing.T) {
	testConcurrentImageCreates(t, 20)
}

// BenchmarkRealImageCreates50 (scripts/bench-images.sh): 50 concurrent
// creates of one uncached image; reports the time until all 50 are
// answered and fails unless the worker pulled it once.
func BenchmarkRealImageCreates50(b *testing.B) {
	for range b.N {
		testConcurrentImageCreates(b, 50)
	}
}

func testConcurrentImageCreates(tb testing.TB, n int) {
	reg := registrytest.Start(tb, registrytest.Options{})
	img := registrytest.Busybox(tb, v1.Config{})
	reg.Push(tb, "tiny/busybox:1", img)
	m := metrics.NewRegistry()
	api := newImageAPI(tb, n, reg, m)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	ids := make(chan string, n)
	start := time.Now()
	for range n {
		wg.Go(func() {
			sb, err := api.w.Create(ctx, client.CreateOptions{Image: reg.Ref("tiny/busybox:1")})
			if err != nil {
				errs <- err
				return
			}
			ids <- sb.ID
		})
	}
	wg.Wait()
	all := time.Since(start)
	close(errs)
	close(ids)
	for err := range errs {
		tb.Error(err)
	}
	if b, ok := tb.(*testing.B); ok {
		b.ReportMetric(all.Seconds()*1000, "all-answered-ms")
	}
	if got := metricValue(m, image.MetricPulls+`{result="ok"}`); got != "1" {
		tb.Errorf("pulls %q, want 1", got)
	}
	for id := range ids {
		var out strings.Builder
		if res, err := api.w.Exec(ctx, id, client.ExecRequest{Argv: []string{"sh", "-c", "test -x /bin/busybox && id -u"}}, &out, &out); err != nil || out.String() != "0\n" {
			tb.Errorf("exec in %s: %+v %v %q", id, res, err, out.String())
		}
		if _, err := api.w.Delete(ctx, id); err != nil {
			tb.Error(err)
		}
	}
}

// TestRealImageErrors: through the API, a missing tag, a registry the
// worker does not allow and an unauthorised pull are each the client's
// sentinel, with nothing held.
func TestRealImageErrors(t *testing.T) {
	reg := registrytest.Start(t, registrytest.Options{})
	api := newImageAPI(t, 1, reg, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for ref, want := range map[string]error{
		reg.Ref("tiny/none:1"):     client.ErrImageNotFound,
		"elsewhere.example/x/y:1":  client.ErrImageNotAllowed,
		reg.Name + "/UPPER/case:1": client.ErrInvalidRequest,
	} {
		if _, err := api.w.Create(ctx, client.CreateOptions{Image: ref}); !errors.Is(err, want) {
			t.Errorf("create %s: %v, want %v", ref, err, want)
		}
		if _, err := api.w.PullImage(ctx, ref); !errors.Is(err, want) {
			t.Errorf("pull %s: %v, want %v", ref, err, want)
		}
	}
	if imgs, err := api.w.Images(ctx); err != nil || len(imgs) != 0 {
		t.Errorf("images after failed pulls: %+v %v", imgs, err)
	}
	if l := api.rt.List(); len(l) != 0 {
		t.Errorf("sandboxes after failed creates: %+v", l)
	}
}

// metricValue reads one series of m's text output ("" when absent).
func metricValue(m *metrics.Registry, series string) string {
	var buf strings.Builder
	m.WriteText(&buf)
	for _, line := range strings.Split(buf.String(), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			return v
		}
	}
	return ""
}
