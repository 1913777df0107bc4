package live

import (
	"reflect"
	"strings"
	"testing"

	"openvibe.network/agentsandbox"
)

// seedReport is the contract's worker check-in example with edits.
func seedReport(edits ...string) []byte {
	s := `{"worker_id":"sbw-ovhost","service":"codes-sandbox","version":"0.7.0","ready":true,
	"checks":{"network_namespace":true,"no_direct_egress":true,"egress_refuses_private":true,"clean_env":true,
	"no_host_files":true,"no_capabilities":true,"seccomp":true,"limits":true,"wipe":true},
	"checked_at":"2026-11-07T12:00:00.000Z",
	"isolation":{"host_network":false,"credentials":false,"profile":false,"egress_proxy":true,"workspace":"ephemeral",
	"limits":{"kind":"cgroup","enforced":true,"memory_mb":2048}},"capacity":2,"active":0,"at":"2026-11-07T12:00:00.000Z"}`
	for i := 0; i+1 < len(edits); i += 2 {
		s = strings.Replace(s, edits[i], edits[i+1], 1)
	}
	return []byte(s)
}

func allChecks(override map[string]CheckResult) []Check {
	var out []Check
	for _, n := range agentsandbox.Checks() {
		r := CheckPassed
		if o, ok := override[n]; ok {
			r = o
		}
		out = append(out, Check{n, r})
	}
	return out
}

func TestAssess(t *testing.T) {
	for _, tc := range []struct {
		name     string
		report   []byte
		checks   []Check
		problems []string
	}{
		{"OK", seedReport(), allChecks(nil), nil},
		{"NotReady", seedReport(`"ready":true`, `"ready":false`), allChecks(nil), []string{"the worker says it is not ready"}},
		{"CheckFailed", seedReport(`"limits":true`, `"limits":false`), allChecks(map[string]CheckResult{agentsandbox.CheckLimits: CheckFailed}),
			[]string{"self-test check limits failed"}},
		{"CheckNotRun", seedReport(`,"wipe":true`, ``), allChecks(map[string]CheckResult{agentsandbox.CheckWipe: CheckNotRun}),
			[]string{"self-test check wipe did not run"}},
		{"LimitsNotEnforced", seedReport(`"enforced":true`, `"enforced":false`), allChecks(nil), []string{"the cgroup limits are not enforced"}},
		{"ExtraCheck", seedReport(`"wipe":true`, `"wipe":true,"browser":false,"a_check":true`),
			append(allChecks(nil), Check{"a_check", CheckPassed}, Check{"browser", CheckFailed}), []string{"self-test check browser failed"}},
		{"NoSelfTestYet", []byte(`{"ready":false,"checked_at":null,"isolation":{"host_network":false}}`),
			allChecks(map[string]CheckResult{
				agentsandbox.CheckNetworkNamespace: CheckNotRun, agentsandbox.CheckNoDirectEgress: CheckNotRun, agentsandbox.CheckEgressRefusesPrivate: CheckNotRun,
				agentsandbox.CheckCleanEnv: CheckNotRun, agentsandbox.CheckNoHostFiles: CheckNotRun, agentsandbox.CheckNoCapabilities: CheckNotRun,
				agentsandbox.CheckSeccomp: CheckNotRun, agentsandbox.CheckLimits: CheckNotRun, agentsandbox.CheckWipe: CheckNotRun}),
			[]string{"the worker says it is not ready", "no self-test has run yet", "self-test check network_namespace did not run",
				"self-test check no_direct_egress did not run", "self-test check egress_refuses_private did not run", "self-test check clean_env did not run",
				"self-test check no_host_files did not run", "self-test check no_capabilities did not run", "self-test check seccomp did not run",
				"self-test check limits did not run", "self-test check wipe did not run"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := Assess(tc.report)
			if a.Report == nil {
				t.Fatalf("Assess did not decode the report: %v", a.Problems)
			}
			if !reflect.DeepEqual(a.Checks, tc.checks) {
				t.Errorf("Checks = %+v\nwant %+v", a.Checks, tc.checks)
			}
			if !reflect.DeepEqual(a.Problems, tc.problems) || a.Degraded != (len(tc.problems) > 0) {
				t.Errorf("Problems = %q (degraded %v), want %q", a.Problems, a.Degraded, tc.problems)
			}
		})
	}
}

// TestAssessTimes: the contract's other date-time spellings are kept as
// written, and the rest of the report still decodes.
func TestAssessTimes(t *testing.T) {
	a := Assess(seedReport(`"checked_at":"2026-11-07T12:00:00.000Z"`, `"checked_at":"2026-11-07t12:00:00z"`, `"at":"2026-11-07T12:00:00.000Z"`, `"at":"2026-11-07 13:00:00+01:00"`))
	if a.Report == nil || a.Report.WorkerID != "sbw-ovhost" || a.CheckedAt != "2026-11-07t12:00:00z" || a.At != "2026-11-07 13:00:00+01:00" || a.Degraded {
		t.Fatalf("Assess = %+v", a)
	}
}

func TestAssessUnreadable(t *testing.T) {
	a := Assess([]byte(`{"ready":"yes"}`))
	if a.Report != nil || !a.Degraded || len(a.Problems) != 1 || !strings.HasPrefix(a.Problems[0], "the stored report cannot be read") {
		t.Fatalf("Assess = %+v", a)
	}
}
