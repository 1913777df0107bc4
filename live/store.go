package live

import (
	"context"
	"time"
)

// Store keeps Live's state. Implementations: live/sqlite, live/postgres; both
// pass live/storetest. Methods return *Error with code ENOTFOUND for a
// missing entity, ECONFLICT for a duplicate id, EINVALID for bad input, and
// EUNAVAILABLE for a write to a store opened read-only.
type Store interface {
	CreatePerson(ctx context.Context, p Person) (Person, error)
	Person(ctx context.Context, id string) (Person, error)
	ListPersons(ctx context.Context) ([]Person, error)
	// DeletePerson removes the person with everything that is theirs: their
	// credentials, the streams they own (with those streams' records and
	// history), and the registrations and refusals naming them.
	DeletePerson(ctx context.Context, id string) (Deletion, error)

	CreateStream(ctx context.Context, s Stream) (Stream, error)
	Stream(ctx context.Context, id string) (Stream, error)
	ListStreams(ctx context.Context) ([]Stream, error)
	// ListStreamsOwnedBy lists the streams of owner, oldest first (none
	// for an unknown person).
	ListStreamsOwnedBy(ctx context.Context, owner string) ([]Stream, error)
	// DeleteStream removes the stream with its registration, refusal and
	// history.
	DeleteStream(ctx context.Context, id string) (Deletion, error)

	CreateService(ctx context.Context, s Service) (Service, error)
	Service(ctx context.Context, id string) (Service, error)
	ListServices(ctx context.Context) ([]Service, error)
	// SetCapability grants (held) or withdraws capability c of service id
	// and returns the service; granting a held one or withdrawing a missing
	// one changes nothing.
	SetCapability(ctx context.Context, id, c string, held bool) (Service, error)
	// DeleteService removes the service with its tokens and the
	// registrations and refusals it made (those streams are then absent).
	DeleteService(ctx context.Context, id string) (Deletion, error)

	// CreateCredential stores c (its Hash, never the secret).
	CreateCredential(ctx context.Context, c Credential) (Credential, error)
	// CredentialByHash finds a credential by the SHA-256 of its secret,
	// revoked and expired ones included (the caller decides).
	CredentialByHash(ctx context.Context, hash [32]byte) (Credential, error)
	// RevokeCredential marks credential id revoked at the store's time.
	RevokeCredential(ctx context.Context, id string) error
	// RevokeSessions revokes every session of person that is not revoked
	// yet and returns their ids (ENOTFOUND for an unknown person).
	RevokeSessions(ctx context.Context, person string) ([]string, error)
	// ConsumeLoginTicket uses up the login ticket whose secret hashes to
	// hash: it is revoked, so it signs in once. ENOTFOUND when no usable
	// login ticket (unknown, used, revoked or expired) has that hash.
	ConsumeLoginTicket(ctx context.Context, hash [32]byte) (Credential, error)
	// TouchCredential records that credential id was used now (stores keep
	// the time to the minute: LastUseGrain).
	TouchCredential(ctx context.Context, id string) error
	// ListCredentials lists credentials of kind ("" for all), oldest first,
	// without hashes, with their holders' names.
	ListCredentials(ctx context.Context, kind CredentialKind) ([]Credential, error)

	// LookupCheckIn reads, in one go, what authorising a check-in needs:
	// the credential with secret hash hash, its service, the stream and
	// whether subject is a known person. It fails only when the store does.
	LookupCheckIn(ctx context.Context, hash [32]byte, stream, subject string) (CheckInLookup, error)
	// Accept stores an accepted check-in, durably, replacing the stream's
	// registration, and records the transition it makes in the stream's
	// history. ReceivedAt is set by the store (the database's clock on
	// PostgreSQL) and returned.
	Accept(ctx context.Context, r Registration) (Registration, error)
	// Refuse clears the stream's registration, records the refusal and the
	// transition, in one transaction. At is set by the store and returned.
	Refuse(ctx context.Context, r Refusal) (Refusal, error)
	// Worker returns the stream's registration and last refusal.
	Worker(ctx context.Context, streamID string) (WorkerRecord, error)
	// History returns the stream's recorded transitions from since on, in
	// order, preceded by the last one before since (if any), so the state at
	// since is known. ENOTFOUND for an unknown stream.
	History(ctx context.Context, streamID string, since time.Time) ([]Transition, error)
	// CountStates counts the streams in each state at now (see Derive);
	// every state is in the map.
	CountStates(ctx context.Context, now time.Time, window time.Duration) (map[State]int, error)

	// Probe checks that the store answers and can write (it writes and
	// commits one small row).
	Probe(ctx context.Context) error
	// Close releases the store.
	Close() error
}

// CheckInLookup is what Store.LookupCheckIn found.
type CheckInLookup struct {
	// Credential has the presented secret's hash; nil when none has.
	Credential *Credential
	// Service holds Credential when it is a service token (nil otherwise,
	// or when the service is gone).
	Service *Service
	// Stream is the stream checked in for; nil when there is none.
	Stream *Stream
	// SubjectKnown says the subject is a known person.
	SubjectKnown bool
	// Epoch is the store's auth epoch when it read all this: it moves with
	// every change that can withdraw a check-in's authorisation (a service
	// token revoked or deleted, a service changed or deleted, a stream
	// deleted or given away, a person deleted), so a caller may keep the
	// lookup and write with Registration.AuthEpoch set to it.
	Epoch int64
}

// Deletion says what a Delete removed with the entity.
type Deletion struct {
	// Kind is person, stream or service; ID the entity's id.
	Kind string `json:"kind"`
	ID   string `json:"id"`
	// Credentials are the ids of the credentials removed: they stop working
	// at once.
	Credentials []string `json:"credentials"`
	// Streams are the streams removed with a person.
	Streams []string `json:"streams"`
	// Registrations are the (other) streams whose registration or refusal
	// was cleared: they are absent now.
	Registrations []string `json:"registrations"`
}
