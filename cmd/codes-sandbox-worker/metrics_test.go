package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"openvibe.network/agentsandbox/internal/buildinfo"

	"openvibe.network/agentsandbox/client"
	"openvibe.network/agentsandbox/egress"
	"openvibe.network/agentsandbox/internal/metrics"
	"openvibe.network/agentsandbox/internal/testenv"
	"openvibe.network/agentsandbox/sandbox"
	"openvibe.network/agentsandbox/worker"
)

// fakeLive answers every check-in with its answer or error.
type fakeLive struct {
	a   client.CheckInAnswer
	err error
}

func (f fakeLive) CheckIn(context.Context, string, string, []byte) (client.CheckInAnswer, error) {
	return f.a, f.err
}

func TestCheckInOutcome(t *testing.T) {
	for _, tc := range []struct {
		name string
		a    client.CheckInAnswer
		err  error
		want string
	}{
		{"Accepted", client.CheckInAnswer{Status: 200, Registered: true}, nil, "accepted"},
		{"Contract", client.CheckInAnswer{Status: 422}, nil, "refused_contract"},
		{"Unauthorized", client.CheckInAnswer{Status: 401}, nil, "unauthorized"},
		{"Forbidden", client.CheckInAnswer{Status: 403}, nil, "unauthorized"},
		{"NotFound", client.CheckInAnswer{Status: 404}, nil, "refused"},
		{"Overloaded", client.CheckInAnswer{Status: 429}, nil, "failed"},
		{"Failing", client.CheckInAnswer{Status: 503}, nil, "failed"},
		{"NoAnswer", client.CheckInAnswer{}, errors.New("connection refused"), "no_answer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := checkInOutcome(tc.a, tc.err); got != tc.want {
				t.Fatalf("outcome %q, want %q", got, tc.want)
			}
		})
	}
}

// TestMetricsServed: the worker's families and the proxy's, served on
// their own listener without a token, pass promtool, and count what the
// hooks saw.
func TestMetricsServed(t *testing.T) {
	reg := metrics.NewRegistry()
	wm := newWorkerMetrics(reg)
	p, err := egress.NewProxy(egress.ProxyConfig{Guard: egress.NewGuard(egress.GuardConfig{}), Metrics: reg})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	wm.onWipe("deleted", sandbox.WipeReport{Verified: true})
	wm.onWipe("time_box", sandbox.WipeReport{Verified: false})
	targets := wm.meterTargets([]worker.Target{{LiveURL: "https://live.example.org", Live: fakeLive{a: client.CheckInAnswer{Status: 200, Registered: true}}}})
	_, _ = targets[0].Live.CheckIn(context.Background(), "s", "p", nil)
	wm.createTime.With("ok").Observe(0.004)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, _ := serveMetrics(reg, ln, false, slog.New(slog.DiscardHandler))
	defer srv.Close()
	resp, err := http.Get("http://" + ln.Addr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET /metrics: %d", resp.StatusCode)
	}
	text := string(body)
	build := buildinfo.Read()
	for _, want := range []string{
		`codes_sandbox_build_info{version="` + build.Version + `",revision="` + build.Revision + `",goversion="` + build.GoVersion + `"} 1`,
		`codes_sandbox_sandboxes_wiped_total{reason="deleted"} 1`,
		`codes_sandbox_sandboxes_wiped_total{reason="time_box"} 1`,
		`codes_sandbox_wipe_failures_total 1`,
		`codes_sandbox_checkins_total{live="https://live.example.org",outcome="accepted"} 1`,
		`codes_sandbox_create_seconds_count{outcome="ok"} 1`,
		`# TYPE codes_sandbox_egress_requests_total counter`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("metrics lack %s:\n%s", want, text)
		}
	}
	promtool := promtoolPath(t)
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = bytes.NewReader(body)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("promtool check metrics: %v\n%s", err, out)
	}
	other, err := http.Get("http://" + ln.Addr().String() + "/")
	if err != nil {
		t.Fatal(err)
	}
	other.Body.Close()
	if other.StatusCode != http.StatusNotFound {
		t.Fatalf("GET /: %d, want 404", other.StatusCode)
	}
}

func promtoolPath(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("promtool"); err == nil {
		return p
	}
	out, err := exec.Command(filepath.Join("..", "..", "scripts", "promtool.sh")).Output()
	if err != nil {
		testenv.Missing(t, "promtool is not installed and scripts/promtool.sh could not fetch it: "+err.Error())
	}
	return strings.TrimSpace(string(out))
}

// TestPprofOnLoopbackOnly: --pprof needs a metrics listener, on loopback,
// and then serves the profiles there; without it they are not served.
func TestPprofOnLoopbackOnly(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for _, tc := range []struct {
		name string
		on   bool
		ln   net.Listener
		ok   bool
	}{
		{"OK", true, ln, true},
		{"OKOff", false, nil, true},
		{"ErrNoListener", true, nil, false},
		{"ErrNotLoopback", true, fakeListener{&net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 9100}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := checkPprof(tc.on, tc.ln); (err == nil) != tc.ok {
				t.Errorf("checkPprof(%v) = %v, want ok %v", tc.on, err, tc.ok)
			}
		})
	}
	for _, on := range []bool{true, false} {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv, _ := serveMetrics(metrics.NewRegistry(), l, on, slog.New(slog.DiscardHandler))
		resp, err := http.Get("http://" + l.Addr().String() + "/debug/pprof/cmdline")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		srv.Close()
		if want := map[bool]int{true: 200, false: 404}[on]; resp.StatusCode != want {
			t.Errorf("pprof %v: GET /debug/pprof/cmdline answered %d, want %d", on, resp.StatusCode, want)
		}
	}
}

// fakeListener is a listener that only has an address.
type fakeListener struct{ addr net.Addr }

func (f fakeListener) Accept() (net.Conn, error) { return nil, net.ErrClosed }
func (f fakeListener) Close() error              { return nil }
func (f fakeListener) Addr() net.Addr            { return f.addr }
