package httpapi

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"openvibe.network/agentsandbox/live"
)

//go:embed page.html
var pageHTML string

// pageTemplate renders the owner's page ("worker") and refusals ("error").
var pageTemplate = template.Must(template.New("page").Parse(pageHTML))

// refreshSeconds is how often the owner's page reloads itself.
const refreshSeconds = 5

// handleOwnerPage answers GET /streams/agent/{id}/worker: the owner's page,
// for the owner's session cookie only. Refusals are HTML pages too.
func (s *Server) handleOwnerPage(w http.ResponseWriter, r *http.Request, rl *reqLog) {
	p := readCredentials(r)
	p.authHeader, p.badScheme, p.bearer = false, false, "" // the page is for the session
	streamID := r.PathValue("id")
	v, err := s.ownerRead(r.Context(), p, streamID, rl)
	if err != nil {
		_, ci := rl.refusal(err)
		writePage(w, ci.status, "error", errorPage{Status: ci.status, Title: http.StatusText(ci.status), Message: redact(live.ErrorMessage(err))})
		return
	}
	rl.outcome = "ok"
	writePage(w, http.StatusOK, "worker", s.pageData(streamID, v))
}

// errorPage is what a refused page shows.
type errorPage struct {
	Status  int
	Title   string
	Message string
}

// writePage renders the named template with status.
func writePage(w http.ResponseWriter, status int, name string, data any) {
	var buf bytes.Buffer
	if err := pageTemplate.ExecuteTemplate(&buf, name, data); err != nil {
		status = http.StatusInternalServerError
		buf.Reset()
		buf.WriteString("<!doctype html><title>Internal error</title><p>internal error</p>")
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// pageData is what the owner's page shows.
type pageData struct {
	StreamID   string
	Refresh    int
	State      live.State
	Reason     string
	Age        string // "" without a registration
	ReceivedAt string
	AliveUntil string
	HasReport  bool
	Worker     workerInfo
	Facts      []fact
	Checks     []check
	Refusal    *refusalView
}

// report is the part of a stored report the page shows. Only fields the
// contract types are read; anything else stays in the stored report.
type report struct {
	WorkerID  string                     `json:"worker_id"`
	Service   string                     `json:"service"`
	Version   string                     `json:"version"`
	Ready     *bool                      `json:"ready"`
	Reasons   []string                   `json:"reasons"`
	Checks    map[string]bool            `json:"checks"`
	CheckedAt *string                    `json:"checked_at"`
	Capacity  *json.Number               `json:"capacity"`
	Active    *json.Number               `json:"active"`
	Browser   *bool                      `json:"browser"`
	At        string                     `json:"at"`
	Isolation map[string]json.RawMessage `json:"isolation"`
}

// workerInfo is the report's description of the worker, as the page shows
// it ("not stated" for what the report leaves out).
type workerInfo struct {
	WorkerID, Service, Version string
	Sandboxes, Browser, Ready  string
	CheckedAt, At              string
	Reasons                    []string
}

const notStated = "not stated"

// info describes r for a person.
func (r report) info() workerInfo {
	w := workerInfo{
		WorkerID: orNotStated(r.WorkerID), Service: orNotStated(r.Service), Version: orNotStated(r.Version),
		Browser: yesNo(r.Browser), Ready: yesNo(r.Ready), At: orNotStated(r.At),
		CheckedAt: "not yet", Reasons: r.Reasons,
	}
	if r.CheckedAt != nil {
		w.CheckedAt = *r.CheckedAt
	}
	active, capacity := "?", notStated
	if r.Active != nil {
		active = r.Active.String()
	}
	if r.Capacity != nil {
		capacity = r.Capacity.String()
	}
	w.Sandboxes = active + " active of capacity " + capacity
	return w
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

// fact is one of the five isolation facts Live requires.
type fact struct {
	Name     string
	Meaning  string
	Required string // the JSON value the contract requires
	Reported string // the JSON value the report gives, "" when absent
	States   bool   // the report states the required value
}

// check is one self-test check.
type check struct {
	Name   string
	Passed bool
}

// requiredFacts are the five facts, in the contract's order.
var requiredFacts = []fact{
	{Name: "host_network", Required: "false", Meaning: "The sandbox has its own network namespace: it cannot reach the host's network."},
	{Name: "credentials", Required: "false", Meaning: "No credential of the host, the worker or the person is inside the sandbox."},
	{Name: "profile", Required: "false", Meaning: "No browser or desktop profile of the host is mounted in the sandbox."},
	{Name: "egress_proxy", Required: "true", Meaning: "The sandbox's only way out is the worker's proxy, which applies the egress guard."},
	{Name: "workspace", Required: `"ephemeral"`, Meaning: "The workspace is the sandbox's own and is gone with the wipe."},
}

// pageData shapes v for the page.
func (s *Server) pageData(streamID string, v ownerView) pageData {
	d := pageData{StreamID: streamID, Refresh: refreshSeconds, State: v.State, Reason: sentence(v.Reason), Refusal: v.Refusal}
	if v.ReceivedAt != nil {
		d.Age = formatAge(time.Duration(*v.AgeSeconds * float64(time.Second)))
		d.ReceivedAt = formatTime(*v.ReceivedAt)
	}
	if v.AliveUntil != nil {
		d.AliveUntil = formatTime(*v.AliveUntil)
	}
	var rep report
	if v.Report != nil && json.Unmarshal(v.Report, &rep) == nil {
		d.HasReport, d.Worker = true, rep.info()
	} else {
		rep = report{}
	}
	for _, f := range requiredFacts {
		if raw, ok := rep.Isolation[f.Name]; ok {
			var b bytes.Buffer
			if json.Compact(&b, raw) == nil {
				f.Reported = b.String()
			}
			f.States = f.Reported == f.Required
		}
		d.Facts = append(d.Facts, f)
	}
	names := make([]string, 0, len(rep.Checks))
	for n := range rep.Checks {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		d.Checks = append(d.Checks, check{Name: n, Passed: rep.Checks[n]})
	}
	return d
}

// formatTime shows t for a person, in UTC.
func formatTime(t time.Time) string {
	return t.UTC().Format("2006-01-02 15:04:05.0 UTC")
}

// formatAge shows how long ago something happened, for a person.
func formatAge(d time.Duration) string {
	switch {
	case d < 0:
		return "just now (the clock is behind the store's)"
	case d < time.Minute:
		return fmt.Sprintf("%.1f s ago", d.Seconds())
	case d < time.Hour:
		return fmt.Sprintf("%d min %d s ago", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%d h %d min ago", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%d days ago", int(d.Hours()/24))
}

// sentence starts s with a capital letter.
func sentence(s string) string {
	if s == "" {
		return s
	}
	r, n := utf8.DecodeRuneInString(s)
	return string(unicode.ToUpper(r)) + s[n:]
}

// StateTitle is the big word at the top of the page.
func (d pageData) StateTitle() string { return strings.ToUpper(string(d.State)) }
