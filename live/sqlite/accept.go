package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"openvibe.network/agentsandbox/live"
)

// known is what the writer remembers of a stream's registration from its
// own last write of it. It is only a hint: the update it leads to holds only
// where the row is still exactly so (see updateKnownSQL), and anything else
// (a write by another process, a transaction rolled back, a refusal that
// cleared the registration) makes that update change no row and the
// check-in be written by the upsert instead.
type known struct {
	receivedAt       int64
	service, subject string
	degraded         bool
}

// maxKnown bounds the writer's memory of registrations; past it, the writer
// forgets them all and learns them again from the check-ins that follow.
const maxKnown = 1 << 16

// updateKnownSQL writes a check-in over the registration the writer wrote
// last, if the row is still that one: same service and subject, same receive
// time, as degraded or not. It neither reads the row back (the receive time it replaces is the
// one the writer knows) nor touches the indexes and foreign keys of the
// service and subject, which stay as they are.
// (Its parameters are plain, in order: the driver binds them without
// looking up each one's name.)
const updateKnownSQL = `UPDATE registrations SET report = ?, received_at = ?, degraded = ?, previous_received_at = received_at
	WHERE stream_id = ? AND service_id = ? AND subject_id = ? AND received_at = ? AND degraded = ?`

// upsertSQL writes any check-in: a stream's first, one from another service
// or subject, or one after a write the writer does not know of. It returns
// the receive time of the registration it replaced (NULL when none) and
// whether that one was degraded.
const upsertSQL = `INSERT INTO registrations (stream_id, report, received_at, service_id, subject_id, degraded) VALUES (?, ?, ?, ?, ?, ?)
	ON CONFLICT (stream_id) DO UPDATE SET report = excluded.report, received_at = excluded.received_at,
		service_id = excluded.service_id, subject_id = excluded.subject_id, degraded = excluded.degraded,
		previous_received_at = registrations.received_at, previous_degraded = registrations.degraded
	RETURNING previous_received_at, coalesce(previous_degraded, 0)`

// accept writes r as its stream's registration with the store's time as
// ReceivedAt, and records the transitions that makes. It runs on the writer
// goroutine only (it reads and updates s.known).
func (s *Store) accept(ctx context.Context, q execer, r *live.Registration) error {
	now := nanos(s.now())
	r.ReceivedAt = fromNanos(now)
	previous, wasDegraded, err := s.writeRegistration(ctx, q, r, now)
	if err != nil {
		return err
	}
	if len(s.known) >= maxKnown {
		clear(s.known)
	}
	s.known[r.StreamID] = known{receivedAt: now, service: r.ServiceID, subject: r.SubjectID, degraded: r.Degraded}
	return s.record(ctx, q, r.StreamID, live.AcceptTransitions(previous, wasDegraded, r.ReceivedAt, s.window, r.Degraded))
}

// writeRegistration writes r at now and returns the receive time of the
// registration it replaced (nil when none) and whether that one was
// degraded: by updateKnownSQL when the writer knows the row, else (or when
// that changed nothing) by upsertSQL.
func (s *Store) writeRegistration(ctx context.Context, q execer, r *live.Registration, now int64) (*time.Time, bool, error) {
	if k, ok := s.known[r.StreamID]; ok && k.service == r.ServiceID && k.subject == r.SubjectID {
		res, err := q.ExecContext(ctx, updateKnownSQL, r.Report, now, r.Degraded, r.StreamID, r.ServiceID, r.SubjectID, k.receivedAt, k.degraded)
		if err != nil {
			return nil, false, workerError(ctx, q, "accept", r.StreamID, r.ServiceID, r.SubjectID, err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return nil, false, fmt.Errorf("accept %s: %w", r.StreamID, err)
		}
		if n == 1 {
			previous := fromNanos(k.receivedAt)
			return &previous, k.degraded, nil
		}
	}
	var previous sql.NullInt64
	var wasDegraded bool
	if err := q.QueryRowContext(ctx, upsertSQL, r.StreamID, r.Report, now, r.ServiceID, r.SubjectID, r.Degraded).Scan(&previous, &wasDegraded); err != nil {
		return nil, false, workerError(ctx, q, "accept", r.StreamID, r.ServiceID, r.SubjectID, err)
	}
	return fromNullNanos(previous), wasDegraded, nil
}
