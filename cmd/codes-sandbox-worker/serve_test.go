package main

import (
	"net"
	"testing"
)

func TestIsLoopback(t *testing.T) {
	for _, tc := range []struct {
		addr string
		want bool
	}{
		{"127.0.0.1:8088", true}, {"127.9.9.9:1", true}, {"[::1]:8088", true},
		{"0.0.0.0:8088", false}, {"[::]:8088", false}, {"192.0.2.1:8088", false},
	} {
		a, err := net.ResolveTCPAddr("tcp", tc.addr)
		if err != nil {
			t.Fatal(err)
		}
		if got := isLoopback(a); got != tc.want {
			t.Errorf("isLoopback(%s) = %v, want %v", tc.addr, got, tc.want)
		}
	}
}
