package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"openvibe.network/agentsandbox"
	"openvibe.network/agentsandbox/client"
)

// fakeLive answers check-ins with the statuses in order (the last repeats).
type fakeLive struct {
	mu       sync.Mutex
	statuses []int
	bodies   [][]byte
}

func (f *fakeLive) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	b, _ := io.ReadAll(r.Body)
	f.bodies = append(f.bodies, b)
	st := f.statuses[0]
	if len(f.statuses) > 1 {
		f.statuses = f.statuses[1:]
	}
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(st)
	switch st {
	case 200:
		io.WriteString(w, `{"registered":true,"state":"alive"}`)
	case 422:
		io.WriteString(w, `{"valid":false,"errors":[{"path":"/isolation","message":"must have required property 'profile'"}]}`)
	case 403:
		io.WriteString(w, `{"error":{"code":"forbidden","message":"the principal lacks live.agent_sandbox.register"}}`)
	default:
		io.WriteString(w, `{"error":{"code":"unavailable","message":"try later"}}`)
	}
}

func (f *fakeLive) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.bodies)
}

type loopRun struct {
	waits []time.Duration
	logs  string
	live  *fakeLive
}

// runLoop runs the check-in loop against a fake Live until it has slept
// rounds times, with a jitter source fixed at r.
func runLoop(t *testing.T, statuses []int, rounds int, r float64, report func(time.Time) agentsandbox.WorkerCheckIn) loopRun {
	t.Helper()
	fl := &fakeLive{statuses: statuses}
	srv := httptest.NewServer(fl)
	defer srv.Close()
	lc, err := client.NewLive(srv.URL, "ovs_topsecret", srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var waits []time.Duration
	err = RunCheckIns(ctx, CheckInConfig{
		Targets: []Target{{LiveURL: srv.URL, Stream: "st1", Subject: "per1", Live: lc}},
		Report:  report,
		Logger:  slog.New(slog.NewJSONHandler(&logs, nil)),
		Rand:    func() float64 { return r },
		Sleep: func(ctx context.Context, d time.Duration) error {
			waits = append(waits, d)
			if len(waits) == rounds {
				cancel()
				return ctx.Err()
			}
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(logs.String(), "ovs_topsecret") {
		t.Fatalf("the token is in the logs: %s", logs.String())
	}
	return loopRun{waits: waits, logs: logs.String(), live: fl}
}

func goodReport(now time.Time) agentsandbox.WorkerCheckIn {
	return BuildReport(self, passed(), Slots{Capacity: 2, Active: 0}, now)
}

func TestCheckInLoopInterval(t *testing.T) {
	tests := []struct {
		name string
		r    float64
		want time.Duration
	}{
		{"Low", 0, 16 * time.Second},
		{"Mid", 0.5, 20 * time.Second},
		{"High", 0.999999, 24 * time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			run := runLoop(t, []int{200}, 3, tc.r, goodReport)
			if run.live.count() != 3 {
				t.Fatalf("%d check-ins, want 3 (one at start, one after each wait but the last)", run.live.count())
			}
			for _, w := range run.waits {
				if d := w - tc.want; d < -time.Millisecond || d > time.Millisecond {
					t.Errorf("wait %v, want %v", w, tc.want)
				}
			}
			if !strings.Contains(run.logs, `"msg":"checked in"`) {
				t.Errorf("logs: %s", run.logs)
			}
		})
	}
}

func TestCheckInLoopBacksOff(t *testing.T) {
	run := runLoop(t, []int{503, 503, 503, 429, 503, 503, 503, 503, 503, 200, 200}, 11, 0.5, goodReport)
	want := []time.Duration{1, 2, 4, 8, 16, 32, 64, 120, 120, 20, 20}
	for i, w := range want {
		if run.waits[i] != w*time.Second {
			t.Errorf("wait %d = %v, want %v", i, run.waits[i], w*time.Second)
		}
	}
}

func TestCheckInLoopLogs(t *testing.T) {
	tests := []struct {
		name   string
		status int
		report func(time.Time) agentsandbox.WorkerCheckIn
		want   []string
	}{
		{"Refused422", 422, goodReport, []string{"refused by the contract", "must have required property 'profile'"}},
		{"Forbidden", 403, goodReport, []string{"check the service token", "live.agent_sandbox.register"}},
		{"Unauthorized", 401, goodReport, []string{"check the service token"}},
		{"UnprovedSentAnyway", 422, func(now time.Time) agentsandbox.WorkerCheckIn {
			return BuildReport(self, failing(agentsandbox.CheckWipe), Slots{Capacity: 2, Active: 0}, now)
		},
			[]string{"refused by the contract: not registered"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			run := runLoop(t, []int{tc.status}, 2, 0.5, tc.report)
			if tc.name == "UnprovedSentAnyway" {
				var sent map[string]any
				if err := json.Unmarshal(run.live.bodies[0], &sent); err != nil {
					t.Fatal(err)
				}
				if _, claimed := sent["isolation"].(map[string]any)["workspace"]; claimed {
					t.Errorf("the unproved workspace fact was sent: %s", run.live.bodies[0])
				}
			}
			for _, w := range tc.want {
				if !strings.Contains(run.logs, w) {
					t.Errorf("logs lack %q: %s", w, run.logs)
				}
			}
			if run.live.count() != 2 || run.waits[1] != 20*time.Second {
				t.Errorf("count %d waits %v: a refusal is retried at the interval", run.live.count(), run.waits)
			}
		})
	}
}

func TestRunCheckInsConfig(t *testing.T) {
	if err := RunCheckIns(context.Background(), CheckInConfig{}); err == nil {
		t.Fatal("no target: want an error")
	}
}
