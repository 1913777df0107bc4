package agentsandbox

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"time"
)

// WorkerCheckIn is the typed form of live.agent-sandbox-worker-request@1 for
// producers (the sandbox worker). Optional fields are omitted when empty,
// except CheckedAt, which is null until the first self-test has run. Times
// marshal as RFC 3339 in UTC with milliseconds ("2026-11-07T12:00:00.000Z").
//
// Marshalling does not validate: a report whose isolation facts are missing or
// wrong marshals as it is and is refused by the contract (Validate).
type WorkerCheckIn struct {
	// WorkerID is the worker's name in its own records (at most 64 characters).
	WorkerID string
	// Service is the worker implementation, e.g. "codes-sandbox" (at most 64).
	Service string
	// Version is the worker's version (at most 64 characters).
	Version string
	// Ready is the worker's own view of its health.
	Ready *bool
	// Reasons say why the worker is not ready (at most 10, each at most 500).
	Reasons []string
	// Checks is the self-test: one boolean per check it ran.
	Checks map[string]bool
	// CheckedAt is when the self-test ran; nil (null) before the first one.
	CheckedAt *time.Time
	// Isolation holds the facts Live requires, and any further ones.
	Isolation Isolation
	// Browser says whether the worker has the optional headless browser.
	Browser *bool
	// Capacity is how many sandboxes it may run at once (at least 1).
	Capacity *int
	// Active is how many are running now (at least 0).
	Active *int
	// At is when the worker assembled the report.
	At *time.Time
}

// checkInWire is WorkerCheckIn as it is on the wire.
type checkInWire struct {
	WorkerID  string          `json:"worker_id,omitempty"`
	Service   string          `json:"service,omitempty"`
	Version   string          `json:"version,omitempty"`
	Ready     *bool           `json:"ready,omitempty"`
	Reasons   []string        `json:"reasons,omitempty"`
	Checks    map[string]bool `json:"checks,omitempty"`
	CheckedAt *string         `json:"checked_at"`
	Isolation Isolation       `json:"isolation"`
	Browser   *bool           `json:"browser,omitempty"`
	Capacity  *int            `json:"capacity,omitempty"`
	Active    *int            `json:"active,omitempty"`
	At        *string         `json:"at,omitempty"`
}

// timeLayout is RFC 3339 with milliseconds, as the contract's examples write it.
const timeLayout = "2006-01-02T15:04:05.000Z07:00"

func formatTime(t *time.Time) *string {
	if t == nil {
		return nil
	}
	s := t.UTC().Format(timeLayout)
	return &s
}

func parseTime(field string, s *string) (*time.Time, error) {
	if s == nil {
		return nil, nil
	}
	t, err := time.Parse(time.RFC3339Nano, *s)
	if err != nil {
		return nil, fmt.Errorf("decode %s: %w", field, err)
	}
	return &t, nil
}

// MarshalJSON encodes the check-in as the contract's JSON object. Its error
// comes from the isolation report (see Isolation.MarshalJSON).
func (w WorkerCheckIn) MarshalJSON() ([]byte, error) {
	return json.Marshal(checkInWire{
		WorkerID: w.WorkerID, Service: w.Service, Version: w.Version, Ready: w.Ready,
		Reasons: w.Reasons, Checks: w.Checks, CheckedAt: formatTime(w.CheckedAt),
		Isolation: w.Isolation, Browser: w.Browser, Capacity: w.Capacity, Active: w.Active,
		At: formatTime(w.At),
	})
}

// UnmarshalJSON decodes a check-in. It does not validate; its error says which
// field has the wrong JSON type or a time time.Parse cannot read as RFC 3339.
// The contract accepts a few date-time spellings time.Parse does not (lower-case
// t and z, a space separator, ±hhmm offsets, a leap second): consumers such as
// Live check the raw JSON with the contract package's ValidateJSON and need not decode it into this type.
func (w *WorkerCheckIn) UnmarshalJSON(data []byte) error {
	var wire checkInWire
	if err := json.Unmarshal(data, &wire); err != nil {
		return fmt.Errorf("decode check-in: %w", err)
	}
	checkedAt, err := parseTime("checked_at", wire.CheckedAt)
	if err != nil {
		return err
	}
	at, err := parseTime("at", wire.At)
	if err != nil {
		return err
	}
	*w = WorkerCheckIn{
		WorkerID: wire.WorkerID, Service: wire.Service, Version: wire.Version, Ready: wire.Ready,
		Reasons: wire.Reasons, Checks: wire.Checks, CheckedAt: checkedAt,
		Isolation: wire.Isolation, Browser: wire.Browser, Capacity: wire.Capacity, Active: wire.Active,
		At: at,
	}
	return nil
}

// Isolation is the check-in's isolation report. The five facts are pointers so
// that a worker that could not prove one leaves it out (nil); the contract then
// refuses the report, which is intended. Extra holds any further keys (the
// worker's own checks, limits and versions) and is merged flat into the same
// JSON object.
type Isolation struct {
	// HostNetwork must be false: the sandbox has its own network namespace.
	HostNetwork *bool
	// Credentials must be false: no credential is inside the sandbox.
	Credentials *bool
	// Profile must be false: no browser or desktop profile is mounted.
	Profile *bool
	// EgressProxy must be true: the only way out is the worker's proxy.
	EgressProxy *bool
	// Workspace must be "ephemeral": the workspace is gone with the wipe.
	Workspace *string
	// Extra holds further keys; it must not use the five facts' names.
	Extra map[string]any
}

// isolationFacts is the wire form of the five facts, for decoding.
type isolationFacts struct {
	HostNetwork *bool   `json:"host_network"`
	Credentials *bool   `json:"credentials"`
	Profile     *bool   `json:"profile"`
	EgressProxy *bool   `json:"egress_proxy"`
	Workspace   *string `json:"workspace"`
}

// MarshalJSON encodes the facts that are set and the Extra keys as one object.
// Its error says when Extra uses a fact's name (which would let an unproven
// fact through) or holds a value encoding/json cannot encode.
func (iso Isolation) MarshalJSON() ([]byte, error) {
	for _, name := range IsolationFacts() {
		if _, ok := iso.Extra[name]; ok {
			return nil, fmt.Errorf("encode isolation: extra key %q is one of the five facts; set the typed field", name)
		}
	}
	obj := make(map[string]any, len(iso.Extra)+5)
	maps.Copy(obj, iso.Extra)
	setFact(obj, FactHostNetwork, iso.HostNetwork)
	setFact(obj, FactCredentials, iso.Credentials)
	setFact(obj, FactProfile, iso.Profile)
	setFact(obj, FactEgressProxy, iso.EgressProxy)
	setFact(obj, FactWorkspace, iso.Workspace)
	data, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("encode isolation: %w", err)
	}
	return data, nil
}

// setFact puts a fact the worker could state into obj; an unstated one stays out.
func setFact[T bool | string](obj map[string]any, name string, v *T) {
	if v != nil {
		obj[name] = *v
	}
}

// UnmarshalJSON splits an isolation object into the five facts and Extra
// (numbers in Extra as json.Number). Its error says which fact has the wrong
// JSON type.
func (iso *Isolation) UnmarshalJSON(data []byte) error {
	var facts isolationFacts
	if err := json.Unmarshal(data, &facts); err != nil {
		return fmt.Errorf("decode isolation: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var all map[string]any
	if err := dec.Decode(&all); err != nil {
		return fmt.Errorf("decode isolation: %w", err)
	}
	for _, name := range IsolationFacts() {
		delete(all, name)
	}
	if len(all) == 0 {
		all = nil
	}
	*iso = Isolation{facts.HostNetwork, facts.Credentials, facts.Profile, facts.EgressProxy, facts.Workspace, all}
	return nil
}
