package httpserve

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"openvibe.network/agentsandbox/internal/syncbuf"
)

// started is a Run in a goroutine.
type started struct {
	addr   string
	cancel context.CancelFunc
	done   chan error
	logs   *syncbuf.Buffer
}

// start runs cfg (on 127.0.0.1:0 with an address file unless set) and waits
// for the address file.
func start(t *testing.T, cfg Config) *started {
	t.Helper()
	if cfg.Addr == "" && cfg.Listener == nil {
		cfg.Addr = "127.0.0.1:0"
	}
	if cfg.AddrFile == "" {
		cfg.AddrFile = filepath.Join(t.TempDir(), "addr")
	}
	s := &started{done: make(chan error, 1), logs: &syncbuf.Buffer{}}
	cfg.Logger = slog.New(slog.NewJSONHandler(s.logs, nil))
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	t.Cleanup(cancel)
	go func() { s.done <- Run(ctx, cfg) }()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(cfg.AddrFile); err == nil && len(b) > 0 {
			s.addr = strings.TrimSpace(string(b))
			return s
		}
		select {
		case err := <-s.done:
			t.Fatalf("Run returned before listening: %v", err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	t.Fatal("no address file within 10 s")
	return nil
}

// stop cancels the context and returns Run's error.
func (s *started) stop(t *testing.T) error {
	t.Helper()
	s.cancel()
	select {
	case err := <-s.done:
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return within 30 s of the end of its context")
		return nil
	}
}

// messages returns the msg of each JSON log line.
func (s *started) messages(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(s.logs.String()), "\n") {
		var rec struct{ Msg string }
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		out = append(out, rec.Msg)
	}
	return out
}

func hello(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "hello") }

func get(t *testing.T, c *http.Client, url string) string {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func TestRunServesAndStops(t *testing.T) {
	s := start(t, Config{Handler: http.HandlerFunc(hello), ListenAttrs: []slog.Attr{slog.String("db", "sqlite")}})
	if got := get(t, http.DefaultClient, "http://"+s.addr+"/"); got != "hello" {
		t.Fatalf("GET = %q", got)
	}
	if err := s.stop(t); err != nil {
		t.Fatal(err)
	}
	if got, want := s.messages(t), []string{"listening", "shutting down", "stopped"}; !equal(got, want) {
		t.Fatalf("log lines %q, want %q", got, want)
	}
	if !strings.Contains(s.logs.String(), `"addr":"`+s.addr+`","tls":false,"db":"sqlite"`) {
		t.Fatalf("the listening line lacks the address and attributes: %s", s.logs.String())
	}
	if _, err := net.DialTimeout("tcp", s.addr, time.Second); err == nil {
		t.Fatal("still accepting connections after Run returned")
	}
}

func equal(a, b []string) bool { return strings.Join(a, "\x00") == strings.Join(b, "\x00") }

// TestRunDrains: a request in flight when the context ends finishes, and
// Run returns nil after it.
func TestRunDrains(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	s := start(t, Config{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		<-release
		_, _ = io.WriteString(w, "done")
	})})
	answer := make(chan string, 1)
	go func() {
		resp, err := http.Get("http://" + s.addr + "/")
		if err != nil {
			answer <- "error: " + err.Error()
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		answer <- string(b)
	}()
	<-entered
	s.cancel()
	// Once the listener refuses connections, Run is in Shutdown, waiting
	// for the request.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		c, err := net.DialTimeout("tcp", s.addr, time.Second)
		if err != nil {
			break
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatal("still accepting connections 10 s after the end of the context")
		}
	}
	select {
	case err := <-s.done:
		t.Fatalf("Run returned (%v) while a request was in flight", err)
	default:
	}
	close(release)
	if got := <-answer; got != "done" {
		t.Fatalf("the request in flight got %q, want done", got)
	}
	if err := <-s.done; err != nil {
		t.Fatal(err)
	}
}

// TestRunShutdownTimeout: a request that outlives the bound makes Run
// close it and say so.
func TestRunShutdownTimeout(t *testing.T) {
	entered := make(chan struct{})
	s := start(t, Config{ShutdownTimeout: 200 * time.Millisecond, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		<-r.Context().Done()
	})})
	go func() {
		if resp, err := http.Get("http://" + s.addr + "/"); err == nil {
			resp.Body.Close()
		}
	}()
	<-entered
	if err := s.stop(t); err == nil || !strings.Contains(err.Error(), "still in flight after 200ms") {
		t.Fatalf("Run = %v, want the shutdown timeout", err)
	}
}

// TestRunTLS serves HTTPS with a certificate made here.
func TestRunTLS(t *testing.T) {
	cert, pool := selfSigned(t)
	s := start(t, Config{Handler: http.HandlerFunc(hello), TLS: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}})
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	if got := get(t, c, "https://"+s.addr+"/"); got != "hello" {
		t.Fatalf("GET over TLS = %q", got)
	}
	if err := s.stop(t); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(s.logs.String(), `"tls":true`) {
		t.Fatalf("the listening line does not say TLS: %s", s.logs.String())
	}
}

func selfSigned(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool
}

// TestRunListener serves a listener the caller made.
func TestRunListener(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := start(t, Config{Listener: ln, Handler: http.HandlerFunc(hello)})
	if s.addr != ln.Addr().String() {
		t.Fatalf("address file %q, want %q", s.addr, ln.Addr())
	}
	if got := get(t, http.DefaultClient, "http://"+s.addr+"/"); got != "hello" {
		t.Fatalf("GET = %q", got)
	}
	if err := s.stop(t); err != nil {
		t.Fatal(err)
	}
}

func TestRunErrors(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	h := http.HandlerFunc(hello)
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"ErrNoHandler", Config{Addr: "127.0.0.1:0"}, "config has no handler"},
		{"ErrNoAddress", Config{Handler: h}, "neither an address nor a listener"},
		{"ErrAddressTaken", Config{Handler: h, Addr: taken.Addr().String()}, "listen:"},
		{"ErrAddrFile", Config{Handler: h, Addr: "127.0.0.1:0", AddrFile: filepath.Join(t.TempDir(), "no", "such", "dir", "addr")}, "address file:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			tc.cfg.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
			err := Run(t.Context(), tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Run = %v, want an error saying %q", err, tc.want)
			}
			if strings.Contains(logs.String(), "listening") {
				t.Fatalf("a failed Run logged listening: %s", logs.String())
			}
		})
	}
}
