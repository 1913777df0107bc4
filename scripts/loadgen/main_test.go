package main

import (
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// TestLoopbackURL checks the guard that keeps the benchmark on this machine.
func TestLoopbackURL(t *testing.T) {
	for _, tc := range []struct {
		name, url string
		ok        bool
	}{
		{"IPv4Loopback", "http://127.0.0.1:8080", true},
		{"OtherLoopback", "http://127.3.4.5:80", true},
		{"IPv6Loopback", "http://[::1]:8080", true},
		{"Localhost", "http://localhost:8080", true},
		{"ErrPrivate", "http://10.0.0.1:8080", false},
		{"ErrPublic", "http://93.184.216.34:80", false},
		{"ErrName", "http://example.com:80", false},
		{"ErrNoPort", "http://127.0.0.1", false},
		{"ErrHTTPS", "https://127.0.0.1:443", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := loopbackURL(tc.url); (err == nil) != tc.ok {
				t.Fatalf("loopbackURL(%q) = %v, want ok=%v", tc.url, err, tc.ok)
			}
		})
	}
}

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		name string
		xs   []float64
		want float64
	}{
		{"One", []float64{3}, 3},
		{"Odd", []float64{9, 1, 5}, 5},
		{"Even", []float64{4, 1, 3, 2}, 2.5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := median(tc.xs); got != tc.want {
				t.Fatalf("median(%v) = %v, want %v", tc.xs, got, tc.want)
			}
		})
	}
}

// TestSummary checks the table: medians over rounds and the median of the
// per-round ratios to the bare side.
func TestSummary(t *testing.T) {
	in := strings.Join([]string{
		`{"name":"bare","round":1,"per_second":1000,"p50_ms":1,"p99_ms":2,"server_cpu_us":10}`,
		`{"name":"sqlite","round":1,"per_second":500,"p50_ms":3,"p99_ms":9,"non_2xx":1,"server_cpu_us":50}`,
		`{"name":"bare","round":2,"per_second":2000,"p50_ms":1,"p99_ms":4,"server_cpu_us":10}`,
		`{"name":"sqlite","round":2,"per_second":600,"p50_ms":5,"p99_ms":11,"server_cpu_us":70}`,
		`{"name":"bare","round":3,"per_second":1000,"p50_ms":1,"p99_ms":3,"server_cpu_us":10}`,
		`{"name":"sqlite","round":3,"per_second":400,"p50_ms":4,"p99_ms":10,"server_cpu_us":60}`,
	}, "\n")
	var out strings.Builder
	if err := summaryCmd(strings.NewReader(in), &out); err != nil {
		t.Fatal(err)
	}
	// sqlite: ratios 0.5, 0.3, 0.4 -> median 0.40; rates median 500.
	want := [][]string{
		{"side", "rounds", "check-ins/s median (min-max)", "vs bare (median of rounds)", "p50 ms", "p99 ms median (max)", "non-2xx", "socket errors", "server CPU µs/req"},
		{"bare", "3", "1000 (1000-2000)", "1.00×", "1.00", "3.00 (4.00)", "0", "0", "10"},
		{"sqlite", "3", "500 (400-600)", "0.40×", "4.00", "10.00 (11.00)", "1", "0", "60"},
	}
	var got [][]string
	for _, line := range strings.Split(strings.TrimRight(out.String(), "\n"), "\n") {
		got = append(got, regexp.MustCompile(`\s{2,}`).Split(strings.TrimSpace(line), -1))
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("summary rows\n%q\nwant\n%q", got, want)
	}
}
