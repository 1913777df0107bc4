package httpapi

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"openvibe.network/agentsandbox"
	"openvibe.network/agentsandbox/live"
)

// maxValueChars bounds each value of a report the page shows.
const maxValueChars = 500

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
	// FactsOf says whose facts the table shows: "the report", or "the
	// refused report" when the last check-in was refused.
	FactsOf  string
	Facts    []factRow
	Checks   []checkRow
	Worker   []item
	Egress   []item
	Limits   []item
	Other    []item
	Reasons  []string // the worker's own reasons, cleaned
	Refusal  *refusalRow
	Timeline timeline
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
	// More counts the errors the refusal did not keep.
	More    int
	Reasons []string
}

// factMeanings say, for a person, what each fact means.
var factMeanings = map[string]string{
	agentsandbox.FactHostNetwork: "The sandbox has its own network namespace: it cannot reach the host's network.",
	agentsandbox.FactCredentials: "No credential of the host, the worker or the person is inside the sandbox.",
	agentsandbox.FactProfile:     "No browser or desktop profile of the host is mounted in the sandbox.",
	agentsandbox.FactEgressProxy: "The sandbox's only way out is the worker's proxy, which applies the egress guard.",
	agentsandbox.FactWorkspace:   "The workspace is the sandbox's own and is gone with the wipe.",
}

// requiredFacts are the JSON values the contract requires of each fact.
var requiredFacts = map[string]string{
	agentsandbox.FactHostNetwork: "false", agentsandbox.FactCredentials: "false", agentsandbox.FactProfile: "false",
	agentsandbox.FactEgressProxy: "true", agentsandbox.FactWorkspace: `"` + agentsandbox.WorkspaceEphemeral + `"`,
}

// workerPageOf shapes v (and the stream's timeline) for the page.
func (s *Server) workerPageOf(streamID, person string, v ownerView, tl timeline) workerPage {
	p := workerPage{StreamID: streamID, Refresh: refreshSeconds, SignedInAs: person, Timeline: tl, FactsOf: "the report"}
	p.Banner = bannerOf(v)
	a := v.assessment
	rep := a.Report
	p.HasReport = rep != nil
	if v.State == live.StateStale && v.ReceivedAt != nil {
		p.Stale = true
		p.AsOf = fmt.Sprintf("as of %s, %s", formatTime(*v.ReceivedAt), minutesAgo(time.Duration(*v.AgeSeconds*float64(time.Second))))
	}
	stated := map[string]string{}
	if rep != nil {
		for name, val := range rep.Facts {
			stated[name] = clean(live.JSONText(val), live.MaxRefusedFactChars)
		}
	} else if v.Refusal != nil && v.ReceivedAt == nil {
		p.FactsOf, stated = "the refused report", v.Refusal.Facts
	}
	p.Facts = facts(stated)
	for _, c := range v.Checks {
		p.Checks = append(p.Checks, checkRow{c.Name, c.Result})
	}
	if rep != nil {
		p.Worker = workerItems(v, rep)
		p.Egress, p.Limits, p.Other = isolationItems(rep)
		p.Reasons = cleanAll(rep.Reasons)
	}
	if ref := v.Refusal; ref != nil {
		errs, _ := live.RefusalErrors(ref.Errors) // cleaned when stored; a refusal stored before may not be
		p.Refusal = &refusalRow{At: formatTime(ref.At), Service: named(ref.ServiceName, ref.ServiceID), Subject: named(ref.SubjectName, ref.SubjectID),
			Errors: errs, More: max(ref.ErrorsTotal-len(errs), 0), Reasons: cleanAll(ref.Reasons)}
	}
	return p
}

// bannerOf is the page's banner for v: never green when the worker reports
// a problem, and saying what to check when it is not alive.
func bannerOf(v ownerView) banner {
	b := banner{Class: string(v.State), Title: strings.ToUpper(string(v.State)), Reason: sentence(v.Reason) + "."}
	var age time.Duration
	if v.ReceivedAt != nil {
		age = time.Duration(*v.AgeSeconds * float64(time.Second))
		b.Detail = fmt.Sprintf("Last accepted check-in received %s (%s)", formatAge(age), formatTime(*v.ReceivedAt))
		if v.AliveUntil != nil && v.State == live.StateAlive {
			b.Detail += "; counts as alive until " + formatTime(*v.AliveUntil)
		}
		b.Detail += "."
	}
	var reasons []string
	if rep := v.assessment.Report; rep != nil {
		reasons = cleanAll(rep.Reasons)
	}
	switch {
	case v.State == live.StateAlive && v.Degraded:
		b.Class, b.Title = "degraded", "ALIVE — the worker reports a problem"
		b.Lists = appendList(appendList(nil, "What the worker reports:", v.Problems), "The worker's own reasons:", reasons)
	case v.State == live.StateStale:
		b.Reason = fmt.Sprintf("The worker has not checked in for %s. Check that the worker (codes-sandbox serve) is running on its host "+
			"and can reach this Live: its log says why a check-in failed.", roughDuration(age))
		if v.Degraded {
			b.Lists = appendList(appendList(nil, "Its last report also showed:", v.Problems), "The worker's own reasons:", reasons)
		}
	case v.State == live.StateRefused && v.Refusal != nil:
		b.Reason = "The last check-in was refused by the contract, so the worker is not registered at all."
		errs, _ := live.RefusalErrors(v.Refusal.Errors)
		fix := fixList(errs, v.Refusal.Facts)
		if more := v.Refusal.ErrorsTotal - len(errs); more > 0 {
			fix = append(fix, fmt.Sprintf("and %s more", live.Plural(int64(more), "error")))
		}
		b.Lists = appendList(appendList(nil, "What to fix:", fix), "The worker's own reasons:", cleanAll(v.Refusal.Reasons))
	case v.State == live.StateAbsent:
		b.Reason = "The worker has never checked in. Check that a worker is set to check in for this stream (its id, your person id " +
			"as the subject, and a service token of a first-party service), that it is running, and what its log says."
	}
	return b
}

// requiredProperty reads ajv's message of a missing property.
var requiredProperty = regexp.MustCompile(`^must have required property '([a-z_]+)'$`)

// fixList says what to fix for each of a refusal's errors: for one of the
// five facts, what the report stated (facts) and what it must be; for
// anything else, the contract's own words.
func fixList(errs []agentsandbox.ValidationError, facts map[string]string) []string {
	var out []string
	for _, e := range errs {
		fact, missing := "", false
		if name, ok := strings.CutPrefix(e.Path, "/isolation/"); ok && requiredFacts[name] != "" && e.Message == "must be equal to constant" {
			fact = name
		} else if m := requiredProperty.FindStringSubmatch(e.Message); m != nil && e.Path == "/isolation" && requiredFacts[m[1]] != "" {
			fact, missing = m[1], true
		}
		switch {
		case fact != "" && missing:
			out = append(out, fmt.Sprintf("%s is missing: it must be %s", fact, requiredFacts[fact]))
		case fact != "" && facts[fact] != "":
			out = append(out, fmt.Sprintf("%s reported %s, must be %s", fact, facts[fact], requiredFacts[fact]))
		case fact != "":
			out = append(out, fmt.Sprintf("%s must be %s", fact, requiredFacts[fact]))
		default:
			out = append(out, cmp.Or(e.Path, "(the whole report)")+": "+e.Message)
		}
	}
	return out
}

// appendList appends a list unless it has no items.
func appendList(ls []list, heading string, items []string) []list {
	if len(items) == 0 {
		return ls
	}
	return append(ls, list{heading, items})
}

// facts lists the five facts with what stated gives of each (fact name to
// its JSON value, cleaned).
func facts(stated map[string]string) []factRow {
	var out []factRow
	for _, name := range agentsandbox.IsolationFacts() {
		f := factRow{Name: name, Meaning: factMeanings[name], Required: requiredFacts[name], Reported: stated[name]}
		f.States = f.Reported == f.Required
		out = append(out, f)
	}
	return out
}

const notStated = "not stated"

// workerItems describe the worker as the report does, and who checked it in.
func workerItems(v ownerView, rep *live.Report) []item {
	active, capacity := "?", notStated
	if rep.Active != "" {
		active = live.NumberText(rep.Active)
	}
	if rep.Capacity != "" {
		capacity = live.NumberText(rep.Capacity)
	}
	checkedAt := "not yet"
	if rep.CheckedAt != nil {
		checkedAt = *rep.CheckedAt
	}
	items := []item{
		{"Worker id", orNotStated(rep.WorkerID)},
		{"Service", orNotStated(rep.Service)},
		{"Version", orNotStated(rep.Version)},
		{"Sandboxes", active + " active of capacity " + capacity},
		{"Browser", yesNo(rep.Browser)},
		{"Says it is ready", yesNo(rep.Ready) + " (shown, not used for the state)"},
		{"Self-test ran at", clean(checkedAt, maxValueChars)},
		{"Report assembled at", orNotStated(rep.At)},
	}
	if v.Service != nil && v.Subject != nil {
		items = append(items, item{"Checked in by", "service " + named(v.Service.Name, v.Service.ID) + ", for " + named(v.Subject.Name, v.Subject.ID)})
	}
	return items
}

// named shows a principal by name (cleaned), with its id.
func named(name, id string) string {
	if name == "" {
		return id + " (no longer known)"
	}
	return clean(name, 100) + " (" + id + ")"
}

// isolationItems describe what the isolation report says beyond the five
// facts: egress, limits, and everything else (the report's other top-level
// keys too).
func isolationItems(rep *live.Report) (egress, limits, other []item) {
	if m, ok := rep.Isolation["egress"].(map[string]any); ok {
		egress = mapItems(m, []string{"via", "public_only", "ports", "direct", "policies"}, map[string]string{
			"via": "Goes out via", "public_only": "Public addresses only", "ports": "Ports", "direct": "Direct connections", "policies": "Policies",
		})
	}
	if m, ok := rep.Isolation["limits"].(map[string]any); ok {
		limits = mapItems(m, []string{"kind", "enforced", "memory_mb", "disk_mb", "pids", "cpu_percent", "time_box_minutes"}, map[string]string{
			"kind": "Kind", "enforced": "Enforced", "memory_mb": "Memory (MB)", "disk_mb": "Disk (MB)", "pids": "Processes",
			"cpu_percent": "CPU (% of a core)", "time_box_minutes": "Time box (minutes, default and most)",
		})
	}
	var keys []string
	for k := range rep.Isolation {
		if k != "egress" && k != "limits" {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		other = append(other, item{clean(k, 100), clean(live.Display(rep.Isolation[k]), maxValueChars)})
	}
	keys = keys[:0]
	for k := range rep.Other {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		other = append(other, item{clean(k, 100) + " (outside isolation)", clean(live.Display(rep.Other[k]), maxValueChars)})
	}
	return egress, limits, other
}

// mapItems lists m's keys in order first, then the others by name.
func mapItems(m map[string]any, order []string, labels map[string]string) []item {
	var out []item
	for _, k := range order {
		if v, ok := m[k]; ok {
			out = append(out, item{labels[k], clean(live.Display(v), maxValueChars)})
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
		out = append(out, item{clean(k, 100), clean(live.Display(m[k]), maxValueChars)})
	}
	return out
}

// clean is live.CleanText: every string of a report is shown through it.
func clean(s string, max int) string { return live.CleanText(s, max) }

// cleanAll cleans each of ss, dropping the empty ones.
func cleanAll(ss []string) []string {
	var out []string
	for _, s := range ss {
		if c := clean(s, live.MaxRefusedReasonChars); c != "" {
			out = append(out, c)
		}
	}
	return out
}

func orNotStated(s *string) string {
	if s == nil || *s == "" {
		return notStated
	}
	return clean(*s, maxValueChars)
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
