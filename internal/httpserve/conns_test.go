package httpserve

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// jsonError is the tests' ErrorBody.
func jsonError(status int, text string) []byte {
	return fmt.Appendf(nil, `{"error":{"status":%d,"text":%q}}`, status, strings.TrimSpace(text))
}

// dialFrom opens a connection to addr from the loopback address from
// (127.0.0.0/8: every one of them is this host's).
func dialFrom(t *testing.T, from, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial from %s: %v", from, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// request sends one keep-alive request on c and reads its answer; the
// connection stays open and idle afterwards.
func request(t *testing.T, c net.Conn) (*http.Response, error) {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	defer func() { _ = c.SetDeadline(time.Time{}) }()
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		return nil, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return nil, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp, nil
}

// closedByServer reports whether the server closed c within a second.
func closedByServer(c net.Conn) bool {
	_ = c.SetReadDeadline(time.Now().Add(time.Second))
	_, err := c.Read(make([]byte, 1))
	return err == io.EOF
}

// TestConnCaps: a client may hold at most MaxConnsPerClient connections
// (a trusted proxy's are counted only overall); at MaxConns a new
// connection takes the place of an idle one, or of one open for a second
// without a request, and is closed when every connection is busy.
func TestConnCaps(t *testing.T) {
	release, entered := make(chan struct{}), make(chan struct{}, 16)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/busy" {
			entered <- struct{}{}
			<-release
		}
		hello(w, r)
	})
	s := start(t, Config{Handler: h, MaxConns: 6, MaxConnsPerClient: 2, TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.9/32")}})
	t.Run("PerClient", func(t *testing.T) {
		a, b := dialFrom(t, "127.0.0.2", s.addr), dialFrom(t, "127.0.0.2", s.addr)
		for _, c := range []net.Conn{a, b} {
			if _, err := request(t, c); err != nil {
				t.Fatal(err)
			}
		}
		if third := dialFrom(t, "127.0.0.2", s.addr); !closedByServer(third) {
			t.Fatal("a third connection from one client was not closed")
		}
		if _, err := request(t, dialFrom(t, "127.0.0.3", s.addr)); err != nil {
			t.Fatalf("another client: %v", err)
		}
		for _, c := range []net.Conn{a, b} { // still served
			if _, err := request(t, c); err != nil {
				t.Fatal(err)
			}
		}
		a.Close()
		b.Close()
	})
	t.Run("TrustedProxy", func(t *testing.T) {
		for range 3 {
			if _, err := request(t, dialFrom(t, "127.0.0.9", s.addr)); err != nil {
				t.Fatalf("a trusted proxy's connection: %v", err)
			}
		}
	})
	t.Run("EvictsIdle", func(t *testing.T) {
		var first net.Conn
		for i := range 12 {
			c := dialFrom(t, fmt.Sprintf("127.0.1.%d", i+1), s.addr)
			if _, err := request(t, c); err != nil {
				t.Fatalf("connection %d at the cap: %v", i, err)
			}
			if i == 0 {
				first = c
			}
		}
		if !closedByServer(first) {
			t.Fatal("the connection idle the longest was not closed to make room")
		}
	})
	t.Run("EvictsSilentAfterASecond", func(t *testing.T) {
		for i := range 6 { // open, and send nothing
			c := dialFrom(t, fmt.Sprintf("127.0.4.%d", i+1), s.addr)
			_ = c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
			_, _ = c.Read(make([]byte, 1)) // admitted (the read times out) or not (EOF): either way on the server by now
		}
		if c := dialFrom(t, "127.0.4.99", s.addr); !closedByServer(c) {
			t.Fatal("a connection past the cap took the place of one open for less than a second")
		}
		time.Sleep(evictAfter + 100*time.Millisecond)
		if _, err := request(t, dialFrom(t, "127.0.4.100", s.addr)); err != nil {
			t.Fatalf("a connection past the cap, with others silent for a second: %v", err)
		}
	})
	t.Run("AllBusy", func(t *testing.T) {
		for i := range 6 {
			c := dialFrom(t, fmt.Sprintf("127.0.2.%d", i+1), s.addr)
			if _, err := io.WriteString(c, "GET /busy HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
				t.Fatal(err)
			}
			select {
			case <-entered:
			case <-time.After(5 * time.Second):
				t.Fatalf("busy request %d was not served", i)
			}
		}
		time.Sleep(evictAfter + 100*time.Millisecond)
		if c := dialFrom(t, "127.0.3.1", s.addr); !closedByServer(c) {
			t.Fatal("a connection past the cap, with every other busy, was not closed")
		}
	})
	close(release)
	if err := s.stop(t); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(s.logs.String(), `"msg":"connections refused"`) {
		t.Errorf("no line says connections were refused:\n%s", s.logs)
	}
}

// TestIdleTimeout: a connection idle past IdleTimeout is closed.
func TestIdleTimeout(t *testing.T) {
	if got := newServer(Config{}, slog.New(slog.DiscardHandler)).IdleTimeout; got != 30*time.Second {
		t.Fatalf("default idle timeout %s, want 30s (about a worker's check-in interval)", got)
	}
	s := start(t, Config{Handler: http.HandlerFunc(hello), IdleTimeout: 200 * time.Millisecond})
	c := dialFrom(t, "127.0.0.1", s.addr)
	if _, err := request(t, c); err != nil {
		t.Fatal(err)
	}
	time.Sleep(400 * time.Millisecond)
	if !closedByServer(c) {
		t.Fatal("an idle connection outlived the idle timeout")
	}
}

// TestGoErrorsGetTheBody: the answers net/http writes itself (a malformed
// request 400, a header too large 431, an unsupported transfer coding 501)
// carry ErrorBody's body, over plain HTTP and over TLS; plain HTTP sent to
// the TLS port is answered too; failed handshakes are logged at most every
// 10 s.
func TestGoErrorsGetTheBody(t *testing.T) {
	cert, _ := selfSigned(t)
	for _, useTLS := range []bool{false, true} {
		t.Run(map[bool]string{false: "HTTP", true: "TLS"}[useTLS], func(t *testing.T) {
			cfg := Config{Handler: http.HandlerFunc(hello), ErrorBody: jsonError, MaxHeaderBytes: 1 << 10}
			if useTLS {
				cfg.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
			}
			s := start(t, cfg)
			dial := func() net.Conn {
				c := dialFrom(t, "127.0.0.1", s.addr)
				if useTLS {
					tc := tls.Client(c, &tls.Config{InsecureSkipVerify: true}) // the test's own certificate
					t.Cleanup(func() { _ = tc.Close() })
					return tc
				}
				return c
			}
			for _, tc := range []struct {
				name, request string
				status        int
			}{
				{"Malformed", "GET / HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n", 400},
				{"NoHost", "GET / HTTP/1.1\r\n\r\n", 400},
				{"HeaderTooLarge", "GET / HTTP/1.1\r\nHost: x\r\nX: " + strings.Repeat("a", 8<<10) + "\r\n\r\n", 431},
				{"TransferCoding", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", 501},
			} {
				t.Run(tc.name, func(t *testing.T) {
					c := dial()
					_ = c.SetDeadline(time.Now().Add(5 * time.Second))
					if _, err := io.WriteString(c, tc.request); err != nil {
						t.Fatal(err)
					}
					resp, err := http.ReadResponse(bufio.NewReader(c), nil)
					if err != nil {
						t.Fatal(err)
					}
					body, _ := io.ReadAll(resp.Body)
					if resp.StatusCode != tc.status || resp.Header.Get("Content-Type") != "application/json" || !strings.HasPrefix(string(body), fmt.Sprintf(`{"error":{"status":%d,`, tc.status)) {
						t.Fatalf("%d %s: %s; want %d with the JSON body", resp.StatusCode, resp.Header.Get("Content-Type"), body, tc.status)
					}
				})
			}
			if !useTLS {
				return
			}
			c := dialFrom(t, "127.0.0.1", s.addr)
			_ = c.SetDeadline(time.Now().Add(5 * time.Second))
			if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
				t.Fatal(err)
			}
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil || resp.StatusCode != 400 || resp.Header.Get("Content-Type") != "application/json" {
				t.Fatalf("plain HTTP to the TLS port: %v %v", resp, err)
			}
			for range 20 {
				c := dialFrom(t, "127.0.0.1", s.addr)
				_, _ = io.WriteString(c, "\x16\x03\x01\x00\x05hello")
				_ = c.Close()
			}
			deadline := time.Now().Add(5 * time.Second)
			for !strings.Contains(s.logs.String(), `"TLS handshakes failed"`) && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			if n := strings.Count(s.logs.String(), `"TLS handshakes failed"`); n != 1 {
				t.Fatalf("%d lines for 21 failed handshakes, want 1:\n%s", n, s.logs)
			}
		})
	}
}
