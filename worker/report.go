package worker

import (
	"time"

	"openvibe.network/agentsandbox"
)

// Service is the worker implementation's name in its check-ins.
const Service = agentsandbox.ServiceCodesSandbox

// Self is what the worker says of itself in its report, beside what the
// self-test proved.
type Self struct {
	// WorkerID is the worker's name (e.g. "sbw-" + hostname), at most 64
	// characters; Version the worker's version.
	WorkerID, Version string
	// Bubblewrap is the bubblewrap version (from `bwrap --version`).
	Bubblewrap string
	// Limits are the limits of the sandboxes the worker creates (zero fields
	// take sandbox's defaults).
	Limits agentsandbox.Limits
	// Browser is true only when a headless browser was proved to start in a
	// sandbox through the proxy.
	Browser bool
}

// BuildReport assembles the check-in from the last self-test (nil before the
// first one) and the runtime's capacity and active count now. Each of the
// five isolation facts, and each extra claim, is set only when the checks
// that prove it passed: a fact that was not proved is left out, so Live
// refuses the report and the owner sees why. Reasons are capped to the
// contract's 10 items of 500 characters.
func BuildReport(self Self, last *Result, capacity, active int, now time.Time) agentsandbox.WorkerCheckIn {
	r := agentsandbox.WorkerCheckIn{
		WorkerID: truncate(self.WorkerID, 64), Service: Service, Version: truncate(self.Version, 64),
		Capacity: &capacity, Active: &active, Browser: ptr(self.Browser), At: ptr(now),
		Reasons: []string{},
	}
	ok := map[string]bool{}
	if last == nil {
		r.Ready = ptr(false)
		r.Reasons = []string{"no self-test has run yet"}
	} else {
		ok = last.Checks
		r.Ready = ptr(last.Passed)
		r.Checks = ok
		r.CheckedAt = ptr(last.CheckedAt)
		for _, s := range last.Reasons {
			if len(r.Reasons) == 10 {
				break
			}
			r.Reasons = append(r.Reasons, truncate(s, 500))
		}
	}
	r.Isolation = isolation(self, ok, last != nil && last.UserNamespace)
	return r
}

// isolation sets each fact and extra only when its checks passed.
func isolation(self Self, ok map[string]bool, userNS bool) agentsandbox.Isolation {
	all := func(checks ...string) bool {
		for _, c := range checks {
			if !ok[c] {
				return false
			}
		}
		return true
	}
	iso := agentsandbox.Isolation{Extra: map[string]any{"sandbox": "bubblewrap"}}
	if self.Bubblewrap != "" {
		iso.Extra["bubblewrap"] = self.Bubblewrap
	}
	if userNS {
		iso.Extra["user_namespace"] = true
	}
	if all(agentsandbox.CheckNetworkNamespace) {
		iso.Extra["network_namespace"] = true
	}
	if all(agentsandbox.CheckNetworkNamespace, agentsandbox.CheckNoDirectEgress) {
		iso.HostNetwork = ptr(false)
	}
	if all(agentsandbox.CheckCleanEnv, agentsandbox.CheckNoHostFiles) {
		iso.Credentials = ptr(false)
		iso.Extra["host_credentials"] = "none"
	}
	if all(agentsandbox.CheckNoHostFiles) {
		iso.Profile = ptr(false)
		iso.Extra["host_files"] = "none"
	}
	if all(agentsandbox.CheckEgressRefusesPrivate, agentsandbox.CheckNoDirectEgress) {
		iso.EgressProxy = ptr(true)
		iso.Extra["egress"] = map[string]any{"via": "proxy", "public_only": true, "ports": agentsandbox.EgressPorts(), "direct": "none"}
	}
	if all(agentsandbox.CheckNoCapabilities) {
		iso.Extra["capabilities"] = "none"
	}
	if all(agentsandbox.CheckSeccomp) {
		iso.Extra["seccomp"] = true
	}
	if all(agentsandbox.CheckWipe) {
		iso.Workspace = ptr("ephemeral")
		iso.Extra["workspace_kind"] = "tmpfs, wiped with the sandbox"
	}
	l := self.Limits
	iso.Extra["limits"] = map[string]any{
		"kind": "cgroup", "enforced": all(agentsandbox.CheckLimits),
		"memory_mb": or(l.MemoryMB, agentsandbox.DefaultMemoryMB), "disk_mb": or(l.DiskMB, agentsandbox.DefaultDiskMB),
		"pids": or(l.Pids, agentsandbox.DefaultPids), "cpu_percent": or(l.CPUPercent, agentsandbox.DefaultCPUPercent),
		"time_box_minutes": []int{int(agentsandbox.DefaultTimeBox / time.Minute), int(agentsandbox.MaxTimeBox / time.Minute)},
	}
	return iso
}

func ptr[T any](v T) *T { return &v }

func or(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

// truncate cuts s to at most n characters (code points).
func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
