package live

import (
	"fmt"
	"slices"
	"strings"

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

// MaxProblemChars bounds each problem's text.
const MaxProblemChars = 300

// Assessment is what an accepted report says beyond the contract's five
// facts: whether the worker reports a problem. Health stays what the
// contract makes it (Derive); an alive stream whose worker reports a problem
// is alive and Degraded.
type Assessment struct {
	// Report is the stored report decoded; nil when it cannot be (then
	// Problems says so).
	Report *Report
	// Checks are the self-test's checks: every check of
	// agentsandbox.Checks(), in that order, then any other the report
	// names, in name order.
	Checks []Check
	// Problems say, for a person, what the report shows wrong: the worker
	// says it is not ready, a check failed or did not run, a limit is not
	// enforced, the report's own details contradict the isolation it
	// claims, or a key differs from one the contract names only in case
	// (see Assess). Each is cleaned (CleanText). Empty when nothing is
	// wrong.
	Problems []string
	// Degraded is true when there is any problem.
	Degraded bool
}

// Assess reads a stored report (as Registration.Report holds it) and lists
// its problems:
//   - the worker says it is not ready, or no self-test has run;
//   - a self-test check failed, or one of agentsandbox.Checks() is absent
//     (it did not run);
//   - isolation.limits says a limit is not enforced: enforced is false, a
//     value (at any depth) is a string that starts with "uncharged" or
//     "not enforced", or unenforced is a list that is not empty;
//   - the report's own details contradict isolation: egress.public_only
//     false, egress.direct other than "none", capabilities,
//     host_credentials or host_files other than "none" (or an empty list),
//     seccomp or network_namespace false, active greater than capacity;
//   - a top-level key, or an isolation key, that differs from one the
//     contract names only in case (it is not read as that one).
func Assess(report []byte) Assessment {
	var a Assessment
	rep, err := DecodeReport(report)
	if err != nil {
		a.Problems = []string{err.Error()}
		a.Degraded = true
		return a
	}
	a.Report = rep
	a.Checks = checks(rep.Checks)
	var p problems
	if rep.Ready != nil && !*rep.Ready {
		p.add("the worker says it is not ready")
	}
	if rep.CheckedAt == nil {
		p.add("no self-test has run yet")
	}
	for _, c := range a.Checks {
		switch c.Result {
		case CheckFailed:
			p.add(fmt.Sprintf("self-test check %s failed", c.Name))
		case CheckNotRun:
			p.add(fmt.Sprintf("self-test check %s did not run", c.Name))
		}
	}
	if limits, ok := rep.Isolation["limits"].(map[string]any); ok {
		limitProblems(&p, limits)
	}
	contradictions(&p, rep)
	foldedKeys(&p, rep)
	a.Problems = p.list
	a.Degraded = len(a.Problems) > 0
	return a
}

// problems collects an assessment's problems, cleaned.
type problems struct{ list []string }

func (p *problems) add(s string) { p.list = append(p.list, CleanText(s, MaxProblemChars)) }

// limitProblems adds what isolation.limits says is not enforced.
func limitProblems(p *problems, limits map[string]any) {
	if limits["enforced"] == false {
		p.add("the cgroup limits are not enforced")
	}
	if list, ok := limits["unenforced"].([]any); ok && len(list) > 0 {
		p.add("the worker reports limits it does not enforce: " + displayList(list))
	}
	walkLimits(p, "", limits, 0)
}

// walkLimits adds each string value under m (at most 8 levels deep) that
// says a limit is not enforced, with its key.
func walkLimits(p *problems, prefix string, m map[string]any, depth int) {
	if depth > 8 {
		return
	}
	for _, k := range sortedKeys(m) {
		switch v := m[k].(type) {
		case string:
			if l := strings.ToLower(strings.TrimSpace(v)); strings.HasPrefix(l, "uncharged") || strings.HasPrefix(l, "not enforced") {
				p.add(fmt.Sprintf("limit %s%s is not enforced: %s", prefix, k, v))
			}
		case map[string]any:
			walkLimits(p, prefix+k+".", v, depth+1)
		}
	}
}

// contradictions adds what the report's own details say against the
// isolation it claims.
func contradictions(p *problems, rep *Report) {
	iso := rep.Isolation
	if egress, ok := iso["egress"].(map[string]any); ok {
		if egress["public_only"] == false {
			p.add("the worker reports egress.public_only: false: its sandboxes may reach private addresses")
		}
		if d, ok := egress["direct"]; ok && !isNone(d) {
			p.add("the worker reports egress.direct: " + Display(d) + ": its sandboxes may connect without the proxy")
		}
	}
	for _, k := range []struct{ key, what string }{
		{"capabilities", "its sandboxes hold capabilities"},
		{"host_credentials", "its sandboxes may hold the host's credentials"},
		{"host_files", "its sandboxes may see the host's files"},
	} {
		if v, ok := iso[k.key]; ok && !isNone(v) {
			p.add("the worker reports " + k.key + ": " + Display(v) + ": " + k.what)
		}
	}
	if iso["seccomp"] == false {
		p.add("the worker reports seccomp: false: its sandboxes run without the seccomp filter")
	}
	if iso["network_namespace"] == false {
		p.add("the worker reports network_namespace: false: its sandboxes may share the host's network")
	}
	if rep.Active != "" && rep.Capacity != "" {
		if c, ok := compareNumbers(rep.Active, rep.Capacity); ok && c > 0 {
			p.add(fmt.Sprintf("the worker reports %s active sandboxes, more than its capacity of %s", NumberText(rep.Active), NumberText(rep.Capacity)))
		}
	}
}

// isNone reports whether v says "none": the string "none" (in any case) or
// an empty list.
func isNone(v any) bool {
	switch x := v.(type) {
	case string:
		return strings.EqualFold(strings.TrimSpace(x), "none")
	case []any:
		return len(x) == 0
	}
	return false
}

// foldedKeys adds each key that differs from one the contract names only in
// case: the contract does not read it as that one, and neither does Live.
func foldedKeys(p *problems, rep *Report) {
	for _, k := range sortedKeys(rep.Other) {
		if name, ok := foldsOnto(k, contractKeys); ok {
			p.add(fmt.Sprintf("the report has a key %q that differs from %s only in case: it is not read as %s", k, name, name))
		}
	}
	for _, k := range sortedKeys(rep.Isolation) {
		if name, ok := foldsOnto(k, agentsandbox.IsolationFacts()); ok {
			p.add(fmt.Sprintf("the isolation report has a key %q that differs from %s only in case: it is not read as %s", k, name, name))
		}
	}
}

// foldsOnto returns the name of names that k equals but for case.
func foldsOnto(k string, names []string) (string, bool) {
	for _, n := range names {
		if k != n && strings.EqualFold(k, n) {
			return n, true
		}
	}
	return "", false
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
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
