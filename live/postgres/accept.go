package postgres

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"openvibe.network/agentsandbox/live"
)

// maxBatch bounds how many check-ins share one statement.
const maxBatch = 256

// batchTimeout bounds one batch's statement when one of its callers has no
// deadline; otherwise the statement runs until the last of their deadlines
// (so one caller giving up does not fail the others).
const batchTimeout = 30 * time.Second

// acceptOp is one Accept waiting for a batch; ctx is its caller's.
type acceptOp struct {
	ctx  context.Context
	r    live.Registration
	done chan acceptResult
}

type acceptResult struct {
	receivedAt time.Time
	err        error
}

// acceptSQL upserts a batch of registrations (the arrays $1..$4 and $7, in
// order) with the database's clock, and records the transitions each makes,
// in one statement (so one transaction and one commit). A registration whose
// auth epoch ($6, 0 for none) is no longer the store's is left out. It
// follows live.AcceptTransitions: a registration that replaces none, or one
// that had gone stale ($5 microseconds old), starts a new run, alive or
// degraded ($7), preceded by the stale state of the old one; one that
// changes between alive and degraded within a run records the change. It
// returns each written stream's receive time and whether it recorded
// transitions.
const acceptSQL = `WITH input AS (
		SELECT * FROM unnest($1::text[], $2::bytea[], $3::text[], $4::text[], $6::bigint[], $7::boolean[])
			WITH ORDINALITY AS i(stream_id, report, service_id, subject_id, epoch, degraded, n)
		WHERE epoch = 0 OR epoch = (SELECT v FROM auth_epoch WHERE id = 1)
	), up AS (
		INSERT INTO registrations (stream_id, report, received_at, service_id, subject_id, degraded)
		SELECT stream_id, report, clock_timestamp(), service_id, subject_id, degraded FROM input ORDER BY n
		ON CONFLICT (stream_id) DO UPDATE SET report = excluded.report, received_at = excluded.received_at,
			service_id = excluded.service_id, subject_id = excluded.subject_id, degraded = excluded.degraded,
			previous_received_at = registrations.received_at, previous_degraded = registrations.degraded
		RETURNING stream_id, received_at, previous_received_at, degraded,
			previous_received_at IS NULL OR previous_received_at + $5 * interval '1 microsecond' <= received_at AS new_run,
			previous_degraded IS DISTINCT FROM degraded AS changed
	), recorded AS (
		INSERT INTO transitions (stream_id, at, state)
		SELECT stream_id, previous_received_at + $5 * interval '1 microsecond', 'stale' FROM up
			WHERE previous_received_at IS NOT NULL AND new_run
		UNION ALL
		SELECT stream_id, received_at, CASE WHEN degraded THEN 'degraded' ELSE 'alive' END FROM up
			WHERE new_run OR changed
	)
	SELECT stream_id, received_at, new_run OR changed FROM up`

// pruneSQL bounds the history of the streams $1 to its last $2
// microseconds and $3 rows (see live.HistoryMaxAge, live.HistoryMaxRows).
const pruneSQL = `DELETE FROM transitions t USING unnest($1::text[]) AS s(stream_id)
	WHERE t.stream_id = s.stream_id AND (t.at < clock_timestamp() - $2 * interval '1 microsecond' OR t.id <=
		(SELECT id FROM transitions x WHERE x.stream_id = s.stream_id ORDER BY id DESC LIMIT 1 OFFSET $3))`

// Accept stores r as the stream's registration, replacing any earlier one,
// with the database's clock as ReceivedAt, and records the transition it
// makes. Concurrent Accepts share one statement (see acceptSQL); Accept
// returns once that statement is committed, or when ctx ends: a check-in
// whose caller gave up before its batch was written is never written, but
// one whose batch was under way may still be (it is an upsert: the worker
// checks in again anyway). Errors: ENOTFOUND (no such stream), EINVALID
// (see live.CheckRegistration, or an unknown service or subject), ctx's.
func (s *Store) Accept(ctx context.Context, r live.Registration) (live.Registration, error) {
	if err := s.writable(); err != nil {
		return r, err
	}
	if err := live.CheckRegistration(r); err != nil {
		return r, err
	}
	r.Report = append([]byte(nil), r.Report...)
	op := acceptOp{ctx: ctx, r: r, done: make(chan acceptResult, 1)}
	select {
	case s.accepts <- op:
	case <-ctx.Done():
		return r, ctx.Err()
	case <-s.quit:
		return r, errClosed
	}
	var res acceptResult
	select {
	case res = <-op.done:
	case <-ctx.Done():
		return r, fmt.Errorf("accept %s: %w", r.StreamID, ctx.Err())
	case <-s.stopped:
		select {
		case res = <-op.done: // answered before the acceptors stopped
		default: // still queued at Close: never written
			res.err = errClosed
		}
	}
	r.ReceivedAt = res.receivedAt
	return r, res.err
}

// acceptor takes the check-ins waiting now (up to maxBatch, each stream
// once) and writes them in one statement, until Close. Several acceptors
// run, so that one batch's commit overlaps the next batch's gathering.
func (s *Store) acceptor() {
	defer s.acceptors.Done()
	var batch, next []acceptOp
	for {
		if len(next) == 0 {
			select {
			case op := <-s.accepts:
				next = append(next, op)
			case <-s.quit:
				return
			}
		}
		batch, next = gather(append(batch[:0], next...), s.accepts), next[:0]
		batch, next = splitRepeats(waiting(batch), next)
		if len(batch) > 0 {
			s.acceptBatch(batch)
		}
	}
}

// gather adds the ops waiting on ch to batch, up to maxBatch.
func gather(batch []acceptOp, ch <-chan acceptOp) []acceptOp {
	for len(batch) < maxBatch {
		select {
		case op := <-ch:
			batch = append(batch, op)
		default:
			return batch
		}
	}
	return batch
}

// waiting keeps the ops of batch whose callers still wait, and answers the
// others (they are never written).
func waiting(batch []acceptOp) []acceptOp {
	kept := batch[:0]
	for _, op := range batch {
		if err := op.ctx.Err(); err != nil {
			op.done <- acceptResult{err: fmt.Errorf("accept %s: %w", op.r.StreamID, err)}
			continue
		}
		kept = append(kept, op)
	}
	return kept
}

// splitRepeats keeps in batch the first op of each stream and moves the
// others, in order, to next (one statement may not upsert a row twice). It
// sorts the kept ops by stream, so that batches written at once lock their
// rows in the same order and wait for each other instead of deadlocking.
func splitRepeats(batch, next []acceptOp) ([]acceptOp, []acceptOp) {
	seen := make(map[string]bool, len(batch))
	kept := batch[:0]
	for _, op := range batch {
		if seen[op.r.StreamID] {
			next = append(next, op)
			continue
		}
		seen[op.r.StreamID] = true
		kept = append(kept, op)
	}
	slices.SortFunc(kept, func(a, b acceptOp) int { return strings.Compare(a.r.StreamID, b.r.StreamID) })
	return kept, next
}

// acceptBatch writes batch and answers each op. When the statement fails
// (one row's foreign key, say), each op is written alone, so that each gets
// its own answer.
func (s *Store) acceptBatch(batch []acceptOp) {
	times, err := s.upsert(batch)
	if err != nil && len(batch) > 1 {
		for _, op := range batch {
			s.acceptBatch([]acceptOp{op})
		}
		return
	}
	for _, op := range batch {
		at, written := times[op.r.StreamID]
		switch {
		case err != nil:
			op.done <- acceptResult{err: workerError("accept", "registrations_stream_id_fkey", op.r.StreamID, op.r.ServiceID, op.r.SubjectID, err)}
		case !written: // only its epoch keeps a check-in out
			op.done <- acceptResult{err: fmt.Errorf("accept %s: %w", op.r.StreamID, live.ErrAuthChanged)}
		default:
			op.done <- acceptResult{receivedAt: at}
		}
	}
}

// upsert runs acceptSQL for batch and returns each stream's receive time;
// it prunes the history of the streams that recorded transitions (a failure
// to prune is left for the next time: the registrations are committed).
func (s *Store) upsert(batch []acceptOp) (map[string]time.Time, error) {
	ctx, cancel := batchContext(batch)
	defer cancel()
	n := len(batch)
	streams, reports, services, subjects := make([]string, n), make([][]byte, n), make([]string, n), make([]string, n)
	epochs, degraded := make([]int64, n), make([]bool, n)
	for i, op := range batch {
		streams[i], reports[i], services[i], subjects[i], epochs[i], degraded[i] = op.r.StreamID, op.r.Report, op.r.ServiceID, op.r.SubjectID, op.r.AuthEpoch, op.r.Degraded
	}
	rows, err := s.pool.Query(ctx, acceptSQL, streams, reports, services, subjects, s.window.Microseconds(), epochs, degraded)
	if err != nil {
		return nil, err
	}
	times := make(map[string]time.Time, n)
	var grown []string
	for rows.Next() {
		var stream string
		var at time.Time
		var recorded bool
		if err := rows.Scan(&stream, &at, &recorded); err != nil {
			rows.Close()
			return nil, err
		}
		times[stream] = utc(at)
		if recorded {
			grown = append(grown, stream)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(grown) > 0 {
		_ = s.prune(ctx, grown)
	}
	return times, nil
}

// batchContext bounds a batch's statement: until the last of its callers'
// deadlines, or batchTimeout when one has none.
func batchContext(batch []acceptOp) (context.Context, context.CancelFunc) {
	var last time.Time
	for _, op := range batch {
		d, ok := op.ctx.Deadline()
		if !ok {
			return context.WithTimeout(context.Background(), batchTimeout)
		}
		if d.After(last) {
			last = d
		}
	}
	return context.WithDeadline(context.Background(), last)
}

// prune bounds the history of streams.
func (s *Store) prune(ctx context.Context, streams []string) error {
	_, err := s.pool.Exec(ctx, pruneSQL, streams, s.historyAge.Microseconds(), s.historyRows)
	if err != nil {
		return fmt.Errorf("prune history: %w", err)
	}
	return nil
}
