// Package registrytest runs Debian's docker-registry on loopback for tests
// (plain HTTP or TLS, with or without htpasswd auth), pushes images to it
// with go-containerregistry, and builds the test images: a tiny one from
// busybox-static, and layers crafted byte for byte.
package registrytest

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"golang.org/x/crypto/bcrypt"
	"openvibe.network/agentsandbox/internal/syncbuf"
	"openvibe.network/agentsandbox/internal/testenv"
)

// Options of a registry.
type Options struct {
	// User and Password, when set, make the registry ask for them (htpasswd).
	User, Password string
	// TLSName, when set, makes the registry serve TLS with a certificate for
	// that name (references then use it; Dial maps it to loopback).
	TLSName string
}

// Registry is a docker-registry process serving on loopback for one test.
type Registry struct {
	// Addr is where it listens (127.0.0.1:PORT).
	Addr string
	// Name is its host in references: Addr, or TLSName with its port.
	Name string
	// CertPool trusts its certificate (TLS only).
	CertPool *x509.CertPool
	opts     Options
}

// Start starts a registry that the end of the test stops. It skips, or
// fails in CI, without docker-registry (apt-get install docker-registry).
func Start(tb testing.TB, o Options) *Registry {
	tb.Helper()
	bin := testenv.RequireBinary(tb, "docker-registry", "apt-get install docker-registry (scripts/install-deps.sh)")
	dir := tb.TempDir()
	r := &Registry{opts: o}
	var extra strings.Builder
	if o.User != "" {
		hash, err := bcrypt.GenerateFromPassword([]byte(o.Password), bcrypt.MinCost)
		if err != nil {
			tb.Fatal(err)
		}
		pw := filepath.Join(dir, "htpasswd")
		if err := os.WriteFile(pw, []byte(o.User+":"+string(hash)+"\n"), 0o600); err != nil {
			tb.Fatal(err)
		}
		fmt.Fprintf(&extra, "auth:\n  htpasswd:\n    realm: test\n    path: %s\n", pw)
	}
	tlsConf := ""
	if o.TLSName != "" {
		cert, key, pool := writeCert(tb, dir, o.TLSName)
		r.CertPool = pool
		tlsConf = fmt.Sprintf("  tls:\n    certificate: %s\n    key: %s\n", cert, key)
	}
	// A free port, taken again by the registry: another test may take it in
	// between, so a start that fails is tried again.
	var lastErr string
	for range 5 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatal(err)
		}
		r.Addr = ln.Addr().String()
		ln.Close()
		conf := filepath.Join(dir, "config.yml")
		body := fmt.Sprintf("version: 0.1\nlog:\n  level: warn\n  accesslog:\n    disabled: true\n"+
			"storage:\n  filesystem:\n    rootdirectory: %s\n  delete:\n    enabled: true\n"+
			"http:\n  addr: %s\n%s%s", filepath.Join(dir, "data"), r.Addr, tlsConf, extra.String())
		if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
			tb.Fatal(err)
		}
		var stderr syncbuf.Buffer
		cmd := exec.Command(bin, "serve", conf)
		cmd.Stdout, cmd.Stderr = &stderr, &stderr
		if err := cmd.Start(); err != nil {
			tb.Fatalf("start docker-registry: %v", err)
		}
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		if r.waitUp(exited) {
			tb.Cleanup(func() {
				_ = cmd.Process.Kill()
				<-exited
			})
			r.Name = r.Addr
			if o.TLSName != "" {
				_, port, _ := net.SplitHostPort(r.Addr)
				r.Name = o.TLSName + ":" + port
			}
			return r
		}
		_ = cmd.Process.Kill()
		<-exited
		lastErr = stderr.String()
	}
	tb.Fatalf("docker-registry did not start: %s", lastErr)
	return nil
}

// waitUp waits until the registry answers /v2/ (any status), or exits.
func (r *Registry) waitUp(exited <-chan struct{}) bool {
	c := r.client()
	scheme := "http"
	if r.opts.TLSName != "" {
		scheme = "https"
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return false
		default:
		}
		resp, err := c.Get(scheme + "://" + r.Addr + "/v2/")
		if err == nil {
			resp.Body.Close()
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

// client is an HTTP client that reaches the registry whatever the name.
func (r *Registry) client() *http.Client {
	return &http.Client{Transport: r.Transport(), Timeout: 5 * time.Second}
}

// Transport reaches the registry by its Name (TLS: its certificate
// trusted), without any proxy.
func (r *Registry) Transport() *http.Transport {
	return &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, r.Addr)
		},
		TLSClientConfig: &tls.Config{RootCAs: r.CertPool, ServerName: r.opts.TLSName},
	}
}

// Ref is the reference of repoTag ("team/py:1") on this registry.
func (r *Registry) Ref(repoTag string) string { return r.Name + "/" + repoTag }

func (r *Registry) remoteOptions() []remote.Option {
	opts := []remote.Option{remote.WithTransport(r.Transport())}
	if r.opts.User != "" {
		opts = append(opts, remote.WithAuth(&authn.Basic{Username: r.opts.User, Password: r.opts.Password}))
	}
	return opts
}

func (r *Registry) parse(tb testing.TB, repoTag string) name.Reference {
	tb.Helper()
	var opts []name.Option
	if r.opts.TLSName == "" {
		opts = append(opts, name.Insecure)
	}
	ref, err := name.ParseReference(r.Ref(repoTag), opts...)
	if err != nil {
		tb.Fatal(err)
	}
	return ref
}

// Push pushes img as repoTag and returns its digest.
func (r *Registry) Push(tb testing.TB, repoTag string, img v1.Image) v1.Hash {
	tb.Helper()
	if err := remote.Write(r.parse(tb, repoTag), img, r.remoteOptions()...); err != nil {
		tb.Fatalf("push %s: %v", repoTag, err)
	}
	d, err := img.Digest()
	if err != nil {
		tb.Fatal(err)
	}
	return d
}

// PushIndex pushes an image index as repoTag and returns its digest.
func (r *Registry) PushIndex(tb testing.TB, repoTag string, idx v1.ImageIndex) v1.Hash {
	tb.Helper()
	if err := remote.WriteIndex(r.parse(tb, repoTag), idx, r.remoteOptions()...); err != nil {
		tb.Fatalf("push index %s: %v", repoTag, err)
	}
	d, err := idx.Digest()
	if err != nil {
		tb.Fatal(err)
	}
	return d
}

// writeCert writes a self-signed certificate for host (and loopback) into
// dir and returns its files and a pool that trusts it.
func writeCert(tb testing.TB, dir, host string) (certFile, keyFile string, pool *x509.CertPool) {
	tb.Helper()
	certFile, keyFile = testenv.WriteCertificate(tb, dir, 1, host)
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		tb.Fatal(err)
	}
	pool = x509.NewCertPool()
	if !pool.AppendCertsFromPEM(certPEM) {
		tb.Fatalf("no certificate in %s", certFile)
	}
	return certFile, keyFile, pool
}

// Gzip is data compressed with gzip.
func Gzip(tb testing.TB, data []byte) []byte {
	tb.Helper()
	var buf bytes.Buffer
	zw := newGzip(&buf)
	if _, err := zw.Write(data); err != nil {
		tb.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}
