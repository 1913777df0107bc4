package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestServeRefusesUnwritableStore: a database file that can be read but
// not written (in a directory where SQLite can make its shared-memory file,
// so the file opens and reads) stops serve at start, with a message that
// says so. As root, who could write anyway, serve runs as nobody.
func TestServeRefusesUnwritableStore(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "live.db")
	setup(t, "sqlite:"+path, "", 1)
	cmd := exec.Command(binary, "serve", "--listen", "127.0.0.1:0", "--db", "sqlite:"+path)
	files, _ := filepath.Glob(path + "*")
	dirMode, fileMode := os.FileMode(0o755), os.FileMode(0o444)
	if os.Geteuid() == 0 {
		dirMode, fileMode = 0o777, 0o644
		if err := os.Chmod(filepath.Dir(dir), 0o755); err != nil {
			t.Fatal(err)
		}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	}
	if err := os.Chmod(dir, dirMode); err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if err := os.Chmod(f, fileMode); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan struct{})
	var out []byte
	var err error
	go func() { out, err = cmd.CombinedOutput(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		_ = cmd.Process.Kill()
		t.Fatal("serve on an unwritable store did not exit")
	}
	if err == nil || strings.Contains(string(out), `"msg":"listening"`) || !strings.Contains(string(out), "store not writable, refusing to start") {
		t.Fatalf("serve on an unwritable store: %v\n%s", err, out)
	}
	// The read-only commands still work there.
	list := exec.Command(binary, "admin", "--db", "sqlite:"+path, "person", "list")
	list.SysProcAttr = cmd.SysProcAttr
	if out, err := list.CombinedOutput(); err != nil || !strings.Contains(string(out), `"name":"Ada"`) {
		t.Fatalf("person list on the unwritable store: %v\n%s", err, out)
	}
}

// TestServeSettings starts serve from a config file and the environment
// only (no flag but --config), at log level warn.
func TestServeSettings(t *testing.T) {
	dir := t.TempDir()
	db := "sqlite:" + filepath.Join(dir, "live.db")
	setup(t, db, "", 1)
	addrFile := filepath.Join(dir, "addr")
	config := filepath.Join(dir, "ovlive.toml")
	if err := os.WriteFile(config, []byte("listen = \"127.0.0.1:0\"\naddr-file = \""+addrFile+"\"\nlog-level = \"warn\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary, "serve", "--config", config)
	cmd.Env = append(os.Environ(), "OVLIVE_DB="+db)
	var logs strings.Builder
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addr := waitFile(t, addrFile)
	resp, err := http.Get("http://" + addr + "/healthz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("healthz: %v %v\n%s", resp, err, logs.String())
	}
	resp.Body.Close()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("serve after SIGTERM: %v\n%s", err, logs.String())
	}
	if logs.Len() != 0 {
		t.Fatalf("at log level warn serve logged:\n%s", logs.String())
	}
}

// waitFile waits (bounded) for path to hold a line and returns it.
func waitFile(t *testing.T, path string) string {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if b, err := os.ReadFile(path); err == nil && len(b) > 0 {
			return strings.TrimSpace(string(b))
		}
	}
	t.Fatalf("%s was not written within a minute", path)
	return ""
}

// TestServeTLS serves HTTPS with a certificate from files, and reports the
// linked version in --version and in ovlive_build_info.
func TestServeTLS(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, pool := writeCert(t, dir)
	w := setup(t, sqliteDB(t), "", 1)
	s := startServer(t, "--db", w.db, "--tls-cert", certFile, "--tls-key", keyFile)
	c := &http.Client{Timeout: time.Minute, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := c.Get("https://" + s.addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `ovlive_build_info{goversion="go`) || !strings.Contains(string(body), `version="`+linkedVersion+`"`) {
		t.Fatalf("metrics over TLS: %d\n%s", resp.StatusCode, body)
	}
	out, err := exec.Command(binary, "--version").Output()
	if err != nil || !strings.HasPrefix(string(out), "ovlive "+linkedVersion+" (") {
		t.Fatalf("--version: %q, %v", out, err)
	}
	s.stop(t)
}

// writeCert writes a self-signed certificate for 127.0.0.1 and its key.
func writeCert(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(leaf)
	return certFile, keyFile, pool
}
