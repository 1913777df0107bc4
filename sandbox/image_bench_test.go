package sandbox

import (
	"context"
	"testing"
	"time"
)

// Benchmarks behind scripts/bench-images.sh: an image sandbox's create
// against a host-view one, interleaved in one run (host, image, host,
// image…) so both see the same load, each reported as its p50 and p90 and
// the ratio of the p50s (image/host).

// BenchmarkCreateImageVsHost: a create (and its delete) of a sandbox of
// a cached image (the Debian test image) against one with the host's view,
// no pool.
func BenchmarkCreateImageVsHost(b *testing.B) {
	rt := imageRuntime(b, Config{Capacity: 1})
	img := debianImage(b)
	var host, image []time.Duration
	for range b.N {
		host = append(host, timeCreate(b, rt, Options{}))
		image = append(image, timeCreate(b, rt, Options{Image: img}))
	}
	reportRatio(b, host, image)
}

// BenchmarkCreatePooledImageVsPooled: a create from a pool of image
// sandboxes against one from the host view's pool; the pools refill before
// each create.
func BenchmarkCreatePooledImageVsPooled(b *testing.B) {
	img := debianImage(b)
	rt := imageRuntime(b, Config{Capacity: 2, Pool: 1,
		PoolImages: []PoolImage{{Ref: img.Ref, N: 1, Acquire: func(context.Context) (*RootImage, error) { return debianImage(b), nil }}}})
	var host, image []time.Duration
	for range b.N {
		waitPooled(b, rt, 2)
		host = append(host, timeCreate(b, rt, Options{}))
		waitPooled(b, rt, 2)
		image = append(image, timeCreate(b, rt, Options{Image: img}))
	}
	reportRatio(b, host, image)
}

// timeCreate creates a sandbox, times it, and deletes it.
func timeCreate(b *testing.B, rt *Runtime, o Options) time.Duration {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	start := time.Now()
	info, err := rt.Create(ctx, o)
	d := time.Since(start)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := rt.Delete(ctx, info.ID); err != nil {
		b.Fatal(err)
	}
	return d
}

// reportRatio reports the p50 and p90 of both and the ratio of their p50s.
func reportRatio(b *testing.B, host, image []time.Duration) {
	b.Helper()
	reportPercentiles(b, "host-", host)
	reportPercentiles(b, "image-", image)
	b.ReportMetric(float64(median(image))/float64(median(host)), "image/host-p50")
}

// median is the middle of samples (sorted by reportPercentiles).
func median(samples []time.Duration) time.Duration { return samples[len(samples)/2] }
