package worker

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"openvibe.network/agentsandbox"
	"openvibe.network/agentsandbox/contract"
)

func passed() *Result {
	r := &Result{Checks: map[string]bool{}, Passed: true, UserNamespace: true, CheckedAt: time.Date(2026, 11, 7, 12, 0, 0, 0, time.UTC)}
	for _, c := range agentsandbox.Checks() {
		r.Checks[c] = true
	}
	r.Checks[agentsandbox.CheckCredentialsBrokered] = true // a worker with egress
	return r
}

func failing(checks ...string) *Result {
	r := passed()
	r.Passed = false
	for _, c := range checks {
		r.Checks[c] = false
		r.Reasons = append(r.Reasons, c+": broken")
	}
	return r
}

func validate(t *testing.T, r agentsandbox.WorkerCheckIn) (contract.Result, map[string]any) {
	t.Helper()
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	res, err := contract.ValidateJSON(agentsandbox.WorkerCheckInContract, b)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return res, m
}

var self = Self{WorkerID: "sbw-test", Version: "0.1.0", Bubblewrap: "0.8.0", SocketMemory: "charged"}

func TestBuildReportAllProved(t *testing.T) {
	now := time.Date(2026, 11, 7, 12, 0, 5, 0, time.UTC)
	res, m := validate(t, BuildReport(self, passed(), Slots{Capacity: 2, Active: 1}, now))
	if !res.Valid {
		t.Fatalf("report refused: %+v", res.Errors)
	}
	iso := m["isolation"].(map[string]any)
	want := map[string]any{
		"host_network": false, "credentials": false, "profile": false, "egress_proxy": true, "workspace": "ephemeral",
		"sandbox": "bubblewrap", "bubblewrap": "0.8.0", "user_namespace": true, "network_namespace": true,
		"host_credentials": "none", "host_files": "none", "capabilities": "none", "seccomp": true,
		"credentials_brokered": true,
	}
	for k, v := range want {
		if iso[k] != v {
			t.Errorf("isolation.%s = %v, want %v", k, iso[k], v)
		}
	}
	wantEgress := map[string]any{"via": "proxy", "public_only": true, "ports": []any{80.0, 443.0}, "direct": "none",
		"policies": []any{"none", "public", "allow"}}
	if diff := cmp.Diff(wantEgress, iso["egress"]); diff != "" {
		t.Errorf("isolation.egress (-want +got):\n%s", diff)
	}
	lim := iso["limits"].(map[string]any)
	if lim["enforced"] != true || lim["memory_mb"] != float64(2048) || lim["pids"] != float64(256) || lim["socket_memory"] != "charged" {
		t.Errorf("limits = %v", lim)
	}
	if m["ready"] != true || m["service"] != "codes-sandbox" || m["capacity"] != float64(2) || m["active"] != float64(1) ||
		m["checked_at"] != "2026-11-07T12:00:00.000Z" || m["at"] != "2026-11-07T12:00:05.000Z" || m["browser"] != false {
		t.Errorf("report = %v", m)
	}
}

// TestBuildReportClaimsOnlyProved fails one check at a time and asserts the
// facts it proves are left out (so Live refuses), and the others stay.
func TestBuildReportClaimsOnlyProved(t *testing.T) {
	tests := []struct {
		check   string
		missing []string
	}{
		{agentsandbox.CheckNetworkNamespace, []string{"host_network", "network_namespace"}},
		{agentsandbox.CheckNoDirectEgress, []string{"host_network", "egress_proxy", "egress"}},
		{agentsandbox.CheckEgressRefusesPrivate, []string{"egress_proxy", "egress"}},
		{agentsandbox.CheckCleanEnv, []string{"credentials", "host_credentials"}},
		{agentsandbox.CheckNoHostFiles, []string{"credentials", "profile", "host_files", "host_credentials"}},
		{agentsandbox.CheckNoCapabilities, []string{"capabilities"}},
		{agentsandbox.CheckSeccomp, []string{"seccomp"}},
		{agentsandbox.CheckWipe, []string{"workspace", "workspace_kind"}},
		{agentsandbox.CheckLimits, nil},
		{agentsandbox.CheckCredentialsBrokered, []string{"credentials", "host_credentials", "credentials_brokered"}},
	}
	for _, tc := range tests {
		t.Run(tc.check, func(t *testing.T) {
			res, m := validate(t, BuildReport(self, failing(tc.check), Slots{Capacity: 2, Active: 0}, time.Now()))
			iso := m["isolation"].(map[string]any)
			for _, k := range tc.missing {
				if _, ok := iso[k]; ok {
					t.Errorf("isolation.%s claimed though %s failed", k, tc.check)
				}
			}
			facts := 0
			for _, k := range tc.missing {
				if slices.Contains(agentsandbox.IsolationFacts(), k) {
					facts++
				}
			}
			if res.Valid != (facts == 0) {
				t.Errorf("valid = %v with %d facts missing (errors %v)", res.Valid, facts, res.Errors)
			}
			if m["ready"] != false || len(m["reasons"].([]any)) != 1 {
				t.Errorf("ready %v reasons %v", m["ready"], m["reasons"])
			}
			if lim := iso["limits"].(map[string]any); tc.check == agentsandbox.CheckLimits && (lim["enforced"] != false || lim["socket_memory"] != nil) {
				t.Errorf("limits claimed enforced (or their socket memory said) though the check failed: %v", lim)
			}
		})
	}
}

func TestBuildReportBeforeSelfTest(t *testing.T) {
	res, m := validate(t, BuildReport(self, nil, Slots{Capacity: 1, Active: 0}, time.Now()))
	if res.Valid {
		t.Fatal("a report before any self-test must not claim the facts")
	}
	if _, ok := m["checked_at"]; !ok || m["checked_at"] != nil || m["ready"] != false {
		t.Errorf("checked_at = %v ready = %v", m["checked_at"], m["ready"])
	}
	if len(res.Errors) != 5 {
		t.Errorf("errors = %v, want the five facts missing", res.Errors)
	}
	if reasons, _ := m["reasons"].([]any); len(reasons) != 1 || reasons[0] != "no self-test has run yet" {
		t.Errorf("reasons = %v, want the owner told no self-test has run yet", m["reasons"])
	}
}

func TestBuildReportCapsReasons(t *testing.T) {
	r := failing(agentsandbox.Checks()...)
	r.Reasons = append(r.Reasons, strings.Repeat("é", 900), "x", "y")
	res, m := validate(t, BuildReport(Self{WorkerID: strings.Repeat("w", 100)}, r, Slots{Capacity: 1}, time.Now()))
	for _, e := range res.Errors {
		if !strings.HasPrefix(e.Path, "/isolation") {
			t.Errorf("unexpected violation %v", e)
		}
	}
	if n := len(m["reasons"].([]any)); n != 10 {
		t.Errorf("%d reasons, want 10", n)
	}
}

// TestBuildReportWordStaysTrue: a slot lost to an unverified wipe makes the
// report not ready, with the slot's reason first, and takes back the
// ephemeral workspace; a self-test older than its bound claims nothing; a
// check that did not run proves nothing.
func TestBuildReportWordStaysTrue(t *testing.T) {
	now := time.Date(2026, 11, 7, 12, 1, 0, 0, time.UTC)
	lost := "slot 0 (uid 200000) is out of use: its wipe could not be verified (process 42 of uid 200000)"
	notRun := passed()
	delete(notRun.Checks, agentsandbox.CheckWipe)
	notRun.NotRun, notRun.Passed = []string{agentsandbox.CheckWipe}, false
	notRun.Reasons = []string{"wipe: not run: no probe sandbox was created"}
	aged := self
	aged.SelfTestMaxAge = 30 * time.Second
	tests := []struct {
		name        string
		self        Self
		last        *Result
		slots       Slots
		wantReasons []string
		wantMissing []string // isolation keys left out
		wantChecks  bool     // the self-test's checks are reported
	}{
		{"SlotLost", self, passed(), Slots{Capacity: 2, Active: 2, Broken: []string{lost}},
			[]string{lost}, []string{"workspace", "workspace_kind"}, true},
		{"StaleSelfTest", aged, passed(), Slots{Capacity: 2},
			[]string{"the last self-test ran 1m0s ago, longer than the 30s its proof holds for; no fact is claimed until one runs again"},
			[]string{"host_network", "credentials", "profile", "egress_proxy", "workspace", "egress", "seccomp", "capabilities"}, false},
		{"CheckNotRun", self, notRun, Slots{Capacity: 2},
			[]string{"wipe: not run: no probe sandbox was created"}, []string{"workspace", "workspace_kind"}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rep := BuildReport(tc.self, tc.last, tc.slots, now)
			if *rep.Ready {
				t.Error("ready")
			}
			if diff := cmp.Diff(tc.wantReasons, rep.Reasons); diff != "" {
				t.Errorf("reasons (-want +got):\n%s", diff)
			}
			res, m := validate(t, rep)
			if res.Valid {
				t.Error("the contract accepts the report, so Live would show the stream alive and isolated")
			}
			iso := m["isolation"].(map[string]any)
			for _, k := range tc.wantMissing {
				if _, ok := iso[k]; ok {
					t.Errorf("isolation.%s is claimed", k)
				}
			}
			if _, has := m["checks"]; has != tc.wantChecks {
				t.Errorf("checks reported: %v, want %v", has, tc.wantChecks)
			}
		})
	}
}

// TestBuildReportBrowser: the report claims a browser only while a fresh
// self-test's browser check passed.
func TestBuildReportBrowser(t *testing.T) {
	now := time.Date(2026, 11, 7, 12, 1, 0, 0, time.UTC)
	with := func(ok bool) *Result {
		r := passed()
		r.Checks[agentsandbox.CheckBrowser] = ok
		return r
	}
	aged := self
	aged.SelfTestMaxAge = 30 * time.Second
	tests := []struct {
		name string
		self Self
		last *Result
		want bool
	}{
		{"Passed", self, with(true), true},
		{"Failed", self, with(false), false},
		{"NoBrowserCheck", self, passed(), false},
		{"BeforeSelfTest", self, nil, false},
		{"StaleSelfTest", aged, with(true), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rep := BuildReport(tc.self, tc.last, Slots{Capacity: 1}, now)
			if rep.Browser == nil || *rep.Browser != tc.want {
				t.Fatalf("browser = %v, want %v", rep.Browser, tc.want)
			}
			if _, m := validate(t, rep); m["browser"] != tc.want {
				t.Fatalf("the report's JSON says browser %v", m["browser"])
			}
		})
	}
}
