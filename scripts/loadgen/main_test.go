package main

import "testing"

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
