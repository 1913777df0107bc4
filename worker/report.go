package worker

import (
	"fmt"
	"maps"
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
	// ExecIsolation is how one sandbox's commands are kept from each other
	// (sandbox.ExecIsolation): "landlock" (a domain per command), or "none"
	// (an earlier command's processes can write a later one's memory and
	// output); "" says nothing.
	ExecIsolation string
	// Limits are the limits of the sandboxes the worker creates (zero fields
	// take the defaults).
	Limits agentsandbox.Limits
	// SocketMemory says how the sandboxes' socket buffers are bounded (the
	// runtime's SocketMemory); the report's limits name it when they are
	// enforced. Empty: not said.
	SocketMemory string
	// SelfTestMaxAge is how old the last self-test may be before its facts
	// are no longer claimed (0: no bound). The self-test repeats well within
	// it; a worker that cannot run it keeps no old proof alive.
	SelfTestMaxAge time.Duration
}

// Slots is the runtime's state as the report tells it.
type Slots struct {
	// Capacity and Active are the slots for sandboxes and those in use.
	Capacity, Active int
	// Broken says, per slot, why it is out of use (an unverified wipe).
	Broken []string
}

// BuildReport assembles the check-in from the last self-test (nil before the
// first one) and the runtime's slots now. Each of the five isolation facts,
// and each extra claim, is set only when the checks that prove it passed: a
// fact that was not proved is left out, so Live refuses the report and the
// owner sees why. The word stays true under attack: the report is not ready,
// and claims no ephemeral workspace, while any slot's wipe is unverified;
// and it claims no fact at all from a self-test older than
// self.SelfTestMaxAge. Reasons (why it is not ready) are capped to the
// contract's 10 items of 500 characters.
func BuildReport(self Self, last *Result, slots Slots, now time.Time) agentsandbox.WorkerCheckIn {
	r := agentsandbox.WorkerCheckIn{
		WorkerID: truncate(self.WorkerID, 64), Service: Service, Version: truncate(self.Version, 64),
		Capacity: &slots.Capacity, Active: &slots.Active, At: new(now),
	}
	var reasons []string
	reasons = append(reasons, slots.Broken...)
	ok := map[string]bool{}
	switch {
	case last == nil:
		reasons = append(reasons, "no self-test has run yet")
	case self.SelfTestMaxAge > 0 && now.Sub(last.CheckedAt) > self.SelfTestMaxAge:
		reasons = append(reasons, fmt.Sprintf("the last self-test ran %s ago, longer than the %s its proof holds for; no fact is claimed until one runs again",
			now.Sub(last.CheckedAt).Round(time.Second), self.SelfTestMaxAge))
		r.CheckedAt = new(last.CheckedAt)
	default:
		ok = maps.Clone(last.Checks)
		r.Checks = last.Checks
		r.CheckedAt = new(last.CheckedAt)
		reasons = append(reasons, last.Reasons...)
	}
	if len(slots.Broken) > 0 {
		delete(ok, agentsandbox.CheckWipe) // a wipe that failed is not proved ephemeral
	}
	r.Ready = new(len(reasons) == 0 && last != nil && last.Passed)
	r.Reasons = []string{}
	for _, s := range reasons {
		if len(r.Reasons) == 10 {
			break
		}
		r.Reasons = append(r.Reasons, truncate(s, 500))
	}
	r.Isolation = isolation(self, ok, len(ok) > 0 && last.UserNamespace)
	if len(ok) > 0 && last.Image != nil && last.Image.Passed {
		// Image sandboxes are claimed only while a fresh self-test proved
		// every check in one, and the report says which image it used.
		r.Isolation.Extra["images"] = true
		r.Isolation.Extra["images_proved_with"] = last.Image.Ref + "@" + last.Image.Digest
	}
	// The browser is claimed only while a fresh self-test proved it.
	r.Browser = new(ok[agentsandbox.CheckBrowser])
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
	switch self.ExecIsolation {
	case "landlock":
		iso.Extra["exec_isolation"] = "landlock: each command in a domain of its own"
	case "none":
		iso.Extra["exec_isolation"] = "none: the kernel has no Landlock, so a command's processes can reach a later command's"
	}
	if userNS {
		iso.Extra["user_namespace"] = true
	}
	if all(agentsandbox.CheckNetworkNamespace) {
		iso.Extra["network_namespace"] = true
	}
	if all(agentsandbox.CheckNetworkNamespace, agentsandbox.CheckNoDirectEgress) {
		iso.HostNetwork = new(false)
	}
	// With egress the broker is proved too (a sandbox may then hold a
	// person's secrets, as placeholders): credentials is not claimed
	// while that check failed.
	brokered, ran := ok[agentsandbox.CheckCredentialsBrokered]
	if all(agentsandbox.CheckCleanEnv, agentsandbox.CheckNoHostFiles) && (brokered || !ran) {
		iso.Credentials = new(false)
		iso.Extra["host_credentials"] = "none"
	}
	if all(agentsandbox.CheckCredentialsBrokered, agentsandbox.CheckCleanEnv) {
		// A person's credentials reach the sandbox only as placeholders the
		// proxy brokers (docs/egress.md, Secrets).
		iso.Extra["credentials_brokered"] = true
	}
	if all(agentsandbox.CheckNoHostFiles) {
		iso.Profile = new(false)
		iso.Extra["host_files"] = "none"
	}
	if all(agentsandbox.CheckEgressRefusesPrivate, agentsandbox.CheckNoDirectEgress) {
		iso.EgressProxy = new(true)
		// What holds for every sandbox whatever its policy: a policy only
		// narrows public_only (none, public, allow: see EgressModes).
		iso.Extra["egress"] = map[string]any{"via": "proxy", "public_only": true, "ports": agentsandbox.EgressPorts(), "direct": "none",
			"policies": agentsandbox.EgressModes()}
	}
	if all(agentsandbox.CheckNoCapabilities) {
		iso.Extra["capabilities"] = "none"
	}
	if all(agentsandbox.CheckSeccomp) {
		iso.Extra["seccomp"] = true
	}
	if all(agentsandbox.CheckWipe) {
		iso.Workspace = new("ephemeral")
		iso.Extra["workspace_kind"] = "tmpfs, wiped with the sandbox"
	}
	l := self.Limits.WithDefaults()
	iso.Extra["limits"] = map[string]any{
		"kind": "cgroup", "enforced": all(agentsandbox.CheckLimits),
		"memory_mb": l.MemoryMB, "disk_mb": l.DiskMB, "pids": l.Pids, "cpu_percent": l.CPUPercent,
		"time_box_minutes": []int{int(agentsandbox.DefaultTimeBox / time.Minute), int(agentsandbox.MaxTimeBox / time.Minute)},
	}
	if all(agentsandbox.CheckLimits) && self.SocketMemory != "" {
		iso.Extra["limits"].(map[string]any)["socket_memory"] = self.SocketMemory
	}
	return iso
}

// truncate cuts s to at most n characters (code points).
func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
