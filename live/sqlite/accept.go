package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"openvibe.network/agentsandbox/live"
)

// acceptChunks are the sizes of the multi-row statements a group of
// check-ins is written with (each size's statements are prepared once).
var acceptChunks = []int{64, 32, 16, 8, 4, 2, 1}

// acceptGroup writes rs (check-ins of distinct streams) in as few
// statements as acceptChunks allow, sets each receive time from the store's
// clock, and records the transitions each makes. A check-in of a stream
// whose registration has the same service and subject (nearly all: a
// worker checks in again) is written by an update of the report and times
// only, which leaves the two indexes and the three foreign keys of those
// columns untouched (a fifth of a check-in's cost in the writer); the others
// (a first check-in, a changed service or subject) by the full upsert after
// it. Its error is the first statement's that fails (the caller then writes
// each alone, to know whose it is).
func (s *Store) acceptGroup(ctx context.Context, q execer, rs []*live.Registration) error {
	for _, r := range rs {
		r.ReceivedAt = fromNanos(nanos(s.now()))
	}
	var rest []*live.Registration
	err := inChunks(rs, func(chunk []*live.Registration) error {
		missed, err := s.writeRows(ctx, q, updateStatements, chunk)
		rest = append(rest, missed...)
		return err
	})
	if err != nil {
		return err
	}
	return inChunks(rest, func(chunk []*live.Registration) error {
		missed, err := s.writeRows(ctx, q, upsertStatements, chunk)
		if err == nil && len(missed) > 0 {
			err = fmt.Errorf("accept: %d rows written for %d check-ins", len(chunk)-len(missed), len(chunk))
		}
		return err
	})
}

// inChunks calls fn with consecutive pieces of rs, each of a size in
// acceptChunks, the largest that fits first; it stops at fn's first error.
func inChunks(rs []*live.Registration, fn func([]*live.Registration) error) error {
	for len(rs) > 0 {
		n := acceptChunks[len(acceptChunks)-1]
		for _, c := range acceptChunks {
			if c <= len(rs) {
				n = c
				break
			}
		}
		if err := fn(rs[:n]); err != nil {
			return err
		}
		rs = rs[n:]
	}
	return nil
}

// valuesSQL is n rows of the five values of a registration.
func valuesSQL(n int) string {
	return strings.TrimSuffix(strings.Repeat("(?, ?, ?, ?, ?), ", n), ", ")
}

// upsertSQL is the upsert of n registrations, RETURNING each stream with
// the receive time its registration replaced (NULL when none).
func upsertSQL(n int) string {
	return `INSERT INTO registrations (stream_id, report, received_at, service_id, subject_id) VALUES ` + valuesSQL(n) + `
		ON CONFLICT (stream_id) DO UPDATE SET report = excluded.report, received_at = excluded.received_at,
			service_id = excluded.service_id, subject_id = excluded.subject_id,
			previous_received_at = registrations.received_at
		RETURNING stream_id, previous_received_at`
}

// updateSQL is the update of the report and times of those of n
// registrations whose stream is registered with the same service and
// subject, RETURNING each stream it wrote with the receive time its
// registration replaced. It is OR FAIL, so SQLite keeps no statement
// journal for it (a copy of each page it is about to change, 8% of the
// writer's time): a statement that fails part-way leaves its earlier rows
// written, but its error then rolls the whole group's transaction back and
// commit writes each check-in again alone (see Store.commit).
func updateSQL(n int) string {
	return `UPDATE OR FAIL registrations SET report = v.column2, received_at = v.column3,
			previous_received_at = registrations.received_at
		FROM (VALUES ` + valuesSQL(n) + `) AS v
		WHERE registrations.stream_id = v.column1 AND registrations.service_id = v.column4
			AND registrations.subject_id = v.column5
		RETURNING stream_id, previous_received_at`
}

// upsertStatements and updateStatements are the statements of acceptChunks'
// sizes.
var upsertStatements, updateStatements = statements(upsertSQL), statements(updateSQL)

func statements(sql func(n int) string) map[int]string {
	m := map[int]string{}
	for _, n := range acceptChunks {
		m[n] = sql(n)
	}
	return m
}

// writeRows runs the statement of len(rs) rows of stmts with rs and records
// the transitions of each check-in it wrote; it returns those it did not
// write (the update's misses).
func (s *Store) writeRows(ctx context.Context, q execer, stmts map[int]string, rs []*live.Registration) (missed []*live.Registration, err error) {
	args := make([]any, 0, 5*len(rs))
	byStream := make(map[string]*live.Registration, len(rs))
	for _, r := range rs {
		args = append(args, r.StreamID, r.Report, nanos(r.ReceivedAt), r.ServiceID, r.SubjectID)
		byStream[r.StreamID] = r
	}
	rows, err := q.QueryContext(ctx, stmts[len(rs)], args...)
	if err != nil {
		return nil, s.upsertError(ctx, q, rs, err)
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
			return nil, fmt.Errorf("accept: %w", err)
		}
		if r := byStream[stream]; r != nil {
			ws = append(ws, written{r, previous})
			delete(byStream, stream)
		}
	}
	if err := rows.Close(); err != nil {
		return nil, s.upsertError(ctx, q, rs, err)
	}
	if err := rows.Err(); err != nil {
		return nil, s.upsertError(ctx, q, rs, err)
	}
	for _, w := range ws {
		if err := s.record(ctx, q, w.r.StreamID, live.AcceptTransitions(fromNullNanos(w.previous), w.r.ReceivedAt, s.window)); err != nil {
			return nil, err
		}
	}
	for _, r := range rs {
		if byStream[r.StreamID] != nil {
			missed = append(missed, r)
		}
	}
	return missed, nil
}

// upsertError maps an upsert's error; for one check-in, as workerError.
func (s *Store) upsertError(ctx context.Context, q execer, rs []*live.Registration, err error) error {
	if len(rs) == 1 {
		r := rs[0]
		return workerError(ctx, q, "accept", r.StreamID, r.ServiceID, r.SubjectID, err)
	}
	return fmt.Errorf("accept %d check-ins: %w", len(rs), err)
}
