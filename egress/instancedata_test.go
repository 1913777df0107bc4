package egress

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func prefixes(ss ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(ss))
	for i, s := range ss {
		a := netip.MustParseAddr(s)
		out[i] = netip.PrefixFrom(a, a.BitLen())
	}
	return out
}

// TestInstanceDataAddrs: the public addresses the common clouds' metadata
// names, as cloud-init keeps it in its instance data file (fixtures in
// testdata/instance-data, shaped as each cloud writes it).
func TestInstanceDataAddrs(t *testing.T) {
	for _, tc := range []struct {
		file string
		want []netip.Prefix
	}{
		{"ec2.json", prefixes("44.200.1.7", "44.200.1.8")},
		{"gce.json", prefixes("34.70.1.9", "2600:1900:4000:1::")},
		{"azure.json", prefixes("20.50.1.2")},
		{"digitalocean.json", prefixes("45.55.1.3")},
		{"none.json", nil},
		{"missing.json", nil},
	} {
		t.Run(tc.file, func(t *testing.T) {
			got, err := InstanceDataAddrs(filepath.Join("testdata", "instance-data", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
				t.Fatalf("addresses (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("ErrNotJSON", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "instance-data.json")
		os.WriteFile(path, []byte("public-ipv4: 44.200.1.7"), 0o644)
		if _, err := InstanceDataAddrs(path); err == nil {
			t.Fatal("no error for a file that is not JSON")
		}
	})
}

// TestGuardRefusesHostAddressesOffInterfaces: the operator's static host
// addresses and those cloud-init's instance data names, on no interface,
// are refused as the host's own (verdict only, nothing is dialed), as
// literals and as the answers of a name; a changed instance data file is
// read again.
func TestGuardRefusesHostAddressesOffInterfaces(t *testing.T) {
	data := filepath.Join(t.TempDir(), "instance-data.json")
	ec2, err := os.ReadFile(filepath.Join("testdata", "instance-data", "ec2.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(data, ec2, 0o644); err != nil {
		t.Fatal(err)
	}
	h, err := NewHostAddrs(HostAddrsConfig{
		Interfaces:   func() ([]netip.Prefix, error) { return prefixes("127.0.0.1", "172.31.5.10"), nil },
		Static:       prefixes("44.1.1.1", "2606:4700:10::1"),
		InstanceData: data,
		Every:        time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	g := NewGuard(GuardConfig{Host: h, Resolver: newFakeResolver(map[string][][]netip.Addr{
		"nat.test": {addrs("93.184.216.34", "44.200.1.7")},
	})})
	for _, target := range []string{"44.1.1.1:443", "[2606:4700:10::1]:80", "44.200.1.7:443", "44.200.1.8:80", "nat.test:443"} {
		if v := g.Check(context.Background(), target); v.Reason != ReasonHostSelf {
			t.Errorf("Check(%s) = %+v, want %s", target, v, ReasonHostSelf)
		}
	}
	if v := g.Check(context.Background(), "93.184.216.34:443"); !v.Allowed {
		t.Errorf("a public address of no one's: %+v", v)
	}
	// The cloud moves the public address: the new one is refused, the old
	// one no longer.
	moved := []byte(`{"ds": {"meta_data": {"public-ipv4": "44.200.9.9"}}}`)
	if err := os.WriteFile(data, moved, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(data, time.Now(), time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := h.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	if v := g.Check(context.Background(), "44.200.9.9:443"); v.Reason != ReasonHostSelf {
		t.Errorf("after the move, the new address: %+v", v)
	}
	if v := g.Check(context.Background(), "44.200.1.7:443"); !v.Allowed {
		t.Errorf("after the move, the old address: %+v", v)
	}
}
