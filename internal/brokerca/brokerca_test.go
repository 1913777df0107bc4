package brokerca

import (
	"crypto/x509"
	"strings"
	"testing"
	"time"
)

// TestLeaf: a leaf verifies against its CA for its host, is cached, and a
// leaf for a name outside the CA's constraints does not verify; another
// sandbox's CA does not verify it either.
func TestLeaf(t *testing.T) {
	now := time.Now()
	ca, err := New("sbx", []string{"api.example.com", "*.github.com:443"}, now)
	if err != nil {
		t.Fatal(err)
	}
	if !ca.Leaf.IsCA || !ca.Leaf.MaxPathLenZero || len(ca.Leaf.PermittedDNSDomains) != 2 {
		t.Fatalf("CA: IsCA %v, MaxPathLenZero %v, permitted %v", ca.Leaf.IsCA, ca.Leaf.MaxPathLenZero, ca.Leaf.PermittedDNSDomains)
	}
	if pem := string(CertPEM(ca)); !strings.HasPrefix(pem, "-----BEGIN CERTIFICATE-----") || strings.Contains(pem, "PRIVATE") {
		t.Fatalf("CertPEM: %q", pem)
	}
	m, err := NewMinter(ca, nil)
	if err != nil {
		t.Fatal(err)
	}
	other, err := New("other", []string{"api.example.com"}, now)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		host  string
		roots []*x509.Certificate
		ok    bool
	}{
		{"api.example.com", []*x509.Certificate{ca.Leaf}, true},
		{"api.github.com", []*x509.Certificate{ca.Leaf}, true},
		{"evil.example.org", []*x509.Certificate{ca.Leaf}, false},
		{"api.example.com", []*x509.Certificate{other.Leaf}, false},
	} {
		t.Run(tc.host, func(t *testing.T) {
			leaf, err := m.Leaf(tc.host)
			if err != nil {
				t.Fatal(err)
			}
			again, _ := m.Leaf(tc.host)
			if again != leaf {
				t.Fatal("the leaf was minted twice")
			}
			pool := x509.NewCertPool()
			for _, r := range tc.roots {
				pool.AddCert(r)
			}
			_, err = leaf.Leaf.Verify(x509.VerifyOptions{DNSName: tc.host, Roots: pool, CurrentTime: now})
			if (err == nil) != tc.ok {
				t.Fatalf("verify: %v, want ok %v", err, tc.ok)
			}
		})
	}
}
