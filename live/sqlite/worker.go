package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	sqlite3 "modernc.org/sqlite/lib"

	"openvibe.network/agentsandbox"
	"openvibe.network/agentsandbox/live"
)

// Accept stores r as the stream's registration, replacing any earlier one,
// with the store's time as ReceivedAt, and records the transition it makes;
// it returns once the write is durable. Errors: ENOTFOUND (no such stream),
// EINVALID (see live.CheckRegistration, or an unknown service or subject).
func (s *Store) Accept(ctx context.Context, r live.Registration) (live.Registration, error) {
	if err := live.CheckRegistration(r); err != nil {
		return r, err
	}
	r.Report = append([]byte(nil), r.Report...)
	err := s.writeKeepingAuth(ctx, r.AuthEpoch, func(ctx context.Context, q execer) error { return s.accept(ctx, q, &r) })
	return r, err
}

// Refuse clears the stream's registration and records r as its last
// refusal and the transition, in one transaction, with the store's time as
// At. Errors: ENOTFOUND (no such stream), EINVALID (see live.CheckRefusal,
// or an unknown service or subject).
func (s *Store) Refuse(ctx context.Context, r live.Refusal) (live.Refusal, error) {
	if err := live.CheckRefusal(r); err != nil {
		return r, err
	}
	r = normalizeRefusal(r)
	errs, err := json.Marshal(r.Errors)
	if err != nil {
		return r, fmt.Errorf("refuse: %w", err)
	}
	reasons, err := json.Marshal(r.Reasons)
	if err != nil {
		return r, fmt.Errorf("refuse: %w", err)
	}
	facts, err := json.Marshal(r.Facts)
	if err != nil {
		return r, fmt.Errorf("refuse: %w", err)
	}
	err = s.writeKeepingAuth(ctx, r.AuthEpoch, func(ctx context.Context, q execer) error {
		r.At = fromNanos(nanos(s.now()))
		_, err := q.ExecContext(ctx, `INSERT INTO refusals (stream_id, at, service_id, subject_id, errors, reasons, facts, errors_total)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (stream_id) DO UPDATE SET at = excluded.at, service_id = excluded.service_id,
				subject_id = excluded.subject_id, errors = excluded.errors, reasons = excluded.reasons,
				facts = excluded.facts, errors_total = excluded.errors_total`,
			r.StreamID, nanos(r.At), r.ServiceID, r.SubjectID, string(errs), string(reasons), string(facts), r.ErrorsTotal)
		if err != nil {
			return workerError(ctx, q, "refuse", r.StreamID, r.ServiceID, r.SubjectID, err)
		}
		return s.clear(ctx, q, r.StreamID, r.At, live.StateRefused)
	})
	return r, err
}

// normalizeRefusal gives r non-nil lists and facts, so that they are stored
// as [] and {}, and an ErrorsTotal that counts at least its errors.
func normalizeRefusal(r live.Refusal) live.Refusal {
	if r.Errors == nil {
		r.Errors = []agentsandbox.ValidationError{}
	}
	if r.Reasons == nil {
		r.Reasons = []string{}
	}
	if r.Facts == nil {
		r.Facts = map[string]string{}
	}
	r.ErrorsTotal = max(r.ErrorsTotal, len(r.Errors))
	return r
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
	var received, at, total sql.NullInt64
	var degraded sql.NullBool
	var regSvc, regSub, refSvc, refSub, errs, reasons, facts sql.NullString
	err := s.readRow(ctx, `SELECT r.report, r.received_at, r.service_id, r.subject_id, r.degraded,
			f.at, f.service_id, f.subject_id, f.errors, f.reasons, f.facts, f.errors_total
		FROM streams s
		LEFT JOIN registrations r ON r.stream_id = s.id
		LEFT JOIN refusals f ON f.stream_id = s.id
		WHERE s.id = ?`, streamID).Scan(&report, &received, &regSvc, &regSub, &degraded, &at, &refSvc, &refSub, &errs, &reasons, &facts, &total)
	if err != nil {
		return rec, getError("stream", streamID, err)
	}
	if received.Valid {
		rec.Registration = &live.Registration{StreamID: streamID, Report: report, ReceivedAt: fromNanos(received.Int64),
			ServiceID: regSvc.String, SubjectID: regSub.String, Degraded: degraded.Bool}
	}
	if at.Valid {
		rec.Refusal = &live.Refusal{StreamID: streamID, At: fromNanos(at.Int64), ServiceID: refSvc.String, SubjectID: refSub.String,
			ErrorsTotal: int(total.Int64)}
		for _, f := range []struct {
			what string
			text string
			into any
		}{{"errors", errs.String, &rec.Refusal.Errors}, {"reasons", reasons.String, &rec.Refusal.Reasons}, {"facts", facts.String, &rec.Refusal.Facts}} {
			if err := json.Unmarshal([]byte(f.text), f.into); err != nil {
				return rec, fmt.Errorf("worker %s: refusal %s: %w", streamID, f.what, err)
			}
		}
	}
	return rec, nil
}

// LookupCheckIn reads the credential with hash (and its service), the
// stream and whether subject is a known person, in one statement.
func (s *Store) LookupCheckIn(ctx context.Context, hash [32]byte, stream, subject string) (live.CheckInLookup, error) {
	var l live.CheckInLookup
	var (
		credID, kind, credSvc, credPer sql.NullString
		credCreated                    sql.NullInt64
		expires, revoked, lastUsed     sql.NullInt64
		svcID, svcName, svcCaps        sql.NullString
		svcFirst                       sql.NullBool
		svcCreated                     sql.NullInt64
		stID, stOwner                  sql.NullString
		stCreated                      sql.NullInt64
		known                          bool
	)
	err := s.readRow(ctx, `SELECT c.id, c.kind, c.service_id, c.person_id, c.created_at, c.expires_at, c.revoked_at, c.last_used_at,
			v.id, v.name, v.first_party, v.capabilities, v.created_at,
			st.id, st.owner_id, st.created_at,
			EXISTS (SELECT 1 FROM persons WHERE id = ?3), (SELECT v FROM auth_epoch WHERE id = 1)
		FROM (SELECT 1)
		LEFT JOIN credentials c ON c.hash = ?1
		LEFT JOIN services v ON v.id = c.service_id
		LEFT JOIN streams st ON st.id = ?2`, hash[:], stream, subject).Scan(
		&credID, &kind, &credSvc, &credPer, &credCreated, &expires, &revoked, &lastUsed,
		&svcID, &svcName, &svcFirst, &svcCaps, &svcCreated,
		&stID, &stOwner, &stCreated, &known, &l.Epoch)
	if err != nil {
		return l, fmt.Errorf("look up check-in: %w", err)
	}
	if credID.Valid {
		l.Credential = &live.Credential{ID: credID.String, Kind: live.CredentialKind(kind.String), ServiceID: credSvc.String,
			PersonID: credPer.String, Hash: hash, CreatedAt: fromNanos(credCreated.Int64),
			ExpiresAt: fromNullNanos(expires), RevokedAt: fromNullNanos(revoked), LastUsedAt: fromNullNanos(lastUsed)}
	}
	if svcID.Valid {
		sv := live.Service{ID: svcID.String, Name: svcName.String, FirstParty: svcFirst.Bool, CreatedAt: fromNanos(svcCreated.Int64)}
		if err := json.Unmarshal([]byte(svcCaps.String), &sv.Capabilities); err != nil {
			return l, fmt.Errorf("look up check-in: service %s capabilities: %w", sv.ID, err)
		}
		l.Service = &sv
	}
	if stID.Valid {
		l.Stream = &live.Stream{ID: stID.String, OwnerID: stOwner.String, CreatedAt: fromNanos(stCreated.Int64)}
	}
	l.SubjectKnown = known
	return l, nil
}

// Probe writes and commits the health probe's row.
func (s *Store) Probe(ctx context.Context) error {
	err := s.writeKeepingAuth(ctx, 0, func(ctx context.Context, q execer) error {
		_, err := q.ExecContext(ctx, "INSERT INTO health_probe (id, at) VALUES (1, ?) ON CONFLICT (id) DO UPDATE SET at = excluded.at", nanos(s.now()))
		return err
	})
	if err != nil && live.ErrorCode(err) == live.EINTERNAL {
		return fmt.Errorf("probe: %w", err)
	}
	return err
}
