// Package tlsfiles serves a TLS certificate and key kept in files, and
// loads them again on demand (a worker reloads on SIGHUP), so a renewed
// certificate is taken without a restart. A reload that fails keeps the
// certificate in use.
package tlsfiles

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
)

// Certificate is the certificate of a certificate file and a key file.
type Certificate struct {
	certFile, keyFile string
	cert              atomic.Pointer[tls.Certificate]
}

// Load reads certFile (PEM, the chain after the leaf) and keyFile (PEM).
// Errors say which file is wrong and how.
func Load(certFile, keyFile string) (*Certificate, error) {
	if certFile == "" || keyFile == "" {
		return nil, errors.New("tls: give both a certificate file and a key file")
	}
	c := &Certificate{certFile: certFile, keyFile: keyFile}
	if err := c.Reload(); err != nil {
		return nil, err
	}
	return c, nil
}

// Reload reads the files again; on error the certificate in use stays.
func (c *Certificate) Reload() error {
	cert, err := tls.LoadX509KeyPair(c.certFile, c.keyFile)
	if err != nil {
		return fmt.Errorf("tls: load %s and %s: %w", c.certFile, c.keyFile, err)
	}
	if cert.Leaf == nil {
		if cert.Leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return fmt.Errorf("tls: parse %s: %w", c.certFile, err)
		}
	}
	c.cert.Store(&cert)
	return nil
}

// NotAfter is when the certificate in use expires.
func (c *Certificate) NotAfter() time.Time { return c.cert.Load().Leaf.NotAfter }

// Config is a server configuration that always presents the certificate
// last loaded (TLS 1.2 at least).
func (c *Certificate) Config() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return c.cert.Load(), nil
		},
	}
}
