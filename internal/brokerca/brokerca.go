// Package brokerca is the per-sandbox certificate authority of the egress
// proxy's credential broker: an ECDSA P-256 CA made when a sandbox with
// secrets is created, whose private key lives only in the worker's memory,
// and a Minter that issues (and caches) a leaf certificate per host the
// proxy intercepts for that sandbox.
//
// The CA is name-constrained to the hosts of the sandbox's secrets, so a
// leaf for any other name fails verification even if it were ever minted.
package brokerca

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"sync"
	"time"
)

// Validity bounds the CA's and the leaves' lifetime: a sandbox lives at
// most 30 minutes; a day leaves room for a host clock that moves.
const Validity = 24 * time.Hour

// clockSkew backdates NotBefore for clients whose clock is a little behind.
const clockSkew = time.Hour

// New makes a CA for sandbox id whose leaves may only name hosts matching
// patterns (the secrets' host patterns: "api.example.com" or
// "*.example.com", optionally with a port, which is ignored). now is the
// clock. The certificate's Leaf is set.
func New(id string, patterns []string, now time.Time) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("new sandbox CA: %w", err)
	}
	var domains []string
	for _, p := range patterns {
		h := p
		if i := strings.LastIndexByte(h, ':'); i >= 0 {
			h = h[:i]
		}
		domains = append(domains, strings.TrimPrefix(h, "*."))
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "agentsandbox sandbox " + id + " egress CA", Organization: []string{"agentsandbox"}},
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              now.Add(Validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
		PermittedDNSDomains:   domains,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("new sandbox CA: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("new sandbox CA: %w", err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: cert}, nil
}

// CertPEM is the PEM form of ca's certificate (public: it goes into the
// sandbox's trust bundle).
func CertPEM(ca tls.Certificate) []byte {
	if len(ca.Certificate) == 0 {
		return nil
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Certificate[0]})
}

// Minter issues leaf certificates signed by one CA, one per host, cached
// for the CA's life. It is safe for concurrent use.
type Minter struct {
	ca  *x509.Certificate
	key *ecdsa.PrivateKey
	now func() time.Time

	mu     sync.Mutex
	leaves map[string]*tls.Certificate
}

// NewMinter returns a Minter for ca (made by New). now is the clock (nil:
// time.Now).
func NewMinter(ca tls.Certificate, now func() time.Time) (*Minter, error) {
	key, ok := ca.PrivateKey.(*ecdsa.PrivateKey)
	if !ok || ca.Leaf == nil {
		return nil, errors.New("new minter: the CA is not one of brokerca.New")
	}
	if now == nil {
		now = time.Now
	}
	return &Minter{ca: ca.Leaf, key: key, now: now, leaves: map[string]*tls.Certificate{}}, nil
}

// Leaf returns the certificate for host (a DNS name in lower case),
// minting it at the first call.
func (m *Minter) Leaf(host string) (*tls.Certificate, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c, ok := m.leaves[host]; ok {
		return c, nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("mint leaf for %s: %w", host, err)
	}
	now := m.now()
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: host},
		DNSNames:     []string{host},
		NotBefore:    now.Add(-clockSkew),
		NotAfter:     now.Add(Validity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, m.ca, &key.PublicKey, m.key)
	if err != nil {
		return nil, fmt.Errorf("mint leaf for %s: %w", host, err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("mint leaf for %s: %w", host, err)
	}
	c := &tls.Certificate{Certificate: [][]byte{der, m.ca.Raw}, PrivateKey: key, Leaf: leaf}
	m.leaves[host] = c
	return c, nil
}

// serial returns a random 128-bit serial number.
func serial() *big.Int {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	b[0] &= 0x7f
	return new(big.Int).SetBytes(b)
}
