package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"openvibe.network/agentsandbox"
	"openvibe.network/agentsandbox/client"
	"openvibe.network/agentsandbox/internal/testenv"
)

// TestWorkerMetrics: `serve --metrics-listen` serves the worker's counters
// without the API token, in a form promtool accepts: the egress decisions
// of the self-test's probe, a sandbox created, run in and wiped, the
// self-test per check, the check-ins by outcome, the build.
func TestWorkerMetrics(t *testing.T) {
	bin := binaries(t)
	live, w := startLive(t, bin)
	wp, api := startWorker(t, bin, live, w, "--metrics-listen", "127.0.0.1:0")
	var addr string
	waitFor(t, "the metrics listener", func() bool {
		for _, l := range strings.Split(wp.stderr.String(), "\n") {
			var rec struct{ Msg, Addr string }
			if json.Unmarshal([]byte(l), &rec) == nil && rec.Msg == "serving metrics" {
				addr = rec.Addr
				return true
			}
		}
		return false
	}, wp)
	waitFor(t, "the owner's view to say alive", func() bool { return view(t, live, w).State == "alive" }, wp)
	wc := client.NewWorker(api, "e2e-api-token", nil)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	runInSandbox(ctx, t, wc)

	text := scrape(t, "http://"+addr+"/metrics")
	checkPromtool(t, text)
	parser := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	value := func(name string, labels map[string]string) float64 {
		var sum float64
		for _, m := range fams[name].GetMetric() {
			match := true
			for _, l := range m.GetLabel() {
				if want, ok := labels[l.GetName()]; ok && want != l.GetValue() {
					match = false
				}
			}
			if !match {
				continue
			}
			switch {
			case m.GetCounter() != nil:
				sum += m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				sum += m.GetGauge().GetValue()
			case m.GetHistogram() != nil:
				sum += float64(m.GetHistogram().GetSampleCount())
			}
		}
		return sum
	}
	for _, tc := range []struct {
		name   string
		labels map[string]string
		min    float64
	}{
		{"codes_sandbox_build_info", nil, 1},
		{"codes_sandbox_slots", nil, 2},
		{"codes_sandbox_sandboxes_created_total", map[string]string{"egress": "public"}, 1},
		{"codes_sandbox_sandboxes_wiped_total", map[string]string{"reason": "deleted"}, 2}, // the probe's and ours
		{"codes_sandbox_create_seconds", map[string]string{"outcome": "ok"}, 1},
		{"codes_sandbox_exec_seconds", map[string]string{"outcome": "ok"}, 1},
		{"codes_sandbox_selftest_check_passed", nil, float64(len(agentsandbox.Checks()))},
		{"codes_sandbox_selftest_passed", nil, 1},
		{"codes_sandbox_checkins_total", map[string]string{"live": live, "outcome": "accepted"}, 1},
		{"codes_sandbox_egress_requests_total", map[string]string{"verdict": "refused", "reason": "private-address"}, 3},
		{"codes_sandbox_egress_attached_sandboxes", nil, 0},
	} {
		if _, ok := fams[tc.name]; !ok {
			t.Errorf("no %s in the metrics", tc.name)
			continue
		}
		if got := value(tc.name, tc.labels); got < tc.min {
			t.Errorf("%s%v = %v, want at least %v", tc.name, tc.labels, got, tc.min)
		}
	}
	if v := value("codes_sandbox_wipe_failures_total", nil); v != 0 {
		t.Errorf("wipe failures %v", v)
	}
	// The API's token is not needed, and the API does not serve them.
	if resp, err := http.Get(api + "/metrics"); err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("the API answers /metrics without a token with %d", resp.StatusCode)
		}
	}
}

func scrape(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain; version=0.0.4") {
		t.Fatalf("GET %s: %d %q %v", url, resp.StatusCode, resp.Header.Get("Content-Type"), err)
	}
	return string(b)
}

// checkPromtool runs `promtool check metrics` on text (promtool from PATH,
// or unpacked from Debian's package by scripts/promtool.sh).
func checkPromtool(t *testing.T, text string) {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err != nil {
		out, serr := exec.Command("../scripts/promtool.sh").Output()
		if serr != nil {
			testenv.Missing(t, "promtool is not installed and scripts/promtool.sh could not fetch it: "+serr.Error())
		}
		path = strings.TrimSpace(string(out))
	}
	cmd := exec.Command(path, "check", "metrics")
	cmd.Stdin = bytes.NewReader([]byte(text))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("promtool check metrics: %v\n%s\n%s", err, out, text)
	}
}
