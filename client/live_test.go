package client

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

func TestNewLive(t *testing.T) {
	tests := []struct {
		name, url, token string
		ok               bool
	}{
		{"OK", "http://127.0.0.1:8080", "ovs_x", true},
		{"OKPathPrefix", "https://live.example/prefix/", "ovs_x", true},
		{"ErrScheme", "ftp://127.0.0.1", "ovs_x", false},
		{"ErrRelative", "/api", "ovs_x", false},
		{"ErrQuery", "http://127.0.0.1/?a=b", "ovs_x", false},
		{"ErrUser", "http://u:p@127.0.0.1/", "ovs_x", false},
		{"ErrEmptyToken", "http://127.0.0.1", " ", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewLive(tc.url, tc.token, nil)
			if (err == nil) != tc.ok {
				t.Fatalf("NewLive(%q) err = %v, want ok=%v", tc.url, err, tc.ok)
			}
		})
	}
}

func TestLiveURL(t *testing.T) {
	l, err := NewLive("https://live.example/base/", "ovs_x", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := l.URL("s/1"), "https://live.example/base/api/streams/agent/s%2F1/plays/worker"; got != want {
		t.Fatalf("URL = %q, want %q", got, want)
	}
}

func TestCheckInSendsRequest(t *testing.T) {
	var got *http.Request
	var body []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r
		body, _ = io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"registered":true,"state":"alive","alive_until":"2026-11-07T12:01:00Z"}`)
	}))
	defer srv.Close()
	l, err := NewLive(srv.URL, "ovs_secret", srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	a, err := l.CheckIn(context.Background(), "st1", "per1", []byte(`{"isolation":{}}`))
	if err != nil {
		t.Fatal(err)
	}
	if got.Method != http.MethodPost || got.URL.Path != "/api/streams/agent/st1/plays/worker" {
		t.Errorf("request = %s %s", got.Method, got.URL.Path)
	}
	for k, want := range map[string]string{"Authorization": "Bearer ovs_secret", "X-OV-Subject": "per1", "Content-Type": "application/json"} {
		if v := got.Header.Get(k); v != want {
			t.Errorf("header %s = %q, want %q", k, v, want)
		}
	}
	if string(body) != `{"isolation":{}}` {
		t.Errorf("body = %s", body)
	}
	if !a.OK() || a.State != "alive" || a.AliveUntil == nil || a.Summary() != "registered, state alive" {
		t.Errorf("answer = %+v", a)
	}
}

func TestCheckInAnswers(t *testing.T) {
	tests := []struct {
		name    string
		status  int
		body    string
		ok      bool
		summary string
	}{
		{"OK", 200, `{"registered":true,"state":"alive"}`, true, "registered, state alive"},
		{"ErrOKNotRegistered", 200, `{}`, false, "unexpected answer (200)"},
		{"ErrContract", 422, `{"valid":false,"errors":[{"path":"/isolation","message":"must have required property 'profile'"}]}`, false,
			"refused by the contract (422): /isolation must have required property 'profile'"},
		{"ErrForbidden", 403, `{"error":{"code":"forbidden","message":"the principal lacks live.agent_sandbox.register"}}`, false,
			"refused (403 forbidden): the principal lacks live.agent_sandbox.register"},
		{"ErrNotJSON", 502, `bad gateway`, false, "refused (502 ): bad gateway"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tc.status)
				io.WriteString(w, tc.body)
			}))
			defer srv.Close()
			l, err := NewLive(srv.URL, "ovs_x", nil)
			if err != nil {
				t.Fatal(err)
			}
			a, err := l.CheckIn(context.Background(), "s", "p", []byte(`{}`))
			if err != nil {
				t.Fatal(err)
			}
			if a.Status != tc.status || a.OK() != tc.ok || a.Summary() != tc.summary {
				t.Errorf("answer = %d ok=%v %q, want %d ok=%v %q", a.Status, a.OK(), a.Summary(), tc.status, tc.ok, tc.summary)
			}
			if json.Valid([]byte(tc.body)) && string(a.Body) != tc.body || !json.Valid([]byte(tc.body)) && a.Body != nil {
				t.Errorf("Body = %s, want Live's answer as sent: %s", a.Body, tc.body)
			}
		})
	}
}

// TestCheckInNoRedirect proves the token never follows a redirect.
func TestCheckInNoRedirect(t *testing.T) {
	var leaked atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.Header.Get("Authorization"), "ovs_secret") {
			leaked.Add(1)
		}
		io.WriteString(w, `{"registered":true}`)
	}))
	defer other.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	defer srv.Close()
	l, err := NewLive(srv.URL, "ovs_secret", &http.Client{})
	if err != nil {
		t.Fatal(err)
	}
	a, err := l.CheckIn(context.Background(), "s", "p", []byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	if a.Status != http.StatusTemporaryRedirect || a.OK() || leaked.Load() != 0 {
		t.Fatalf("status %d ok=%v leaked=%d: a redirect must not be followed", a.Status, a.OK(), leaked.Load())
	}
}

func TestCheckInTransportError(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	l, err := NewLive(url, "ovs_secret", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = l.CheckIn(context.Background(), "s", "p", []byte(`{}`))
	if err == nil || strings.Contains(err.Error(), "ovs_secret") {
		t.Fatalf("err = %v, want a connection error without the token", err)
	}
}

// TestNewLiveNoEnvironmentProxy checks that the default client sends the
// token straight to Live: a proxy from the environment would see it.
func TestNewLiveNoEnvironmentProxy(t *testing.T) {
	l, err := NewLive("http://127.0.0.1:8080", "ovs_x", nil)
	if err != nil {
		t.Fatal(err)
	}
	tr, ok := l.http.Transport.(*http.Transport)
	if !ok || tr.Proxy != nil {
		t.Fatalf("default transport %T (proxy set: %v): want an *http.Transport with no proxy", l.http.Transport, ok && tr.Proxy != nil)
	}
}
