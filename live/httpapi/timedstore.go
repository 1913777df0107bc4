package httpapi

import (
	"context"
	"errors"
	"fmt"
	"time"

	"openvibe.network/agentsandbox/live"
)

// timedStore is the server's Store with each call bounded by the store
// timeout (a call past it fails with live.EUNAVAILABLE: "Live's database did
// not answer within …") and, for the operations of storeOps, its time
// observed in ovlive_store_duration_seconds{op}.
type timedStore struct {
	s       Store
	m       *metrics
	timeout time.Duration
}

// storeOps are the operations timedStore times.
var storeOps = []string{"lookup_check_in", "accept", "refuse", "credential_by_hash", "worker", "history", "count_states",
	"probe", "touch_credential"}

// call is one store call under way.
type call struct {
	t     timedStore
	op    string // "" when not timed
	start time.Time
	b     *budget
}

// begin bounds ctx by the store timeout for a call of op.
func (t timedStore) begin(ctx context.Context, op string) (context.Context, call) {
	b := withBudget(ctx, t.timeout)
	return b, call{t: t, op: op, start: time.Now(), b: b}
}

// end records the call's time and returns its error, as EUNAVAILABLE when
// the call ran past the store timeout (its context's deadline, the only
// one a request's store calls have; a store may also report the deadline
// of a group of writes that ended with it).
func (c call) end(err error) error {
	if c.op != "" {
		c.t.m.store(c.op, time.Since(c.start))
	}
	if err != nil && (errors.Is(err, context.DeadlineExceeded) || errors.Is(c.b.Err(), context.DeadlineExceeded)) {
		err = fmt.Errorf("%w (%w)", live.Errorf(live.EUNAVAILABLE,
			"Live's database did not answer within %s: check that it is running, reachable and not overloaded, then try again", seconds(c.t.timeout)), err)
	}
	c.b.cancel()
	return err
}

// seconds says a timeout for a person: "5 s", "1.5 s".
func seconds(d time.Duration) string {
	return fmt.Sprintf("%g s", d.Seconds())
}

// LookupCheckIn times the store's LookupCheckIn.
func (t timedStore) LookupCheckIn(ctx context.Context, hash [32]byte, stream, subject string) (live.CheckInLookup, error) {
	ctx, c := t.begin(ctx, "lookup_check_in")
	l, err := t.s.LookupCheckIn(ctx, hash, stream, subject)
	return l, c.end(err)
}

// Accept times the store's Accept.
func (t timedStore) Accept(ctx context.Context, r live.Registration) (live.Registration, error) {
	ctx, c := t.begin(ctx, "accept")
	r, err := t.s.Accept(ctx, r)
	return r, c.end(err)
}

// Refuse times the store's Refuse.
func (t timedStore) Refuse(ctx context.Context, r live.Refusal) (live.Refusal, error) {
	ctx, c := t.begin(ctx, "refuse")
	r, err := t.s.Refuse(ctx, r)
	return r, c.end(err)
}

// CredentialByHash times the store's CredentialByHash.
func (t timedStore) CredentialByHash(ctx context.Context, hash [32]byte) (live.Credential, error) {
	ctx, c := t.begin(ctx, "credential_by_hash")
	cr, err := t.s.CredentialByHash(ctx, hash)
	return cr, c.end(err)
}

// Worker times the store's Worker.
func (t timedStore) Worker(ctx context.Context, streamID string) (live.WorkerRecord, error) {
	ctx, c := t.begin(ctx, "worker")
	rec, err := t.s.Worker(ctx, streamID)
	return rec, c.end(err)
}

// History times the store's History.
func (t timedStore) History(ctx context.Context, streamID string, since time.Time) ([]live.Transition, error) {
	ctx, c := t.begin(ctx, "history")
	ts, err := t.s.History(ctx, streamID, since)
	return ts, c.end(err)
}

// CountStates times the store's CountStates.
func (t timedStore) CountStates(ctx context.Context, now time.Time, window time.Duration) (map[live.State]int, error) {
	ctx, c := t.begin(ctx, "count_states")
	m, err := t.s.CountStates(ctx, now, window)
	return m, c.end(err)
}

// Probe times the store's Probe.
func (t timedStore) Probe(ctx context.Context) error {
	ctx, c := t.begin(ctx, "probe")
	return c.end(t.s.Probe(ctx))
}

// TouchCredential times the store's TouchCredential.
func (t timedStore) TouchCredential(ctx context.Context, id string) error {
	ctx, c := t.begin(ctx, "touch_credential")
	return c.end(t.s.TouchCredential(ctx, id))
}

// Person bounds the store's Person.
func (t timedStore) Person(ctx context.Context, id string) (live.Person, error) {
	ctx, c := t.begin(ctx, "")
	p, err := t.s.Person(ctx, id)
	return p, c.end(err)
}

// Stream bounds the store's Stream.
func (t timedStore) Stream(ctx context.Context, id string) (live.Stream, error) {
	ctx, c := t.begin(ctx, "")
	st, err := t.s.Stream(ctx, id)
	return st, c.end(err)
}

// Service bounds the store's Service.
func (t timedStore) Service(ctx context.Context, id string) (live.Service, error) {
	ctx, c := t.begin(ctx, "")
	sv, err := t.s.Service(ctx, id)
	return sv, c.end(err)
}

// ListStreamsOwnedBy bounds the store's ListStreamsOwnedBy.
func (t timedStore) ListStreamsOwnedBy(ctx context.Context, owner string) ([]live.Stream, error) {
	ctx, c := t.begin(ctx, "")
	sts, err := t.s.ListStreamsOwnedBy(ctx, owner)
	return sts, c.end(err)
}

// CreateCredential bounds the store's CreateCredential.
func (t timedStore) CreateCredential(ctx context.Context, cr live.Credential) (live.Credential, error) {
	ctx, c := t.begin(ctx, "")
	cr, err := t.s.CreateCredential(ctx, cr)
	return cr, c.end(err)
}

// RevokeCredential bounds the store's RevokeCredential.
func (t timedStore) RevokeCredential(ctx context.Context, id string) error {
	ctx, c := t.begin(ctx, "")
	return c.end(t.s.RevokeCredential(ctx, id))
}

// ConsumeLoginTicket bounds the store's ConsumeLoginTicket.
func (t timedStore) ConsumeLoginTicket(ctx context.Context, hash [32]byte) (live.Credential, error) {
	ctx, c := t.begin(ctx, "")
	cr, err := t.s.ConsumeLoginTicket(ctx, hash)
	return cr, c.end(err)
}
