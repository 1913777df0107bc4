package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"openvibe.network/agentsandbox/live"
)

// acceptChunks are the sizes of the multi-row upserts a group of check-ins
// is written with (each size's statement is prepared once).
var acceptChunks = []int{64, 32, 16, 8, 4, 2, 1}

// acceptGroup writes rs (check-ins of distinct streams) in as few
// statements as acceptChunks allow, sets each receive time from the store's
// clock, and records the transitions each makes. Its error is the first
// statement's that fails (the caller then writes each alone, to know whose
// it is).
func (s *Store) acceptGroup(ctx context.Context, q execer, rs []*live.Registration) error {
	for len(rs) > 0 {
		n := acceptChunks[len(acceptChunks)-1]
		for _, c := range acceptChunks {
			if c <= len(rs) {
				n = c
				break
			}
		}
		if err := s.upsert(ctx, q, rs[:n]); err != nil {
			return err
		}
		rs = rs[n:]
	}
	return nil
}

// upsertSQL is the upsert of n registrations, RETURNING each stream with
// the receive time its registration replaced (NULL when none).
func upsertSQL(n int) string {
	return `INSERT INTO registrations (stream_id, report, received_at, service_id, subject_id) VALUES ` +
		strings.TrimSuffix(strings.Repeat("(?, ?, ?, ?, ?), ", n), ", ") + `
		ON CONFLICT (stream_id) DO UPDATE SET report = excluded.report, received_at = excluded.received_at,
			service_id = excluded.service_id, subject_id = excluded.subject_id,
			previous_received_at = registrations.received_at
		RETURNING stream_id, previous_received_at`
}

// upsertStatements are the upserts of acceptChunks' sizes.
var upsertStatements = func() map[int]string {
	m := map[int]string{}
	for _, n := range acceptChunks {
		m[n] = upsertSQL(n)
	}
	return m
}()

// upsert writes rs in one statement.
func (s *Store) upsert(ctx context.Context, q execer, rs []*live.Registration) error {
	args := make([]any, 0, 5*len(rs))
	byStream := make(map[string]*live.Registration, len(rs))
	for _, r := range rs {
		r.ReceivedAt = fromNanos(nanos(s.now()))
		args = append(args, r.StreamID, r.Report, nanos(r.ReceivedAt), r.ServiceID, r.SubjectID)
		byStream[r.StreamID] = r
	}
	rows, err := q.QueryContext(ctx, upsertStatements[len(rs)], args...)
	if err != nil {
		return s.upsertError(ctx, q, rs, err)
	}
	type written struct {
		r        *live.Registration
		previous sql.NullInt64
	}
	var ws []written
	for rows.Next() {
		var stream string
		var previous sql.NullInt64
		if err := rows.Scan(&stream, &previous); err != nil {
			rows.Close()
			return fmt.Errorf("accept: %w", err)
		}
		ws = append(ws, written{byStream[stream], previous})
	}
	if err := rows.Close(); err != nil {
		return s.upsertError(ctx, q, rs, err)
	}
	if err := rows.Err(); err != nil {
		return s.upsertError(ctx, q, rs, err)
	}
	if len(ws) != len(rs) {
		return fmt.Errorf("accept: %d rows written for %d check-ins", len(ws), len(rs))
	}
	for _, w := range ws {
		if err := s.record(ctx, q, w.r.StreamID, live.AcceptTransitions(fromNullNanos(w.previous), w.r.ReceivedAt, s.window)); err != nil {
			return err
		}
	}
	return nil
}

// upsertError maps an upsert's error; for one check-in, as workerError.
func (s *Store) upsertError(ctx context.Context, q execer, rs []*live.Registration, err error) error {
	if len(rs) == 1 {
		r := rs[0]
		return workerError(ctx, q, "accept", r.StreamID, r.ServiceID, r.SubjectID, err)
	}
	return fmt.Errorf("accept %d check-ins: %w", len(rs), err)
}
