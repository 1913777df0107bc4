package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"openvibe.network/agentsandbox/client"
)

// BenchmarkPoolCreate measures, with three workers of capacity 8 on this
// machine, 24 creates made at once through the pooling client against 8
// made at once to one worker directly, and (to tell the pool's own cost
// from the load of 24 at once) 8 at once through the pool, interleaved (the
// sides take turns going first): every create's latency, as the client
// sees it. Between sides every sandbox is deleted and each worker's pool of
// sandboxes started ahead refilled, so every side takes pooled sandboxes.
// It reports each side's p50 and p99 and the ratio of the first two p50s:
//
//	CI=true go test -run '^$' -bench BenchmarkPoolCreate -benchtime 10x ./e2e/   (scripts/bench-pool.sh)
func BenchmarkPoolCreate(b *testing.B) {
	const capacity = 8
	workers := startPool(b, 3, capacity)
	pool, err := client.NewPool(urls(workers), poolToken, client.PoolOptions{})
	if err != nil {
		b.Fatal(err)
	}
	one := client.NewWorker(workers[0].url, poolToken, nil)
	ctx := context.Background()
	var viaPool, direct, pool8 []time.Duration
	sides := []func(){
		func() {
			pool8 = append(pool8, createAtOnce(b, capacity, func() (func() error, error) {
				sb, err := pool.Create(ctx, client.CreateOptions{})
				if err != nil {
					return nil, err
				}
				return func() error { _, err := sb.Delete(ctx); return err }, nil
			})...)
		},
		func() {
			viaPool = append(viaPool, createAtOnce(b, 3*capacity, func() (func() error, error) {
				sb, err := pool.Create(ctx, client.CreateOptions{})
				if err != nil {
					return nil, err
				}
				return func() error { _, err := sb.Delete(ctx); return err }, nil
			})...)
		},
		func() {
			direct = append(direct, createAtOnce(b, capacity, func() (func() error, error) {
				info, err := one.Create(ctx, client.CreateOptions{})
				if err != nil {
					return nil, err
				}
				return func() error { _, err := one.Delete(ctx, info.ID); return err }, nil
			})...)
		},
	}
	b.ResetTimer()
	for i := range b.N {
		for j := range sides {
			waitPooled(b, workers, capacity)
			sides[(i+j)%len(sides)]()
		}
	}
	b.StopTimer()
	p50, p99 := percentile(viaPool, 50), percentile(viaPool, 99)
	d50, d99 := percentile(direct, 50), percentile(direct, 99)
	b.ReportMetric(ms(p50), "pool24-p50-ms")
	b.ReportMetric(ms(p99), "pool24-p99-ms")
	b.ReportMetric(ms(d50), "one8-p50-ms")
	b.ReportMetric(ms(d99), "one8-p99-ms")
	b.ReportMetric(ms(percentile(pool8, 50)), "pool8-p50-ms")
	b.ReportMetric(ms(percentile(pool8, 99)), "pool8-p99-ms")
	b.ReportMetric(ms(p50)/ms(d50), "p50-ratio")
	b.ReportMetric(0, "ns/op")
	b.Logf("%d creates through the pool (24 at once), %d to one worker (8 at once), %d through the pool (8 at once)", len(viaPool), len(direct), len(pool8))
}

// createAtOnce makes n creates at once with create, returns each one's
// latency, then deletes what they made with the functions create returned.
func createAtOnce(b *testing.B, n int, create func() (func() error, error)) []time.Duration {
	b.Helper()
	lat := make([]time.Duration, n)
	deletes := make([]func() error, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			start := time.Now()
			deletes[i], errs[i] = create()
			lat[i] = time.Since(start)
		})
	}
	wg.Wait()
	b.StopTimer()
	defer b.StartTimer()
	for _, err := range errs {
		if err != nil {
			b.Fatalf("create: %v", err)
		}
	}
	for _, del := range deletes {
		wg.Go(func() {
			if err := del(); err != nil {
				b.Errorf("delete: %v", err)
			}
		})
	}
	wg.Wait()
	return lat
}

// waitPooled waits, outside the timer, until every worker has capacity
// sandboxes started ahead again (its codes_sandbox_sandboxes_pooled).
func waitPooled(b *testing.B, workers []*poolWorker, capacity int) {
	b.Helper()
	b.StopTimer()
	defer b.StartTimer()
	want := fmt.Sprintf("\ncodes_sandbox_sandboxes_pooled %d\n", capacity)
	for _, w := range workers {
		waitFor(b, "the pool of "+w.url+" to refill", func() bool {
			resp, err := http.Get("http://" + w.metrics + "/metrics")
			if err != nil {
				return false
			}
			defer resp.Body.Close()
			text, err := io.ReadAll(resp.Body)
			return err == nil && strings.Contains(string(text), want)
		}, w.p)
	}
}

// percentile returns the p-th percentile (nearest rank) of d.
func percentile(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	return s[max(0, min(len(s)-1, i-1))]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
