package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"openvibe.network/agentsandbox"
	"openvibe.network/agentsandbox/live"
)

// Refuse clears the stream's registration, records r as its last refusal
// and the transition, in one transaction, with the database's clock as At.
// Errors: ENOTFOUND (no such stream), EINVALID (see live.CheckRefusal, or an
// unknown service or subject).
func (s *Store) Refuse(ctx context.Context, r live.Refusal) (live.Refusal, error) {
	if err := s.writable(); err != nil {
		return r, err
	}
	if err := live.CheckRefusal(r); err != nil {
		return r, err
	}
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
	var grew bool
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		if r.AuthEpoch != 0 {
			var epoch int64
			if err := tx.QueryRow(ctx, "SELECT v FROM auth_epoch WHERE id = 1").Scan(&epoch); err != nil {
				return fmt.Errorf("refuse: read auth epoch: %w", err)
			}
			if epoch != r.AuthEpoch {
				return fmt.Errorf("refuse: %w", live.ErrAuthChanged)
			}
		}
		err := tx.QueryRow(ctx, `INSERT INTO refusals (stream_id, at, service_id, subject_id, errors, reasons, facts, errors_total)
			VALUES ($1, clock_timestamp(), $2, $3, $4, $5, $6, $7)
			ON CONFLICT (stream_id) DO UPDATE SET at = excluded.at, service_id = excluded.service_id,
				subject_id = excluded.subject_id, errors = excluded.errors, reasons = excluded.reasons,
				facts = excluded.facts, errors_total = excluded.errors_total
			RETURNING at`, r.StreamID, r.ServiceID, r.SubjectID, string(errs), string(reasons), string(facts), r.ErrorsTotal).Scan(&r.At)
		if err != nil {
			return workerError("refuse", "refusals_stream_id_fkey", r.StreamID, r.ServiceID, r.SubjectID, err)
		}
		r.At = utc(r.At)
		grew, err = s.clear(ctx, tx, r.StreamID, r.At, live.StateRefused)
		return err
	})
	if err == nil && grew {
		_ = s.prune(ctx, []string{r.StreamID})
	}
	return r, err
}

// clear deletes the stream's registration (if any) at now, inside tx, and
// records the transitions into state that makes (see
// live.ClearTransitions). It reports whether it recorded any.
func (s *Store) clear(ctx context.Context, tx pgx.Tx, stream string, now time.Time, state live.State) (bool, error) {
	var received *time.Time
	err := tx.QueryRow(ctx, "DELETE FROM registrations WHERE stream_id = $1 RETURNING received_at", stream).Scan(&received)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return false, fmt.Errorf("clear registration of %s: %w", stream, err)
	}
	var last string
	err = tx.QueryRow(ctx, "SELECT state FROM transitions WHERE stream_id = $1 ORDER BY at DESC, id DESC LIMIT 1", stream).Scan(&last)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return false, fmt.Errorf("last state of %s: %w", stream, err)
	}
	ts := live.ClearTransitions(utcPtr(received), live.State(last), now, s.window, state)
	for _, t := range ts {
		if _, err := tx.Exec(ctx, "INSERT INTO transitions (stream_id, at, state) VALUES ($1, $2, $3)", stream, t.At, string(t.State)); err != nil {
			return false, fmt.Errorf("record transition of %s: %w", stream, err)
		}
	}
	return len(ts) > 0, nil
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
	var report, errs, reasons, facts []byte
	var received, at *time.Time
	var regSvc, regSub, refSvc, refSub *string
	var degraded *bool
	var total *int
	err := s.pool.QueryRow(ctx, `SELECT r.report, r.received_at, r.service_id, r.subject_id, r.degraded,
			f.at, f.service_id, f.subject_id, f.errors::text, f.reasons::text, f.facts::text, f.errors_total
		FROM streams s
		LEFT JOIN registrations r ON r.stream_id = s.id
		LEFT JOIN refusals f ON f.stream_id = s.id
		WHERE s.id = $1`, streamID).Scan(&report, &received, &regSvc, &regSub, &degraded, &at, &refSvc, &refSub, &errs, &reasons, &facts, &total)
	if err != nil {
		return rec, getError("stream", streamID, err)
	}
	if received != nil {
		rec.Registration = &live.Registration{StreamID: streamID, Report: report, ReceivedAt: utc(*received),
			ServiceID: deref(regSvc), SubjectID: deref(regSub), Degraded: degraded != nil && *degraded}
	}
	if at != nil {
		rec.Refusal = &live.Refusal{StreamID: streamID, At: utc(*at), ServiceID: deref(refSvc), SubjectID: deref(refSub)}
		if total != nil {
			rec.Refusal.ErrorsTotal = *total
		}
		for _, f := range []struct {
			what string
			text []byte
			into any
		}{{"errors", errs, &rec.Refusal.Errors}, {"reasons", reasons, &rec.Refusal.Reasons}, {"facts", facts, &rec.Refusal.Facts}} {
			if err := json.Unmarshal(f.text, f.into); err != nil {
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
		credID, kind, credSvc, credPer *string
		credCreated                    *time.Time
		expires, revoked, lastUsed     *time.Time
		svcID, svcName                 *string
		svcFirst                       *bool
		svcCaps                        []string
		svcCreated                     *time.Time
		stID, stOwner                  *string
		stCreated                      *time.Time
	)
	err := s.pool.QueryRow(ctx, `SELECT c.id, c.kind, c.service_id, c.person_id, c.created_at, c.expires_at, c.revoked_at, c.last_used_at,
			v.id, v.name, v.first_party, v.capabilities, v.created_at,
			st.id, st.owner_id, st.created_at,
			EXISTS (SELECT 1 FROM persons WHERE id = $3), (SELECT v FROM auth_epoch WHERE id = 1)
		FROM (SELECT 1) AS one
		LEFT JOIN credentials c ON c.hash = $1
		LEFT JOIN services v ON v.id = c.service_id
		LEFT JOIN streams st ON st.id = $2`, hash[:], stream, subject).Scan(
		&credID, &kind, &credSvc, &credPer, &credCreated, &expires, &revoked, &lastUsed,
		&svcID, &svcName, &svcFirst, &svcCaps, &svcCreated,
		&stID, &stOwner, &stCreated, &l.SubjectKnown, &l.Epoch)
	if err != nil {
		return l, fmt.Errorf("look up check-in: %w", err)
	}
	if credID != nil {
		l.Credential = &live.Credential{ID: *credID, Kind: live.CredentialKind(deref(kind)), ServiceID: deref(credSvc),
			PersonID: deref(credPer), Hash: hash, CreatedAt: utc(*credCreated),
			ExpiresAt: utcPtr(expires), RevokedAt: utcPtr(revoked), LastUsedAt: utcPtr(lastUsed)}
	}
	if svcID != nil {
		if svcCaps == nil {
			svcCaps = []string{}
		}
		l.Service = &live.Service{ID: *svcID, Name: deref(svcName), FirstParty: svcFirst != nil && *svcFirst, Capabilities: svcCaps, CreatedAt: utc(*svcCreated)}
	}
	if stID != nil {
		l.Stream = &live.Stream{ID: *stID, OwnerID: deref(stOwner), CreatedAt: utc(*stCreated)}
	}
	return l, nil
}

// History returns the stream's transitions from since on, preceded by the
// last one before since. Errors: ENOTFOUND (no such stream).
func (s *Store) History(ctx context.Context, streamID string, since time.Time) ([]live.Transition, error) {
	if _, err := s.Stream(ctx, streamID); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT at, state FROM (
			(SELECT id, at, state FROM transitions WHERE stream_id = $1 AND at < $2 ORDER BY at DESC, id DESC LIMIT 1)
			UNION ALL
			SELECT id, at, state FROM transitions WHERE stream_id = $1 AND at >= $2) AS h
		ORDER BY at, id`, streamID, since)
	if err != nil {
		return nil, fmt.Errorf("history of %s: %w", streamID, err)
	}
	defer rows.Close()
	var out []live.Transition
	for rows.Next() {
		var at time.Time
		var state string
		if err := rows.Scan(&at, &state); err != nil {
			return nil, fmt.Errorf("history of %s: %w", streamID, err)
		}
		out = append(out, live.Transition{At: utc(at), State: live.State(state)})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("history of %s: %w", streamID, err)
	}
	return out, nil
}

// CountStates counts the streams in each state at now, in one statement.
func (s *Store) CountStates(ctx context.Context, now time.Time, window time.Duration) (map[live.State]int, error) {
	var alive, stale, refused, absent int
	err := s.pool.QueryRow(ctx, `SELECT
			count(*) FILTER (WHERE r.received_at > $1),
			count(*) FILTER (WHERE r.received_at <= $1),
			count(*) FILTER (WHERE r.received_at IS NULL AND f.at IS NOT NULL),
			count(*) FILTER (WHERE r.received_at IS NULL AND f.at IS NULL)
		FROM streams s
		LEFT JOIN registrations r ON r.stream_id = s.id
		LEFT JOIN refusals f ON f.stream_id = s.id`, now.Add(-window)).Scan(&alive, &stale, &refused, &absent)
	if err != nil {
		return nil, fmt.Errorf("count states: %w", err)
	}
	return map[live.State]int{live.StateAlive: alive, live.StateStale: stale, live.StateRefused: refused, live.StateAbsent: absent}, nil
}

// Probe writes and commits the health probe's row.
func (s *Store) Probe(ctx context.Context) error {
	if err := s.writable(); err != nil {
		return err
	}
	if _, err := s.pool.Exec(ctx, `INSERT INTO health_probe (id, at) VALUES (1, clock_timestamp())
		ON CONFLICT (id) DO UPDATE SET at = excluded.at`); err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	return nil
}

// deref returns *s, or "" for a NULL column.
func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
