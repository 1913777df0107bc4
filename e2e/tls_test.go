package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"openvibe.network/agentsandbox/client"
	"openvibe.network/agentsandbox/internal/testenv"
)

// TestWorkerTLSReload: the worker's API speaks HTTPS with the certificate
// it is given, and takes a renewed one on SIGHUP without a restart; a
// broken renewal keeps the old one and the worker serving.
func TestWorkerTLSReload(t *testing.T) {
	bin := binaries(t)
	dir := t.TempDir()
	certFile, keyFile := testenv.WriteCertificate(t, dir, 1)
	apiToken := filepath.Join(dir, "api.token")
	if err := os.WriteFile(apiToken, []byte("e2e-api-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	wp := start(t, filepath.Join(bin, "codes-sandbox"), "serve", "--listen", "127.0.0.1:0", "--addr-file", filepath.Join(dir, "addr"),
		"--api-token-file", apiToken, "--capacity", "1", "--overcommit", "--pool", "0", "--tls-cert-file", certFile, "--tls-key-file", keyFile, "--browser", "off")
	addr := strings.TrimPrefix(wp.addr(t, filepath.Join(dir, "addr")), "http://")

	// serial asks the API's status over HTTPS, trusting only the
	// certificate now in certFile, and returns the serial it was served.
	// Until a renewal is taken, the worker serves a certificate the client
	// no longer trusts, so a failed handshake is an answer to wait past,
	// not a failure; last keeps it for when the wait gives up.
	var last error
	serial := func() int64 {
		t.Helper()
		pem, err := os.ReadFile(certFile)
		if err != nil {
			t.Fatal(err)
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(pem)
		var got int64
		hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool,
			VerifyConnection: func(cs tls.ConnectionState) error {
				got = cs.PeerCertificates[0].SerialNumber.Int64()
				return nil
			}}}}
		if _, last = client.NewWorker("https://"+addr, "e2e-api-token", hc).Status(context.Background()); last != nil {
			return 0
		}
		return got
	}
	waitFor(t, "the API to answer over https", func() bool { return serial() == 1 }, wp)

	testenv.WriteCertificate(t, dir, 2)
	if err := wp.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() && last != nil {
			t.Logf("the last status over https failed: %v", last)
		}
	})
	waitFor(t, "the renewed certificate after SIGHUP", func() bool { return serial() == 2 }, wp)

	if err := os.WriteFile(keyFile, []byte("broken"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := wp.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the log to say the broken renewal was not taken", func() bool {
		return strings.Contains(wp.stderr.String(), "TLS certificate not reloaded; the old one stays")
	}, wp)
	if got := serial(); got != 2 {
		t.Fatalf("after a broken renewal the API serves serial %d (0: the status failed: %v), want 2 still", got, last)
	}
}
