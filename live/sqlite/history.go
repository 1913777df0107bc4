package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"openvibe.network/agentsandbox/live"
)

// record appends ts to the stream's history, inside the caller's write, and
// prunes the history when it grew.
func (s *Store) record(ctx context.Context, q execer, stream string, ts []live.Transition) error {
	for _, t := range ts {
		if _, err := q.ExecContext(ctx, "INSERT INTO transitions (stream_id, at, state) VALUES (?, ?, ?)",
			stream, nanos(t.At), string(t.State)); err != nil {
			return fmt.Errorf("record transition of %s: %w", stream, err)
		}
	}
	if len(ts) == 0 {
		return nil
	}
	if _, err := q.ExecContext(ctx, `DELETE FROM transitions WHERE stream_id = ?1 AND (at < ?2 OR id <=
			(SELECT id FROM transitions WHERE stream_id = ?1 ORDER BY id DESC LIMIT 1 OFFSET ?3))`,
		stream, nanos(ts[len(ts)-1].At.Add(-s.historyAge)), s.historyRows); err != nil {
		return fmt.Errorf("prune history of %s: %w", stream, err)
	}
	return nil
}

// clear deletes the stream's registration (if any) at now, inside the
// caller's write, and records the transitions into state that makes (see
// live.ClearTransitions).
func (s *Store) clear(ctx context.Context, q execer, stream string, now time.Time, state live.State) error {
	var received sql.NullInt64
	err := q.QueryRowContext(ctx, "DELETE FROM registrations WHERE stream_id = ? RETURNING received_at", stream).Scan(&received)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("clear registration of %s: %w", stream, err)
	}
	last, err := lastState(ctx, q, stream)
	if err != nil {
		return err
	}
	return s.record(ctx, q, stream, live.ClearTransitions(fromNullNanos(received), last, now, s.window, state))
}

// lastState returns the stream's last recorded state, "" when none.
func lastState(ctx context.Context, q execer, stream string) (live.State, error) {
	var state string
	err := q.QueryRowContext(ctx, "SELECT state FROM transitions WHERE stream_id = ? ORDER BY at DESC, id DESC LIMIT 1", stream).Scan(&state)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("last state of %s: %w", stream, err)
	}
	return live.State(state), nil
}

// History returns the stream's transitions from since on, preceded by the
// last one before since. Errors: ENOTFOUND (no such stream).
func (s *Store) History(ctx context.Context, streamID string, since time.Time) ([]live.Transition, error) {
	if _, err := s.Stream(ctx, streamID); err != nil {
		return nil, err
	}
	rows, err := s.rdb.QueryContext(ctx, `SELECT at, state FROM (
			SELECT * FROM (SELECT id, at, state FROM transitions WHERE stream_id = ?1 AND at < ?2 ORDER BY at DESC, id DESC LIMIT 1)
			UNION ALL
			SELECT id, at, state FROM transitions WHERE stream_id = ?1 AND at >= ?2)
		ORDER BY at, id`, streamID, nanos(since))
	if err != nil {
		return nil, fmt.Errorf("history of %s: %w", streamID, err)
	}
	defer rows.Close()
	var out []live.Transition
	for rows.Next() {
		var at int64
		var state string
		if err := rows.Scan(&at, &state); err != nil {
			return nil, fmt.Errorf("history of %s: %w", streamID, err)
		}
		out = append(out, live.Transition{At: fromNanos(at), State: live.State(state)})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("history of %s: %w", streamID, err)
	}
	return out, nil
}

// CountStates counts the streams in each state at now, in one statement.
func (s *Store) CountStates(ctx context.Context, now time.Time, window time.Duration) (map[live.State]int, error) {
	var alive, stale, refused, absent int
	err := s.readRow(ctx, `SELECT
			coalesce(sum(r.received_at IS NOT NULL AND r.received_at > ?1), 0),
			coalesce(sum(r.received_at IS NOT NULL AND r.received_at <= ?1), 0),
			coalesce(sum(r.received_at IS NULL AND f.at IS NOT NULL), 0),
			coalesce(sum(r.received_at IS NULL AND f.at IS NULL), 0)
		FROM streams s
		LEFT JOIN registrations r ON r.stream_id = s.id
		LEFT JOIN refusals f ON f.stream_id = s.id`, nanos(now.Add(-window))).Scan(&alive, &stale, &refused, &absent)
	if err != nil {
		return nil, fmt.Errorf("count states: %w", err)
	}
	return map[live.State]int{live.StateAlive: alive, live.StateStale: stale, live.StateRefused: refused, live.StateAbsent: absent}, nil
}
