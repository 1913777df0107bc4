package live

import (
	"encoding/json"
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
	if a.Report == nil || deref(a.Report.WorkerID) != "sbw-ovhost" || deref(a.Report.CheckedAt) != "2026-11-07t12:00:00z" ||
		deref(a.Report.At) != "2026-11-07 13:00:00+01:00" || a.Degraded {
		t.Fatalf("Assess = %+v", a)
	}
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

func TestAssessUnreadable(t *testing.T) {
	for _, report := range []string{`{"ready":`, `[1]`} {
		a := Assess([]byte(report))
		if a.Report != nil || !a.Degraded || len(a.Problems) != 1 || !strings.HasPrefix(a.Problems[0], "the stored report is not") {
			t.Fatalf("Assess(%s) = %+v", report, a)
		}
	}
}

// TestAssessCaseSensitive: the report is read as the contract reads it,
// keys matched exactly: a key that differs from a contract property only
// in case is not read as it (it is a problem of its own), and the two
// reports of issue 29 read as they say.
func TestAssessCaseSensitive(t *testing.T) {
	t.Run("CHECKS", func(t *testing.T) {
		a := Assess(seedReport(`,"wipe":true`, ``, `"capacity":2`, `"CHECKS":{"wipe":true},"capacity":2`))
		if !reflect.DeepEqual(a.Checks, allChecks(map[string]CheckResult{agentsandbox.CheckWipe: CheckNotRun})) {
			t.Errorf("Checks = %+v, want wipe not run", a.Checks)
		}
		want := []string{"self-test check wipe did not run", `the report has a key "CHECKS" that differs from checks only in case: it is not read as checks`}
		if !reflect.DeepEqual(a.Problems, want) || !a.Degraded {
			t.Errorf("Problems = %q, want %q", a.Problems, want)
		}
	})
	t.Run("Host_Network", func(t *testing.T) {
		a := Assess(seedReport(`"host_network":false,`, `"Host_Network":true,"WORKSPACE":"persistent","host_network":false,`))
		wantFacts := map[string]any{"host_network": false, "credentials": false, "profile": false, "egress_proxy": true, "workspace": "ephemeral"}
		if !reflect.DeepEqual(a.Report.Facts, wantFacts) {
			t.Errorf("Facts = %v, want %v", a.Report.Facts, wantFacts)
		}
		want := []string{
			`the isolation report has a key "Host_Network" that differs from host_network only in case: it is not read as host_network`,
			`the isolation report has a key "WORKSPACE" that differs from workspace only in case: it is not read as workspace`,
		}
		if !reflect.DeepEqual(a.Problems, want) {
			t.Errorf("Problems = %q, want %q", a.Problems, want)
		}
	})
}

// TestAssessContradictions: the report's own details that contradict the
// isolation it claims, and limits it says are not enforced, are problems.
func TestAssessContradictions(t *testing.T) {
	iso := func(extra string) []byte {
		return seedReport(`"workspace":"ephemeral",`, `"workspace":"ephemeral",`+extra+`,`)
	}
	for _, tc := range []struct {
		name     string
		report   []byte
		problems []string
	}{
		{"Clean", iso(`"egress":{"public_only":true,"direct":"none"},"capabilities":"none","seccomp":true,"network_namespace":true,"host_files":"none","host_credentials":[]`), nil},
		{"PublicOnlyFalse", iso(`"egress":{"public_only":false}`), []string{"the worker reports egress.public_only: false: its sandboxes may reach private addresses"}},
		{"DirectAllowed", iso(`"egress":{"direct":"allowed"}`), []string{"the worker reports egress.direct: allowed: its sandboxes may connect without the proxy"}},
		{"Capabilities", iso(`"capabilities":"CAP_SYS_ADMIN"`), []string{"the worker reports capabilities: CAP_SYS_ADMIN: its sandboxes hold capabilities"}},
		{"CapabilitiesList", iso(`"capabilities":["CAP_NET_RAW","CAP_SYS_ADMIN"]`), []string{"the worker reports capabilities: CAP_NET_RAW, CAP_SYS_ADMIN: its sandboxes hold capabilities"}},
		{"HostFiles", iso(`"host_files":"/home"`), []string{"the worker reports host_files: /home: its sandboxes may see the host's files"}},
		{"SeccompFalse", iso(`"seccomp":false`), []string{"the worker reports seccomp: false: its sandboxes run without the seccomp filter"}},
		{"NetworkNamespaceFalse", iso(`"network_namespace":false`), []string{"the worker reports network_namespace: false: its sandboxes may share the host's network"}},
		{"ActiveOverCapacity", seedReport(`"active":0`, `"active":3`), []string{"the worker reports 3 active sandboxes, more than its capacity of 2"}},
		{"ActiveOverCapacityAsTheContractReadsIt", seedReport(`"active":0`, `"active":3.0e0`, `"capacity":2`, `"capacity":2.0`),
			[]string{"the worker reports 3 active sandboxes, more than its capacity of 2"}},
		{"ActiveAtCapacity", seedReport(`"active":0`, `"active":2.0`), nil},
		{"LimitsUncharged", seedReport(`"memory_mb":2048`, `"memory_mb":2048,"socket_memory":"uncharged (cgroup v1)"`),
			[]string{"limit socket_memory is not enforced: uncharged (cgroup v1)"}},
		{"LimitsNested", seedReport(`"memory_mb":2048`, `"memory_mb":2048,"io":{"bandwidth":"Not enforced: no io controller"}`),
			[]string{"limit io.bandwidth is not enforced: Not enforced: no io controller"}},
		{"LimitsUnenforcedList", seedReport(`"memory_mb":2048`, `"memory_mb":2048,"unenforced":["socket_memory","io"]`),
			[]string{"the worker reports limits it does not enforce: socket_memory, io"}},
		{"LimitsUnenforcedEmpty", seedReport(`"memory_mb":2048`, `"memory_mb":2048,"unenforced":[],"socket_memory":"charged"`), nil},
		{"LimitsEnforcedButUncharged", seedReport(`"memory_mb":2048`, `"memory_mb":2048,"socket_memory":"uncharged (cgroup v1)"`, `"limits":true`, `"limits":false`),
			[]string{"self-test check limits failed", "limit socket_memory is not enforced: uncharged (cgroup v1)"}},
		{"CleansWhatItQuotes", iso(`"capabilities":"CAP_\u202eNIMDA_SYS ovs_secret123\n"`),
			[]string{"the worker reports capabilities: CAP_[U+202E]NIMDA_SYS [redacted] : its sandboxes hold capabilities"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := Assess(tc.report)
			if !reflect.DeepEqual(a.Problems, tc.problems) || a.Degraded != (len(tc.problems) > 0) {
				t.Errorf("Problems = %q (degraded %v), want %q", a.Problems, a.Degraded, tc.problems)
			}
		})
	}
}

// TestNumberText: numbers read as the contract reads them.
func TestNumberText(t *testing.T) {
	for in, want := range map[string]string{
		"2": "2", "2.0": "2", "1e2": "100", "1E+2": "100", "-0.0": "0", "0.5": "0.5", "18446744073709551616": "18446744073709551616",
		"1.8446744073709551616e19": "18446744073709551616", "1e39": "1000000000000000000000000000000000000000", "1e40": "1e40", "2.5e-3": "2.5e-3",
	} {
		if got := NumberText(json.Number(in)); got != want {
			t.Errorf("NumberText(%s) = %s, want %s", in, got, want)
		}
	}
}

// TestAssessBigNumbers: integers the contract accepts however they are
// written decode and show as integers; nothing on the page is Go's.
func TestAssessBigNumbers(t *testing.T) {
	a := Assess(seedReport(`"capacity":2`, `"capacity":18446744073709551616`, `"active":0`, `"active":1e2`))
	if a.Report == nil || a.Degraded || NumberText(a.Report.Capacity) != "18446744073709551616" || NumberText(a.Report.Active) != "100" {
		t.Fatalf("Assess = %+v, %+v", a, a.Report)
	}
}
