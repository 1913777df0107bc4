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
}

// maxKnown bounds the writer's memory of registrations; past it, the writer
// forgets them all and learns them again from the check-ins that follow.
const maxKnown = 1 << 16

// updateKnownSQL writes a check-in over the registration the writer wrote
// last, if the row is still that one: same service and subject, same receive
// time. It neither reads the row back (the receive time it replaces is the
// one the writer knows) nor touches the indexes and foreign keys of the
// service and subject, which stay as they are.
// (Its parameters are plain, in order: the driver binds them without
// looking up each one's name.)
const updateKnownSQL = `UPDATE registrations SET report = ?, received_at = ?, previous_received_at = received_at
	WHERE stream_id = ? AND service_id = ? AND subject_id = ? AND received_at = ?`

// upsertSQL writes any check-in: a stream's first, one from another service
// or subject, or one after a write the writer does not know of. It returns
// the receive time of the registration it replaced (NULL when none).
const upsertSQL = `INSERT INTO registrations (stream_id, report, received_at, service_id, subject_id) VALUES (?, ?, ?, ?, ?)
	ON CONFLICT (stream_id) DO UPDATE SET report = excluded.report, received_at = excluded.received_at,
		service_id = excluded.service_id, subject_id = excluded.subject_id,
		previous_received_at = registrations.received_at
	RETURNING previous_received_at`

// accept writes r as its stream's registration with the store's time as
// ReceivedAt, and records the transitions that makes. It runs on the writer
// goroutine only (it reads and updates s.known).
func (s *Store) accept(ctx context.Context, q execer, r *live.Registration) error {
	now := nanos(s.now())
	r.ReceivedAt = fromNanos(now)
	previous, err := s.writeRegistration(ctx, q, r, now)
	if err != nil {
		return err
	}
	if len(s.known) >= maxKnown {
		clear(s.known)
	}
	s.known[r.StreamID] = known{receivedAt: now, service: r.ServiceID, subject: r.SubjectID}
	return s.record(ctx, q, r.StreamID, live.AcceptTransitions(previous, r.ReceivedAt, s.window))
}

// writeRegistration writes r at now and returns the receive time of the
// registration it replaced (nil when none): by updateKnownSQL when the
// writer knows the row, else (or when that changed nothing) by upsertSQL.
func (s *Store) writeRegistration(ctx context.Context, q execer, r *live.Registration, now int64) (*time.Time, error) {
	if k, ok := s.known[r.StreamID]; ok && k.service == r.ServiceID && k.subject == r.SubjectID {
		res, err := q.ExecContext(ctx, updateKnownSQL, r.Report, now, r.StreamID, r.ServiceID, r.SubjectID, k.receivedAt)
		if err != nil {
			return nil, workerError(ctx, q, "accept", r.StreamID, r.ServiceID, r.SubjectID, err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return nil, fmt.Errorf("accept %s: %w", r.StreamID, err)
		}
		if n == 1 {
			previous := fromNanos(k.receivedAt)
			return &previous, nil
		}
	}
	var previous sql.NullInt64
	if err := q.QueryRowContext(ctx, upsertSQL, r.StreamID, r.Report, now, r.ServiceID, r.SubjectID).Scan(&previous); err != nil {
		return nil, workerError(ctx, q, "accept", r.StreamID, r.ServiceID, r.SubjectID, err)
	}
	return fromNullNanos(previous), nil
}
