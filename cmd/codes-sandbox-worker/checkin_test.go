package main

import (
	"bytes"
	"context"
	"encoding/pem"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckInFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want []targetConfig
		err  string
	}{
		{"OK", []string{"--live-url", "http://a", "--stream", "s1", "--subject", "p1", "--service-token-file", "/f"},
			[]targetConfig{{"http://a", "s1", "p1", "/f"}}, ""},
		{"OKTwoGroups", []string{"--live-url", "http://a", "--stream", "s1", "--subject", "p1", "--live-url", "http://b", "--subject", "p2", "--stream", "s2"},
			[]targetConfig{{"http://a", "s1", "p1", ""}, {"http://b", "s2", "p2", ""}}, ""},
		{"ErrStreamFirst", []string{"--stream", "s1", "--live-url", "http://a"}, nil, "give --live-url first"},
		{"ErrTwice", []string{"--live-url", "http://a", "--stream", "s1", "--stream", "s2"}, nil, "given twice"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var cf checkInFlags
			fs := flag.NewFlagSet("t", flag.ContinueOnError)
			var errOut bytes.Buffer
			fs.SetOutput(&errOut)
			cf.register(fs)
			err := fs.Parse(tc.args)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(cf.targets) != len(tc.want) {
				t.Fatalf("targets = %+v, want %+v", cf.targets, tc.want)
			}
			for i := range tc.want {
				if cf.targets[i] != tc.want[i] {
					t.Errorf("target %d = %+v, want %+v", i, cf.targets[i], tc.want[i])
				}
			}
		})
	}
}

func TestBuildTargets(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "token")
	os.WriteFile(good, []byte("ovs_fromfile\n"), 0o600)
	two := filepath.Join(dir, "two")
	os.WriteFile(two, []byte("ovs_a ovs_b\n"), 0o600)
	tests := []struct {
		name, env string
		cfg       targetConfig
		err       string
	}{
		{"OKFile", "", targetConfig{"http://127.0.0.1:1", "s", "p", good}, ""},
		{"OKEnv", "ovs_fromenv", targetConfig{"http://127.0.0.1:1", "s", "p", ""}, ""},
		{"ErrNoToken", "", targetConfig{"http://127.0.0.1:1", "s", "p", ""}, "no service token"},
		{"ErrTwoTokens", "", targetConfig{"http://127.0.0.1:1", "s", "p", two}, "exactly one token"},
		{"ErrMissingFile", "", targetConfig{"http://127.0.0.1:1", "s", "p", filepath.Join(dir, "nope")}, "read token file"},
		{"ErrNoSubject", "ovs_x", targetConfig{"http://127.0.0.1:1", "s", "", ""}, "all required"},
		{"ErrBadURL", "ovs_x", targetConfig{"ftp://x", "s", "p", ""}, "http(s)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(tokenEnv, tc.env)
			targets, _, err := buildTargets([]targetConfig{tc.cfg}, "")
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || len(targets) != 1 {
				t.Fatalf("targets %v err %v", targets, err)
			}
			if _, ok := os.LookupEnv(tokenEnv); ok {
				t.Errorf("$%s is still in the environment", tokenEnv)
			}
		})
	}
}

func TestLoadConfig(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.json")
	os.WriteFile(good, []byte(`{"capacity":3,"check_ins":[{"live_url":"http://a","stream":"s","subject":"p"}]}`), 0o600)
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"capacity":3,"service_token":"ovs_x"}`), 0o600)
	fc, err := loadConfig(good)
	if err != nil || fc.Capacity != 3 || len(fc.CheckIns) != 1 {
		t.Fatalf("config %+v err %v", fc, err)
	}
	if _, err := loadConfig(bad); err == nil || !strings.Contains(err.Error(), "unknown field") {
		t.Fatalf("unknown field: err = %v", err)
	}
}

// TestExampleConfig: the packaged example config loads, and the only files
// it names are the two an operator must write (the API token and the
// service token): an optional file (live_ca_file, tls_*) is left empty,
// its default, so that the example works once those two exist.
func TestExampleConfig(t *testing.T) {
	fc, err := loadConfig("../../deploy/codes-sandbox.example.json")
	if err != nil {
		t.Fatalf("the example config: %v", err)
	}
	if fc.APITokenFile == "" || len(fc.CheckIns) == 0 || fc.CheckIns[0].ServiceTokenFile == "" {
		t.Errorf("the example names no API or service token file: %+v", fc)
	}
	if fc.LiveCAFile != "" || fc.TLSCertFile != "" || fc.TLSKeyFile != "" {
		t.Errorf("the example names optional files an operator may not have: live_ca_file %q, tls_cert_file %q, tls_key_file %q",
			fc.LiveCAFile, fc.TLSCertFile, fc.TLSKeyFile)
	}
}

func TestLiveCAFile(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "ca.pem")
	os.WriteFile(bad, []byte("not a pem"), 0o600)
	if _, err := liveHTTPClient(bad); err == nil {
		t.Fatal("a CA file without a certificate must be refused")
	}
	hc, err := liveHTTPClient("")
	if err != nil {
		t.Fatal(err)
	}
	if tr, ok := hc.Transport.(*http.Transport); !ok || tr.Proxy != nil {
		t.Fatal("the Live client must not take a proxy from the environment")
	}
}

// TestLiveOverHTTPS checks in with an HTTPS Live whose CA is given by
// --live-ca-file, and fails without it.
func TestLiveOverHTTPS(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"registered":true,"state":"alive"}`)
	}))
	defer srv.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(ca, pemBytes, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, ca string
		ok       bool
	}{
		{"OK", ca, true},
		{"ErrUnknownCA", "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(tokenEnv, "ovs_x")
			targets, _, err := buildTargets([]targetConfig{{LiveURL: srv.URL, Stream: "s", Subject: "p"}}, tc.ca)
			if err != nil {
				t.Fatal(err)
			}
			a, err := targets[0].Live.CheckIn(context.Background(), "s", "p", []byte(`{}`))
			if (err == nil && a.OK()) != tc.ok {
				t.Fatalf("answer %+v err %v, want ok=%v", a, err, tc.ok)
			}
		})
	}
}
