package tlsfiles

import (
	"crypto/tls"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"openvibe.network/agentsandbox/internal/testenv"
)

// servedSerial connects to a TLS listener using cfg and returns the serial
// of the certificate it presented.
func servedSerial(tb testing.TB, cfg *tls.Config) int64 {
	tb.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			_ = c.(*tls.Conn).Handshake()
			c.Close()
		}
	}()
	c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{InsecureSkipVerify: true})
	if err != nil {
		tb.Fatal(err)
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
}

func TestReload(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := testenv.WriteCertificate(t, dir, 1)
	c, err := Load(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	cfg := c.Config()
	if got := servedSerial(t, cfg); got != 1 {
		t.Fatalf("serves serial %d, want 1", got)
	}
	testenv.WriteCertificate(t, dir, 2)
	if err := c.Reload(); err != nil {
		t.Fatal(err)
	}
	if got := servedSerial(t, cfg); got != 2 {
		t.Fatalf("after Reload: serves serial %d, want 2", got)
	}
	if d := time.Until(c.NotAfter()); d < time.Hour || d > 2*time.Hour {
		t.Fatalf("NotAfter in %v, want the second certificate's (2 h)", d)
	}
	if err := os.WriteFile(keyFile, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := c.Reload(); err == nil || !strings.Contains(err.Error(), keyFile) {
		t.Fatalf("Reload of a broken key: %v, want an error naming %s", err, keyFile)
	}
	if got := servedSerial(t, cfg); got != 2 {
		t.Fatalf("after a failed Reload: serves serial %d, want 2 still", got)
	}
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	certFile, _ := testenv.WriteCertificate(t, dir, 1)
	for _, tc := range []struct {
		name, cert, key, want string
	}{
		{"NoKey", certFile, "", "give both"},
		{"MissingKey", certFile, filepath.Join(dir, "nope.pem"), "nope.pem"},
		{"KeyIsCert", certFile, certFile, "cert.pem"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Load(tc.cert, tc.key); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Load: %v, want an error with %q", err, tc.want)
			}
		})
	}
}
