package contract

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"openvibe.network/agentsandbox"
)

// seedCheckIn is the typed form of the seed's worker-check-in example.
func seedCheckIn() agentsandbox.WorkerCheckIn {
	at := time.Date(2026, 11, 7, 13, 0, 0, 0, time.FixedZone("CET", 3600)) // 12:00 UTC
	return agentsandbox.WorkerCheckIn{
		WorkerID: "sbw-ovhost", Service: "codes-sandbox", Version: "0.7.0", Ready: new(true),
		Checks: map[string]bool{
			"network_namespace": true, "no_direct_egress": true, "egress_refuses_private": true, "clean_env": true,
			"no_host_files": true, "no_capabilities": true, "seccomp": true, "limits": true, "wipe": true,
		},
		CheckedAt: &at,
		Isolation: agentsandbox.Isolation{
			HostNetwork: new(false), Credentials: new(false), Profile: new(false), EgressProxy: new(true), Workspace: new("ephemeral"),
			Extra: map[string]any{
				"sandbox": "bubblewrap", "bubblewrap": "0.9.0", "user_namespace": true, "network_namespace": true,
				"egress":           map[string]any{"via": "proxy", "public_only": true, "ports": []any{80, 443}, "direct": "none"},
				"host_credentials": "none", "host_files": "none", "capabilities": "none", "seccomp": true,
				"workspace_kind": "tmpfs, wiped with the sandbox",
				"limits": map[string]any{
					"kind": "cgroup", "enforced": true, "memory_mb": 2048, "disk_mb": 512, "pids": 256,
					"cpu_percent": 100, "time_box_minutes": []any{5, 30},
				},
			},
		},
		Browser: new(false), Capacity: new(2), Active: new(0), At: &at,
	}
}

// TestWorkerCheckInSeedExample: the typed seed example marshals to the seed's
// JSON (same value), which validates, and survives a round trip.
func TestWorkerCheckInSeedExample(t *testing.T) {
	data, err := json.Marshal(seedCheckIn())
	if err != nil {
		t.Fatal(err)
	}
	r, err := ValidateJSON(agentsandbox.WorkerCheckInContract, data)
	if err != nil || !r.Valid {
		t.Fatalf("marshalled example does not validate: %+v %v\n%s", r, err, data)
	}
	if got, want := mustDecode(t, string(data)), mustDecode(t, string(readSeed(t, "valid-worker-check-in"))); !reflect.DeepEqual(got, want) {
		t.Errorf("marshalled example differs from the seed's:\n%s", data)
	}
	var back agentsandbox.WorkerCheckIn
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	again, err := json.Marshal(back)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, data) {
		t.Errorf("round trip changed the report:\n%s\n%s", data, again)
	}
	if !back.At.Equal(*seedCheckIn().At) || back.Isolation.Workspace == nil || *back.Isolation.Workspace != "ephemeral" {
		t.Errorf("round trip lost typed fields: %+v", back)
	}
}

func TestWorkerCheckInMarshal(t *testing.T) {
	tests := []struct {
		name string
		in   agentsandbox.WorkerCheckIn
		want string
	}{
		{"OK/minimal-null-checked-at", agentsandbox.WorkerCheckIn{Isolation: factsOnly(seedCheckIn().Isolation)},
			`{"checked_at":null,"isolation":{"credentials":false,"egress_proxy":true,"host_network":false,"profile":false,"workspace":"ephemeral"}}`},
		{"OK/unproven-fact-left-out", agentsandbox.WorkerCheckIn{Isolation: agentsandbox.Isolation{HostNetwork: new(false), Extra: map[string]any{"seccomp": true}}, Capacity: new(1)},
			`{"checked_at":null,"isolation":{"host_network":false,"seccomp":true},"capacity":1}`},
		{"OK/time-utc-millis", agentsandbox.WorkerCheckIn{At: new(time.Date(2026, 1, 2, 3, 4, 5, 678999999, time.FixedZone("x", -7200)))},
			`{"checked_at":null,"isolation":{},"at":"2026-01-02T05:04:05.678Z"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data, err := json.Marshal(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if string(data) != tt.want {
				t.Errorf("got  %s\nwant %s", data, tt.want)
			}
		})
	}
	t.Run("OK/unproven-fact-is-refused", func(t *testing.T) {
		data, _ := json.Marshal(agentsandbox.WorkerCheckIn{Isolation: agentsandbox.Isolation{HostNetwork: new(false), Credentials: new(false), EgressProxy: new(true), Workspace: new("ephemeral")}})
		r, err := ValidateJSON(agentsandbox.WorkerCheckInContract, data)
		if err != nil || r.Valid || len(r.Errors) != 1 || r.Errors[0].Message != "must have required property 'profile'" {
			t.Errorf("got %+v %v", r, err)
		}
	})
	t.Run("ErrExtraShadowsFact", func(t *testing.T) {
		_, err := json.Marshal(agentsandbox.WorkerCheckIn{Isolation: agentsandbox.Isolation{Extra: map[string]any{"profile": false}}})
		if err == nil || !strings.Contains(err.Error(), `extra key "profile"`) {
			t.Errorf("err %v, want the shadowing extra key named", err)
		}
	})
}

func TestWorkerCheckInUnmarshalErrors(t *testing.T) {
	tests := []struct{ name, json, want string }{
		{"ErrBadTime", `{"isolation":{},"at":"2026-11-07"}`, "decode at:"},
		{"ErrBadCheckedAt", `{"isolation":{},"checked_at":"yesterday"}`, "decode checked_at:"},
		{"ErrFactType", `{"isolation":{"profile":"no"}}`, "decode isolation:"},
		{"ErrFieldType", `{"isolation":{},"capacity":"two"}`, "decode check-in:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var w agentsandbox.WorkerCheckIn
			err := json.Unmarshal([]byte(tt.json), &w)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

// facts returns the isolation report without its extra keys.
func factsOnly(iso agentsandbox.Isolation) agentsandbox.Isolation {
	iso.Extra = nil
	return iso
}
