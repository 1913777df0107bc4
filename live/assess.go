package live

import (
	"encoding/json"
	"fmt"
	"slices"

	"openvibe.network/agentsandbox"
)

// CheckResult is what a report says of one self-test check.
type CheckResult string

// The check results. A check of agentsandbox.Checks() that a report's
// checks leave out did not run: it is CheckNotRun, never passed.
const (
	CheckPassed CheckResult = "passed"
	CheckFailed CheckResult = "failed"
	CheckNotRun CheckResult = "not_run"
)

// Check is one self-test check as a report states it.
type Check struct {
	Name   string      `json:"name"`
	Result CheckResult `json:"result"`
}

// Assessment is what an accepted report says beyond the contract's five
// facts: whether the worker reports a problem. Health stays what the
// contract makes it (Derive); an alive stream whose worker reports a problem
// is alive and Degraded.
type Assessment struct {
	// Report is the stored report decoded; nil when it cannot be (then
	// Problems says so).
	Report *agentsandbox.WorkerCheckIn
	// At and CheckedAt are the report's times as the worker wrote them
	// ("" when absent; CheckedAt is "" too when null).
	At, CheckedAt string
	// Checks are the self-test's checks: every check of
	// agentsandbox.Checks(), in that order, then any other the report
	// names, in name order.
	Checks []Check
	// Problems say, for a person, what the worker reports wrong: it says it
	// is not ready, a check failed or did not run, the cgroup limits are not
	// enforced. Empty when nothing is wrong.
	Problems []string
	// Degraded is true when there is any problem.
	Degraded bool
}

// Assess reads a stored report (as Registration.Report holds it) and lists
// its problems.
func Assess(report []byte) Assessment {
	var a Assessment
	rep, at, checkedAt, err := decodeReport(report)
	if err != nil {
		a.Problems = []string{"the stored report cannot be read: " + err.Error()}
		a.Degraded = true
		return a
	}
	a.Report, a.At, a.CheckedAt = rep, at, checkedAt
	a.Checks = checks(rep.Checks)
	if rep.Ready != nil && !*rep.Ready {
		a.Problems = append(a.Problems, "the worker says it is not ready")
	}
	if checkedAt == "" {
		a.Problems = append(a.Problems, "no self-test has run yet")
	}
	for _, c := range a.Checks {
		switch c.Result {
		case CheckFailed:
			a.Problems = append(a.Problems, fmt.Sprintf("self-test check %s failed", c.Name))
		case CheckNotRun:
			a.Problems = append(a.Problems, fmt.Sprintf("self-test check %s did not run", c.Name))
		}
	}
	if limits, ok := rep.Isolation.Extra["limits"].(map[string]any); ok && limits["enforced"] == false {
		a.Problems = append(a.Problems, "the cgroup limits are not enforced")
	}
	a.Degraded = len(a.Problems) > 0
	return a
}

// checks lists the self-test's checks in the order of agentsandbox.Checks(),
// then the others the report names.
func checks(reported map[string]bool) []Check {
	known := agentsandbox.Checks()
	out := make([]Check, 0, len(known)+len(reported))
	for _, name := range known {
		passed, ran := reported[name]
		out = append(out, Check{Name: name, Result: result(passed, ran)})
	}
	var others []string
	for name := range reported {
		if !slices.Contains(known, name) {
			others = append(others, name)
		}
	}
	slices.Sort(others)
	for _, name := range others {
		out = append(out, Check{Name: name, Result: result(reported[name], true)})
	}
	return out
}

func result(passed, ran bool) CheckResult {
	switch {
	case !ran:
		return CheckNotRun
	case passed:
		return CheckPassed
	}
	return CheckFailed
}

// decodeReport decodes a report into the shared type. The contract accepts
// date-time spellings the type's decoder does not (see
// agentsandbox.WorkerCheckIn.UnmarshalJSON), so the two times are taken out
// first and returned as written.
func decodeReport(report []byte) (rep *agentsandbox.WorkerCheckIn, at, checkedAt string, err error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(report, &fields); err != nil {
		return nil, "", "", fmt.Errorf("decode report: %w", err)
	}
	at, checkedAt = rawString(fields["at"]), rawString(fields["checked_at"])
	delete(fields, "at")
	delete(fields, "checked_at")
	rest, err := json.Marshal(fields)
	if err != nil {
		return nil, "", "", fmt.Errorf("decode report: %w", err)
	}
	rep = new(agentsandbox.WorkerCheckIn)
	if err := json.Unmarshal(rest, rep); err != nil {
		return nil, "", "", err
	}
	return rep, at, checkedAt, nil
}

// rawString returns the JSON string in raw, "" for anything else.
func rawString(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}
