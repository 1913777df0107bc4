package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"openvibe.network/agentsandbox/live"
)

// Accept stores r as the stream's registration, replacing any earlier one,
// in one upsert that takes the database's clock as ReceivedAt; it returns
// once the upsert is committed. Errors: ENOTFOUND (no such stream),
// EINVALID (see live.CheckRegistration, or an unknown service or subject).
func (s *Store) Accept(ctx context.Context, r live.Registration) (live.Registration, error) {
	if err := live.CheckRegistration(r); err != nil {
		return r, err
	}
	r.Report = append([]byte(nil), r.Report...)
	err := s.pool.QueryRow(ctx, `INSERT INTO registrations (stream_id, report, received_at, service_id, subject_id)
		VALUES ($1, $2, clock_timestamp(), $3, $4)
		ON CONFLICT (stream_id) DO UPDATE SET report = excluded.report, received_at = excluded.received_at,
			service_id = excluded.service_id, subject_id = excluded.subject_id
		RETURNING received_at`, r.StreamID, r.Report, r.ServiceID, r.SubjectID).Scan(&r.ReceivedAt)
	r.ReceivedAt = utc(r.ReceivedAt)
	return r, workerError("accept", "registrations_stream_id_fkey", r.StreamID, r.ServiceID, r.SubjectID, err)
}

// Refuse clears the stream's registration and records r as its last
// refusal, in one statement, with the database's clock as At. Errors:
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
	err = s.pool.QueryRow(ctx, `WITH cleared AS (DELETE FROM registrations WHERE stream_id = $1)
		INSERT INTO refusals (stream_id, at, service_id, subject_id, errors)
		VALUES ($1, clock_timestamp(), $2, $3, $4)
		ON CONFLICT (stream_id) DO UPDATE SET at = excluded.at, service_id = excluded.service_id,
			subject_id = excluded.subject_id, errors = excluded.errors
		RETURNING at`, r.StreamID, r.ServiceID, r.SubjectID, string(errs)).Scan(&r.At)
	r.At = utc(r.At)
	return r, workerError("refuse", "refusals_stream_id_fkey", r.StreamID, r.ServiceID, r.SubjectID, err)
}

// workerError maps the error of a registration or refusal write: the
// stream's foreign key is ENOTFOUND, the others EINVALID.
func workerError(op, streamFK, stream, service, subject string, err error) error {
	if err == nil {
		return nil
	}
	if pe := pgError(err); pe != nil && pe.Code == foreignKeyViolation {
		if pe.ConstraintName == streamFK {
			return live.Errorf(live.ENOTFOUND, "stream %q not found", stream)
		}
		return live.Errorf(live.EINVALID, "service %q or subject %q is not known", service, subject)
	}
	return fmt.Errorf("%s %s: %w", op, stream, err)
}

// Worker returns the stream's registration and last refusal, read in one
// statement. Errors: ENOTFOUND (no such stream).
func (s *Store) Worker(ctx context.Context, streamID string) (live.WorkerRecord, error) {
	var rec live.WorkerRecord
	var report, errs []byte
	var received, at *time.Time
	var regSvc, regSub, refSvc, refSub *string
	err := s.pool.QueryRow(ctx, `SELECT r.report, r.received_at, r.service_id, r.subject_id,
			f.at, f.service_id, f.subject_id, f.errors::text
		FROM streams s
		LEFT JOIN registrations r ON r.stream_id = s.id
		LEFT JOIN refusals f ON f.stream_id = s.id
		WHERE s.id = $1`, streamID).Scan(&report, &received, &regSvc, &regSub, &at, &refSvc, &refSub, &errs)
	if err != nil {
		return rec, getError("stream", streamID, err)
	}
	if received != nil {
		rec.Registration = &live.Registration{StreamID: streamID, Report: report, ReceivedAt: utc(*received),
			ServiceID: deref(regSvc), SubjectID: deref(regSub)}
	}
	if at != nil {
		rec.Refusal = &live.Refusal{StreamID: streamID, At: utc(*at), ServiceID: deref(refSvc), SubjectID: deref(refSub)}
		if err := json.Unmarshal(errs, &rec.Refusal.Errors); err != nil {
			return rec, fmt.Errorf("worker %s: refusal errors: %w", streamID, err)
		}
	}
	return rec, nil
}

// deref returns *s, or "" for a NULL column.
func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
