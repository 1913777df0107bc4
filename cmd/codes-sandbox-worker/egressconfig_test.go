package main

import (
	"context"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"openvibe.network/agentsandbox"
)

// nameTable resolves from a table and counts lookups; it never resolves
// for real.
type nameTable map[string][]netip.Addr

func (n nameTable) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if as, ok := n[host]; ok {
		return as, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

func TestLiveAddrs(t *testing.T) {
	l := newLiveAddrs([]string{"https://live.test", "http://127.0.0.1:8080", "https://live.test/other", "https://[2001:db8::7]", "::bad"},
		nameTable{"live.test": {netip.MustParseAddr("::ffff:93.184.216.7"), netip.MustParseAddr("2606:4700::7")}},
		slog.New(slog.DiscardHandler))
	want := []string{"127.0.0.1/32", "2001:db8::7/128", "2606:4700::7/128", "93.184.216.7/32"}
	deadline := time.Now().Add(10 * time.Second)
	var got []string
	for time.Now().Before(deadline) {
		got = got[:0]
		for _, p := range l.prefixes(context.Background()) {
			got = append(got, p.String())
		}
		slices.Sort(got)
		if slices.Equal(got, want) {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("Live addresses %v, want %v (literals at once, names once looked up)", got, want)
}

func TestListenerPrefixes(t *testing.T) {
	addrs := []net.Addr{
		&net.TCPAddr{IP: net.ParseIP("127.0.0.1"), Port: 8088},
		&net.TCPAddr{IP: net.IPv4zero, Port: 9464},
		&net.TCPAddr{IP: net.ParseIP("192.0.2.9"), Port: 80},
		&net.UnixAddr{Name: "/run/x.sock", Net: "unix"},
	}
	got := listenerPrefixes(addrs...)
	want := []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32"), netip.MustParsePrefix("192.0.2.9/32")}
	if !slices.Equal(got, want) {
		t.Fatalf("listener prefixes %v, want %v", got, want)
	}
}

func TestEgressFlags(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want agentsandbox.EgressPolicy
		err  string
	}{
		{"", agentsandbox.EgressPolicy{Mode: "public"}, ""},
		{"public", agentsandbox.EgressPolicy{Mode: "public"}, ""},
		{"none", agentsandbox.EgressPolicy{Mode: "none"}, ""},
		{"allow", agentsandbox.EgressPolicy{}, "give none or public"},
	} {
		got, err := egressDefault(tc.in)
		if diff := cmp.Diff(tc.want, got); diff != "" || (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("egressDefault(%q) = %+v %v, want %+v %q", tc.in, got, err, tc.want, tc.err)
		}
	}
	for _, tc := range []struct {
		in string
		ok bool
	}{{"", true}, {"9.9.9.9:53", true}, {"[2620:fe::fe]:53", true}, {"dns.quad9.net:53", false}, {"9.9.9.9", false}} {
		if _, err := egressResolver(tc.in); (err == nil) != tc.ok {
			t.Errorf("egressResolver(%q): %v, want ok=%v", tc.in, err, tc.ok)
		}
	}
}
