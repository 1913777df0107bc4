package httpapi

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"openvibe.network/agentsandbox"
	"openvibe.network/agentsandbox/live"
)

// workerPage is what the owner's page of a stream's worker shows.
type workerPage struct {
	StreamID   string
	Refresh    int
	SignedInAs string
	Banner     banner
	// Stale: the report below is the last one, not a current one; AsOf
	// says when it was received ("as of …, N minutes ago").
	Stale     bool
	AsOf      string
	HasReport bool
	Facts     []factRow
	Checks    []checkRow
	Worker    []item
	Egress    []item
	Limits    []item
	Other     []item
	Reasons   []string // the worker's own reasons
	Refusal   *refusalRow
	Timeline  timeline
}

// banner is the state at the top of the page, in its colour (Class).
type banner struct {
	Class  string // alive, degraded, stale, refused or absent
	Title  string
	Reason string
	Detail string
	// Lists say at the top what is wrong: the worker's problems and own
	// reasons (degraded), or what to fix and the refused report's reasons.
	Lists []list
}

// list is a heading and its items.
type list struct {
	Heading string
	Items   []string
}

// item is one labelled value.
type item struct{ Label, Value string }

// factRow is one of the five isolation facts Live requires.
type factRow struct {
	Name     string
	Meaning  string
	Required string // the JSON value the contract requires
	Reported string // the JSON value the report gives, "" when absent
	States   bool   // the report states the required value
}

// checkRow is one self-test check; Result is passed, failed or not_run.
type checkRow struct {
	Name   string
	Result live.CheckResult
}

// refusalRow is the last refusal as the page shows it.
type refusalRow struct {
	At, Service, Subject string
	Errors               []agentsandbox.ValidationError
	Reasons              []string
}

// factMeanings say, for a person, what each fact means.
var factMeanings = map[string]string{
	agentsandbox.FactHostNetwork: "The sandbox has its own network namespace: it cannot reach the host's network.",
	agentsandbox.FactCredentials: "No credential of the host, the worker or the person is inside the sandbox.",
	agentsandbox.FactProfile:     "No browser or desktop profile of the host is mounted in the sandbox.",
	agentsandbox.FactEgressProxy: "The sandbox's only way out is the worker's proxy, which applies the egress guard.",
	agentsandbox.FactWorkspace:   "The workspace is the sandbox's own and is gone with the wipe.",
}

// workerPageOf shapes v (and the stream's timeline) for the page.
func (s *Server) workerPageOf(streamID, person string, v ownerView, tl timeline) workerPage {
	p := workerPage{StreamID: streamID, Refresh: refreshSeconds, SignedInAs: person, Timeline: tl}
	p.Banner = bannerOf(v)
	a := v.assessment
	rep := a.Report
	p.HasReport = rep != nil
	if v.State == live.StateStale && v.ReceivedAt != nil {
		p.Stale = true
		p.AsOf = fmt.Sprintf("as of %s, %s", formatTime(*v.ReceivedAt), minutesAgo(time.Duration(*v.AgeSeconds*float64(time.Second))))
	}
	p.Facts = facts(rep)
	for _, c := range v.Checks {
		p.Checks = append(p.Checks, checkRow{c.Name, c.Result})
	}
	if rep != nil {
		p.Worker = workerItems(v, a)
		p.Egress, p.Limits, p.Other = isolationItems(rep.Isolation.Extra)
		p.Reasons = rep.Reasons
	}
	if ref := v.Refusal; ref != nil {
		p.Refusal = &refusalRow{At: formatTime(ref.At), Service: named(ref.ServiceName, ref.ServiceID), Subject: named(ref.SubjectName, ref.SubjectID),
			Errors: ref.Errors, Reasons: ref.Reasons}
	}
	return p
}

// bannerOf is the page's banner for v: never green when the worker reports
// a problem.
func bannerOf(v ownerView) banner {
	b := banner{Class: string(v.State), Title: strings.ToUpper(string(v.State)), Reason: sentence(v.Reason) + "."}
	if v.ReceivedAt != nil {
		b.Detail = fmt.Sprintf("Last accepted check-in received %s (%s)", formatAge(time.Duration(*v.AgeSeconds*float64(time.Second))), formatTime(*v.ReceivedAt))
		if v.AliveUntil != nil && v.State == live.StateAlive {
			b.Detail += "; counts as alive until " + formatTime(*v.AliveUntil)
		}
		b.Detail += "."
	}
	var reasons []string
	if rep := v.assessment.Report; rep != nil {
		reasons = rep.Reasons
	}
	switch {
	case v.State == live.StateAlive && v.Degraded:
		b.Class, b.Title = "degraded", "ALIVE — the worker reports a problem"
		b.Lists = appendList(appendList(nil, "What the worker reports:", v.Problems), "The worker's own reasons:", reasons)
	case v.State == live.StateStale && v.Degraded:
		b.Lists = appendList(appendList(nil, "Its last report also showed:", v.Problems), "The worker's own reasons:", reasons)
	case v.State == live.StateRefused && v.Refusal != nil:
		b.Reason = "The last check-in was refused by the contract, so the worker is not registered at all."
		var fix []string
		for _, e := range v.Refusal.Errors {
			fix = append(fix, cmp.Or(e.Path, "(the whole report)")+": "+e.Message)
		}
		b.Lists = appendList(appendList(nil, "What to fix:", fix), "The worker's own reasons:", v.Refusal.Reasons)
	}
	return b
}

// appendList appends a list unless it has no items.
func appendList(ls []list, heading string, items []string) []list {
	if len(items) == 0 {
		return ls
	}
	return append(ls, list{heading, items})
}

// facts lists the five facts and what rep states of each (rep may be nil).
func facts(rep *agentsandbox.WorkerCheckIn) []factRow {
	var iso agentsandbox.Isolation
	if rep != nil {
		iso = rep.Isolation
	}
	reported := map[string]any{}
	for name, v := range map[string]any{
		agentsandbox.FactHostNetwork: iso.HostNetwork, agentsandbox.FactCredentials: iso.Credentials,
		agentsandbox.FactProfile: iso.Profile, agentsandbox.FactEgressProxy: iso.EgressProxy, agentsandbox.FactWorkspace: iso.Workspace,
	} {
		reported[name] = v
	}
	required := map[string]string{
		agentsandbox.FactHostNetwork: "false", agentsandbox.FactCredentials: "false", agentsandbox.FactProfile: "false",
		agentsandbox.FactEgressProxy: "true", agentsandbox.FactWorkspace: `"` + agentsandbox.WorkspaceEphemeral + `"`,
	}
	var out []factRow
	for _, name := range agentsandbox.IsolationFacts() {
		f := factRow{Name: name, Meaning: factMeanings[name], Required: required[name], Reported: jsonOf(reported[name])}
		f.States = f.Reported == f.Required
		out = append(out, f)
	}
	return out
}

// jsonOf is v as compact JSON; "" for a nil pointer.
func jsonOf(v any) string {
	switch p := v.(type) {
	case *bool:
		if p == nil {
			return ""
		}
	case *string:
		if p == nil {
			return ""
		}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return string(b)
}

const notStated = "not stated"

// workerItems describe the worker as the report does, and who checked it in.
func workerItems(v ownerView, a live.Assessment) []item {
	rep := a.Report
	active, capacity := "?", notStated
	if rep.Active != nil {
		active = fmt.Sprint(*rep.Active)
	}
	if rep.Capacity != nil {
		capacity = fmt.Sprint(*rep.Capacity)
	}
	checkedAt := "not yet"
	if a.CheckedAt != "" {
		checkedAt = a.CheckedAt
	}
	items := []item{
		{"Worker id", orNotStated(rep.WorkerID)},
		{"Service", orNotStated(rep.Service)},
		{"Version", orNotStated(rep.Version)},
		{"Sandboxes", active + " active of capacity " + capacity},
		{"Browser", yesNo(rep.Browser)},
		{"Says it is ready", yesNo(rep.Ready) + " (shown, not used for the state)"},
		{"Self-test ran at", checkedAt},
		{"Report assembled at", orNotStated(a.At)},
	}
	if v.Service != nil && v.Subject != nil {
		items = append(items, item{"Checked in by", "service " + named(v.Service.Name, v.Service.ID) + ", for " + named(v.Subject.Name, v.Subject.ID)})
	}
	return items
}

// named shows a principal by name, with its id.
func named(name, id string) string {
	if name == "" {
		return id + " (no longer known)"
	}
	return name + " (" + id + ")"
}

// isolationItems describe what the isolation report says beyond the five
// facts: egress, limits, and everything else.
func isolationItems(extra map[string]any) (egress, limits, other []item) {
	if m, ok := extra["egress"].(map[string]any); ok {
		egress = mapItems(m, []string{"via", "public_only", "ports", "direct", "policies"}, map[string]string{
			"via": "Goes out via", "public_only": "Public addresses only", "ports": "Ports", "direct": "Direct connections", "policies": "Policies",
		})
	}
	if m, ok := extra["limits"].(map[string]any); ok {
		limits = mapItems(m, []string{"kind", "enforced", "memory_mb", "disk_mb", "pids", "cpu_percent", "time_box_minutes"}, map[string]string{
			"kind": "Kind", "enforced": "Enforced", "memory_mb": "Memory (MB)", "disk_mb": "Disk (MB)", "pids": "Processes",
			"cpu_percent": "CPU (% of a core)", "time_box_minutes": "Time box (minutes, default and most)",
		})
	}
	var keys []string
	for k := range extra {
		if k != "egress" && k != "limits" {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		other = append(other, item{k, display(extra[k])})
	}
	return egress, limits, other
}

// mapItems lists m's keys in order first, then the others by name.
func mapItems(m map[string]any, order []string, labels map[string]string) []item {
	var out []item
	for _, k := range order {
		if v, ok := m[k]; ok {
			out = append(out, item{labels[k], display(v)})
		}
	}
	var rest []string
	for k := range m {
		if !slices.Contains(order, k) {
			rest = append(rest, k)
		}
	}
	slices.Sort(rest)
	for _, k := range rest {
		out = append(out, item{k, display(m[k])})
	}
	return out
}

// display shows a JSON value for a person: yes/no, a string as it is, a
// list of plain values joined, anything else as compact JSON.
func display(v any) string {
	switch x := v.(type) {
	case bool:
		if x {
			return "yes"
		}
		return "no"
	case string:
		return x
	case []any:
		parts := make([]string, 0, len(x))
		for _, e := range x {
			switch e.(type) {
			case map[string]any, []any:
				return jsonOf(v)
			}
			parts = append(parts, display(e))
		}
		return strings.Join(parts, ", ")
	}
	return jsonOf(v)
}

func orNotStated(s string) string {
	if s == "" {
		return notStated
	}
	return s
}

func yesNo(b *bool) string {
	switch {
	case b == nil:
		return notStated
	case *b:
		return "yes"
	}
	return "no"
}
