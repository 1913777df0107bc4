package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	sqlite3 "modernc.org/sqlite/lib"

	"openvibe.network/agentsandbox/live"
)

// Accept stores r as the stream's registration, replacing any earlier one,
// with the store's time as ReceivedAt; it returns once the write is durable.
// Errors: ENOTFOUND (no such stream), EINVALID (see live.CheckRegistration,
// or an unknown service or subject).
func (s *Store) Accept(ctx context.Context, r live.Registration) (live.Registration, error) {
	if err := live.CheckRegistration(r); err != nil {
		return r, err
	}
	r.Report = append([]byte(nil), r.Report...)
	err := s.writeOne(ctx, func(ctx context.Context, q execer) error {
		r.ReceivedAt = fromNanos(nanos(s.now()))
		_, err := q.ExecContext(ctx, `INSERT INTO registrations (stream_id, report, received_at, service_id, subject_id)
			VALUES (?, ?, ?, ?, ?)
			ON CONFLICT (stream_id) DO UPDATE SET report = excluded.report, received_at = excluded.received_at,
				service_id = excluded.service_id, subject_id = excluded.subject_id`,
			r.StreamID, r.Report, nanos(r.ReceivedAt), r.ServiceID, r.SubjectID)
		return workerError(ctx, q, "accept", r.StreamID, r.ServiceID, r.SubjectID, err)
	})
	return r, err
}

// Refuse clears the stream's registration and records r as its last
// refusal, in one transaction, with the store's time as At. Errors:
// ENOTFOUND (no such stream), EINVALID (see live.CheckRefusal, or an unknown
// service or subject).
func (s *Store) Refuse(ctx context.Context, r live.Refusal) (live.Refusal, error) {
	if err := live.CheckRefusal(r); err != nil {
		return r, err
	}
	errs, err := json.Marshal(r.Errors)
	if err != nil {
		return r, fmt.Errorf("refuse: %w", err)
	}
	err = s.write(ctx, func(ctx context.Context, q execer) error {
		r.At = fromNanos(nanos(s.now()))
		if _, err := q.ExecContext(ctx, "DELETE FROM registrations WHERE stream_id = ?", r.StreamID); err != nil {
			return fmt.Errorf("refuse %s: %w", r.StreamID, err)
		}
		_, err := q.ExecContext(ctx, `INSERT INTO refusals (stream_id, at, service_id, subject_id, errors)
			VALUES (?, ?, ?, ?, ?)
			ON CONFLICT (stream_id) DO UPDATE SET at = excluded.at, service_id = excluded.service_id,
				subject_id = excluded.subject_id, errors = excluded.errors`,
			r.StreamID, nanos(r.At), r.ServiceID, r.SubjectID, string(errs))
		return workerError(ctx, q, "refuse", r.StreamID, r.ServiceID, r.SubjectID, err)
	})
	return r, err
}

// workerError maps the error of a registration or refusal write: a foreign
// key that points nowhere is ENOTFOUND for the stream, else EINVALID.
func workerError(ctx context.Context, q execer, op, stream, service, subject string, err error) error {
	if err == nil {
		return nil
	}
	if sqliteCode(err) != sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY {
		return fmt.Errorf("%s %s: %w", op, stream, err)
	}
	var one int
	switch serr := q.QueryRowContext(ctx, "SELECT 1 FROM streams WHERE id = ?", stream).Scan(&one); {
	case serr == sql.ErrNoRows:
		return live.Errorf(live.ENOTFOUND, "stream %q not found", stream)
	case serr != nil:
		return fmt.Errorf("%s %s: %w", op, stream, serr)
	}
	return live.Errorf(live.EINVALID, "service %q or subject %q is not known", service, subject)
}

// Worker returns the stream's registration and last refusal, read in one
// statement. Errors: ENOTFOUND (no such stream).
func (s *Store) Worker(ctx context.Context, streamID string) (live.WorkerRecord, error) {
	var rec live.WorkerRecord
	var report []byte
	var received, at sql.NullInt64
	var regSvc, regSub, refSvc, refSub, errs sql.NullString
	err := s.readRow(ctx, `SELECT r.report, r.received_at, r.service_id, r.subject_id,
			f.at, f.service_id, f.subject_id, f.errors
		FROM streams s
		LEFT JOIN registrations r ON r.stream_id = s.id
		LEFT JOIN refusals f ON f.stream_id = s.id
		WHERE s.id = ?`, streamID).Scan(&report, &received, &regSvc, &regSub, &at, &refSvc, &refSub, &errs)
	if err != nil {
		return rec, getError("stream", streamID, err)
	}
	if received.Valid {
		rec.Registration = &live.Registration{StreamID: streamID, Report: report, ReceivedAt: fromNanos(received.Int64),
			ServiceID: regSvc.String, SubjectID: regSub.String}
	}
	if at.Valid {
		rec.Refusal = &live.Refusal{StreamID: streamID, At: fromNanos(at.Int64), ServiceID: refSvc.String, SubjectID: refSub.String}
		if err := json.Unmarshal([]byte(errs.String), &rec.Refusal.Errors); err != nil {
			return rec, fmt.Errorf("worker %s: refusal errors: %w", streamID, err)
		}
	}
	return rec, nil
}
