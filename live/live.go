// Package live is the domain of OpenVibe.Live's side of the sandbox worker
// check-in: persons, agent streams, service principals, credentials, the
// stored check-in reports and refusals, and the health derived from them.
//
// It defines the Store interface that live/sqlite and live/postgres implement
// and that live/httpapi uses. It imports no adapter.
package live

import (
	"errors"
	"slices"
	"time"

	"openvibe.network/agentsandbox"
)

// CapabilityRegister is the capability a service principal needs to check in
// a sandbox worker.
const CapabilityRegister = "live.agent_sandbox.register"

// Person is a human account; persons own streams and hold person tokens,
// desk tickets and sessions.
type Person struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"created_at"`
}

// Stream is an agent stream, owned by one person.
type Stream struct {
	ID        string    `json:"id"`
	OwnerID   string    `json:"owner_id"`
	CreatedAt time.Time `json:"created_at"`
}

// Service is a service principal: a program (such as a sandbox worker) that
// acts for persons with the capabilities it holds.
type Service struct {
	ID           string    `json:"id"`
	Name         string    `json:"name"`
	FirstParty   bool      `json:"first_party"`
	Capabilities []string  `json:"capabilities"`
	CreatedAt    time.Time `json:"created_at"`
}

// Has reports whether the service holds capability c.
func (s Service) Has(c string) bool { return slices.Contains(s.Capabilities, c) }

// Registration is an accepted check-in: the report stored byte for byte as
// sent, with the server's receive time and both parties of the delegation.
type Registration struct {
	StreamID string `json:"stream_id"`
	// Report is the request body exactly as the worker sent it.
	Report []byte `json:"-"`
	// ReceivedAt is the server's (on PostgreSQL the database's) receive time.
	ReceivedAt time.Time `json:"received_at"`
	// ServiceID is the service principal that sent the check-in.
	ServiceID string `json:"service_id"`
	// SubjectID is the person named in X-OV-Subject, the stream's owner.
	SubjectID string `json:"subject_id"`
	// Degraded says the report shows a problem (Assess): the history
	// records the stream degraded rather than alive while it does.
	Degraded bool `json:"degraded"`
	// AuthEpoch, when not 0, is the auth epoch the check-in was authorised
	// at (CheckInLookup.Epoch): Accept stores it only if the epoch is still
	// that in its own transaction, and fails with ErrAuthChanged otherwise.
	AuthEpoch int64 `json:"-"`
}

// ErrAuthChanged is returned (wrapped) by Accept and Refuse when the
// record's AuthEpoch is no longer the store's: something that can withdraw
// the check-in's authorisation changed since it was looked up. Nothing was
// stored; look the check-in up again.
var ErrAuthChanged = errors.New("the check-in's authorisation changed since it was looked up")

// Refusal records a check-in that the contract refused: the stream is then
// "not registered at all" and the owner sees why.
type Refusal struct {
	StreamID  string    `json:"stream_id"`
	At        time.Time `json:"at"`
	ServiceID string    `json:"service_id"`
	SubjectID string    `json:"subject_id"`
	// Errors are the contract's errors, at most MaxRefusalErrors of them
	// (see RefusalErrors); ErrorsTotal counts them all.
	Errors      []agentsandbox.ValidationError `json:"errors"`
	ErrorsTotal int                            `json:"errors_total"`
	// Facts are the five isolation facts the refused report states, as
	// RefusedFacts gives them (fact name to its JSON value).
	Facts map[string]string `json:"facts"`
	// Reasons are the refused report's own reasons (why its worker says it
	// is not ready), as RefusedReasons bounds and cleans them. They are
	// kept with the refusal for the owner, never as a registration.
	Reasons []string `json:"reasons"`
	// AuthEpoch is as Registration.AuthEpoch, for Refuse.
	AuthEpoch int64 `json:"-"`
}

// WorkerRecord is what the store knows about a stream's worker: the current
// registration (nil when none, or cleared by a refusal) and the last refusal
// (nil when none).
type WorkerRecord struct {
	Registration *Registration
	Refusal      *Refusal
}
