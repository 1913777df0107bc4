package worker

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"openvibe.network/agentsandbox"
	"openvibe.network/agentsandbox/internal/brokerca"
)

// brokerCanary is the credential broker check's upstream: an HTTPS server
// on the host's loopback that stands for the probe secret's host, with a
// certificate of a CA of its own (made for this probe only, which the
// proxy is given as the upstream trust for the probe sandbox alone). It
// records what each request brought; the proxy reaches it through a dial
// hook, never by DNS.
type brokerCanary struct {
	ln    net.Listener
	srv   *http.Server
	roots *x509.CertPool
	done  chan struct{}

	mu   sync.Mutex
	seen []canaryRequest
}

// canaryRequest is what the canary received in one request: the Host
// header, the TLS server name and the Authorization values.
type canaryRequest struct {
	host, sni string
	auth      []string
}

// startBrokerCanary starts the canary for host on 127.0.0.1.
func startBrokerCanary(host string, now time.Time) (*brokerCanary, error) {
	ca, err := brokerca.New("self-test-canary", []string{host}, now)
	if err != nil {
		return nil, fmt.Errorf("make the canary's CA: %w", err)
	}
	m, err := brokerca.NewMinter(ca, nil)
	if err != nil {
		return nil, fmt.Errorf("make the canary's CA: %w", err)
	}
	leaf, err := m.Leaf(host)
	if err != nil {
		return nil, fmt.Errorf("make the canary's certificate: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("open the canary's listener: %w", err)
	}
	c := &brokerCanary{ln: ln, roots: x509.NewCertPool(), done: make(chan struct{})}
	c.roots.AddCert(ca.Leaf)
	c.srv = &http.Server{
		Handler:           http.HandlerFunc(c.serve),
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{*leaf}, MinVersion: tls.VersionTLS12},
		ReadHeaderTimeout: probeTimeout,
		ErrorLog:          log.New(io.Discard, "", 0),
	}
	go func() {
		defer close(c.done)
		_ = c.srv.ServeTLS(ln, "", "")
	}()
	return c, nil
}

func (c *brokerCanary) serve(w http.ResponseWriter, r *http.Request) {
	req := canaryRequest{host: r.Host, auth: slices.Clone(r.Header.Values("Authorization"))}
	if r.TLS != nil {
		req.sni = r.TLS.ServerName
	}
	c.mu.Lock()
	c.seen = append(c.seen, req)
	c.mu.Unlock()
	_, _ = io.WriteString(w, "canary\n")
}

// egress is what the proxy is told of the canary for host.
func (c *brokerCanary) egress(host string) *agentsandbox.EgressCanary {
	addr := c.ln.Addr().String()
	return &agentsandbox.EgressCanary{Host: host, Roots: c.roots, Dial: func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", addr)
	}}
}

// close stops the canary and returns what it received.
func (c *brokerCanary) close() []canaryRequest {
	_ = c.srv.Close()
	<-c.done
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.seen
}

// maxScanBytes bounds what scanForSecrets reads in all (a probe sandbox's
// directories hold a few hundred KiB).
const maxScanBytes = 64 << 20

// scanForSecrets looks, from the host, in every regular file under dirs
// (the sandbox's directories: its writable paths and its trust bundle are
// made of them) for value and for a private key, and returns a problem
// for each file that holds one, naming the file, never the value.
func scanForSecrets(dirs []string, value string) []string {
	var problems []string
	budget := int64(maxScanBytes)
	for _, dir := range dirs {
		err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
			if err != nil || !e.Type().IsRegular() {
				return nil // gone, unreadable or not a file: nothing of it is in the sandbox either
			}
			if budget <= 0 {
				return errors.New("read more than the scan's bound")
			}
			f, err := os.Open(p)
			if err != nil {
				return nil
			}
			defer f.Close()
			b, _ := io.ReadAll(io.LimitReader(f, budget))
			budget -= int64(len(b))
			switch {
			case bytes.Contains(b, []byte(value)):
				problems = append(problems, fmt.Sprintf("the sandbox's file %s holds the probe secret's value", p))
			case bytes.Contains(b, []byte("PRIVATE KEY")):
				problems = append(problems, fmt.Sprintf("the sandbox's file %s holds a private key", p))
			}
			return nil
		})
		if err != nil {
			problems = append(problems, fmt.Sprintf("the sandbox's files under %s were not all searched: %v", dir, err))
		}
	}
	return problems
}
