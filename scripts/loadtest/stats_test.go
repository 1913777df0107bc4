package main

import (
	"os"
	"testing"
	"time"
)

func TestPct(t *testing.T) {
	d := durations{5 * time.Millisecond, 1 * time.Millisecond, 3 * time.Millisecond, 2 * time.Millisecond, 4 * time.Millisecond}
	for _, tc := range []struct {
		name string
		p    float64
		want float64
	}{{"p50", 50, 3}, {"p99", 99, 4}, {"max", 100, 5}, {"min", 0, 1}} {
		t.Run(tc.name, func(t *testing.T) {
			if got := d.pct(tc.p); got != tc.want {
				t.Errorf("pct(%v) = %v, want %v", tc.p, got, tc.want)
			}
		})
	}
	if got := (durations{}).pct(50); got != 0 {
		t.Errorf("pct of none = %v, want 0", got)
	}
}

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		name string
		xs   []float64
		want float64
	}{{"none", nil, 0}, {"odd", []float64{3, 1, 2}, 2}, {"even", []float64{4, 1, 3, 2}, 2.5}} {
		t.Run(tc.name, func(t *testing.T) {
			if got := median(tc.xs); got != tc.want {
				t.Errorf("median(%v) = %v, want %v", tc.xs, got, tc.want)
			}
		})
	}
}

func TestNewWorkerLoopbackOnly(t *testing.T) {
	for _, tc := range []struct {
		name, url string
		ok        bool
	}{{"OK", "http://127.0.0.1:8088", true}, {"ErrPublic", "http://192.0.2.1:8088", false}, {"ErrName", "http://localhost:8088", false}, {"ErrHTTPS", "https://127.0.0.1:1", false}} {
		t.Run(tc.name, func(t *testing.T) {
			tok := t.TempDir() + "/token"
			if err := os.WriteFile(tok, []byte("x"), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := newWorker(tc.url, tok, 1)
			if (err == nil) != tc.ok {
				t.Errorf("newWorker(%q) error %v, want ok=%v", tc.url, err, tc.ok)
			}
		})
	}
}
