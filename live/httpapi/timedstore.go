package httpapi

import (
	"context"
	"time"

	"openvibe.network/agentsandbox/live"
)

// timedStore is the server's Store with each call's time observed in
// ovlive_store_duration_seconds{op}.
type timedStore struct {
	Store
	m *metrics
}

// storeOps are the operations timedStore times.
var storeOps = []string{"lookup_check_in", "accept", "refuse", "credential_by_hash", "worker", "history", "count_states",
	"probe", "touch_credential"}

// observe records the time since start under op.
func (t timedStore) observe(op string, start time.Time) {
	t.m.store(op, time.Since(start))
}

// LookupCheckIn times the store's LookupCheckIn.
func (t timedStore) LookupCheckIn(ctx context.Context, hash [32]byte, stream, subject string) (live.CheckInLookup, error) {
	defer t.observe("lookup_check_in", time.Now())
	return t.Store.LookupCheckIn(ctx, hash, stream, subject)
}

// Accept times the store's Accept.
func (t timedStore) Accept(ctx context.Context, r live.Registration) (live.Registration, error) {
	defer t.observe("accept", time.Now())
	return t.Store.Accept(ctx, r)
}

// Refuse times the store's Refuse.
func (t timedStore) Refuse(ctx context.Context, r live.Refusal) (live.Refusal, error) {
	defer t.observe("refuse", time.Now())
	return t.Store.Refuse(ctx, r)
}

// CredentialByHash times the store's CredentialByHash.
func (t timedStore) CredentialByHash(ctx context.Context, hash [32]byte) (live.Credential, error) {
	defer t.observe("credential_by_hash", time.Now())
	return t.Store.CredentialByHash(ctx, hash)
}

// Worker times the store's Worker.
func (t timedStore) Worker(ctx context.Context, streamID string) (live.WorkerRecord, error) {
	defer t.observe("worker", time.Now())
	return t.Store.Worker(ctx, streamID)
}

// History times the store's History.
func (t timedStore) History(ctx context.Context, streamID string, since time.Time) ([]live.Transition, error) {
	defer t.observe("history", time.Now())
	return t.Store.History(ctx, streamID, since)
}

// CountStates times the store's CountStates.
func (t timedStore) CountStates(ctx context.Context, now time.Time, window time.Duration) (map[live.State]int, error) {
	defer t.observe("count_states", time.Now())
	return t.Store.CountStates(ctx, now, window)
}

// Probe times the store's Probe.
func (t timedStore) Probe(ctx context.Context) error {
	defer t.observe("probe", time.Now())
	return t.Store.Probe(ctx)
}

// TouchCredential times the store's TouchCredential.
func (t timedStore) TouchCredential(ctx context.Context, id string) error {
	defer t.observe("touch_credential", time.Now())
	return t.Store.TouchCredential(ctx, id)
}
