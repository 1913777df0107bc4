package main

import (
	"bufio"
	"crypto/tls"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestUsageErrorsAreShort: a usage error is the reason in one line, the
// synopsis and where the rest is, not the whole usage; an unknown OVLIVE_
// variable is an error as an unknown config key is; a bad duration says
// how to write one, from the command line and the environment alike.
func TestUsageErrorsAreShort(t *testing.T) {
	db := "sqlite:" + filepath.Join(t.TempDir(), "live.db")
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"TLSHalf", []string{"serve", "--db", db, "--tls-cert", "x"}, nil, "give both --tls-cert and --tls-key, or neither"},
		{"BadFlag", []string{"serve", "--db", db, "--lisen", "x"}, nil, "flag provided but not defined: -lisen"},
		{"AdminBadFlag", []string{"admin", "--db", db, "person", "add", "--nmae", "x"}, nil, "flag provided but not defined: -nmae"},
		{"UnknownVariable", []string{"serve", "--db", db}, map[string]string{"OVLIVE_LISTN": "127.0.0.1:1"}, "unknown variable OVLIVE_LISTN in the environment"},
		{"UnknownVariableAdmin", []string{"admin", "--db", db, "person", "list"}, map[string]string{"OVLIVE_DATABASE": "x"}, "unknown variable OVLIVE_DATABASE"},
		{"BadDurationEnv", []string{"serve", "--db", db}, map[string]string{"OVLIVE_SHUTDOWN_TIMEOUT": "abc"},
			`OVLIVE_SHUTDOWN_TIMEOUT="abc": not a duration: write a number and a unit, such as 30s, 2m or 1h30m`},
		{"BadDurationFlag", []string{"serve", "--db", db, "--shutdown-timeout", "abc"}, nil, "not a duration: write a number and a unit, such as 30s, 2m or 1h30m"},
		{"BadBoolEnv", []string{"serve", "--db", db}, map[string]string{"OVLIVE_SECURE_COOKIES": "yes"}, "not a boolean: write true or false"},
		{"BadProxy", []string{"serve", "--db", db, "--trusted-proxy", "10.0.0.0/99"}, nil, `"10.0.0.0/99" is not an IP address or prefix`},
		{"BadTTL", []string{"admin", "--db", db, "token", "issue", "--person", "p", "--ttl", "soon"}, nil, "not a duration"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			out, errText := runCode(t, 2, tc.args...)
			lines := strings.Split(strings.TrimRight(errText, "\n"), "\n")
			if out != "" || !strings.Contains(lines[0], tc.want) || len(lines) > 3 || !strings.Contains(errText, "--help") {
				t.Fatalf("stdout %q, stderr:\n%s\nwant the reason (%q) in its first line, at most 3 lines, and a hint to run --help", out, errText, tc.want)
			}
		})
	}
}

// TestServeAnswersAsJSON: the answers net/http writes itself (a malformed
// request, a header too large) are JSON like every other, a browser
// opening / goes on to /streams, and over TLS every answer says
// Strict-Transport-Security.
func TestServeAnswersAsJSON(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, pool := writeCert(t, dir)
	w := setup(t, sqliteDB(t), "", 1)
	plain := startServer(t, "--db", w.db)
	secure := startServer(t, "--db", w.db, "--tls-cert", certFile, "--tls-key", keyFile)
	for _, tc := range []struct {
		name, request string
		status        int
		code          string
	}{
		{"Malformed", "GET / HTTP/1.1\r\nHost: x\r\nno colon\r\n\r\n", 400, "invalid"},
		{"NoHost", "GET /healthz HTTP/1.1\r\n\r\n", 400, "invalid"},
		{"HeaderTooLarge", "GET /healthz HTTP/1.1\r\nHost: x\r\nX: " + strings.Repeat("a", 100<<10) + "\r\n\r\n", 431, "too_large"},
		{"NotCanonical", "GET /api//streams HTTP/1.1\r\nHost: x\r\n\r\n", 307, "moved"},
	} {
		for _, useTLS := range []bool{false, true} {
			t.Run(tc.name+map[bool]string{false: "", true: "TLS"}[useTLS], func(t *testing.T) {
				var c net.Conn
				var err error
				if useTLS {
					c, err = tls.Dial("tcp", secure.addr, &tls.Config{RootCAs: pool})
				} else {
					c, err = net.Dial("tcp", plain.addr)
				}
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(10 * time.Second))
				if _, err := io.WriteString(c, tc.request); err != nil {
					t.Fatal(err)
				}
				resp, err := http.ReadResponse(bufio.NewReader(c), nil)
				if err != nil {
					t.Fatal(err)
				}
				var e struct {
					Error struct{ Code, Message string }
				}
				body, _ := io.ReadAll(resp.Body)
				if resp.StatusCode != tc.status || resp.Header.Get("Content-Type") != "application/json" || json.Unmarshal(body, &e) != nil || e.Error.Code != tc.code {
					t.Fatalf("%d %s %s; want %d JSON with code %s", resp.StatusCode, resp.Header.Get("Content-Type"), body, tc.status, tc.code)
				}
			})
		}
	}
	t.Run("RootInBrowser", func(t *testing.T) {
		req, _ := http.NewRequest("GET", plain.url("/"), nil)
		req.Header.Set("Accept", "text/html")
		resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/streams" {
			t.Fatalf("GET / from a browser: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
		}
	})
	t.Run("HSTS", func(t *testing.T) {
		c := &http.Client{Timeout: time.Minute, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
		for _, path := range []string{"/healthz", "/streams", "/nothing"} {
			resp, err := c.Get("https://" + secure.addr + path)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if got := resp.Header.Get("Strict-Transport-Security"); !strings.HasPrefix(got, "max-age=") {
				t.Errorf("%s over TLS: Strict-Transport-Security %q", path, got)
			}
		}
		resp, err := http.Get(plain.url("/healthz"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := resp.Header.Get("Strict-Transport-Security"); got != "" {
			t.Errorf("over plain HTTP: Strict-Transport-Security %q", got)
		}
	})
	for _, s := range []*server{plain, secure} {
		s.stop(t)
	}
	if !strings.Contains(plain.logText(), `"msg":"opening store","db":"`+w.db+`"`) {
		t.Errorf("serve does not log which store it opens:\n%s", tail(plain.logText(), 10))
	}
}

// TestDeployConfig: the packaged settings file is read without error, with
// its proxies trusted.
func TestDeployConfig(t *testing.T) {
	fs, f := serveFlagSet()
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	if err := applySettings(fs, filepath.Join("..", "..", "deploy", "ovlive.toml")); err != nil {
		t.Fatal(err)
	}
	if f.db.dsn != "sqlite:/var/lib/ovlive/ovlive.db" || f.trustedProxies.String() != "127.0.0.1/32,::1/128" {
		t.Fatalf("deploy/ovlive.toml gives db %q and trusted proxies %q", f.db.dsn, f.trustedProxies.String())
	}
}
