package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"openvibe.network/agentsandbox/live"
)

// DeletePerson removes the person, their credentials and streams (with
// those streams' records and history), and clears the registrations and
// refusals naming them on other streams, in one transaction. Errors:
// ENOTFOUND.
func (s *Store) DeletePerson(ctx context.Context, id string) (live.Deletion, error) {
	d := newDeletion("person", id)
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if err := mustExist(ctx, tx, "persons", "person", id); err != nil {
			return err
		}
		var err error
		if d.Streams, err = queryIDs(ctx, tx, "SELECT id FROM streams WHERE owner_id = $1 ORDER BY id", id); err != nil {
			return fmt.Errorf("delete person %s: %w", id, err)
		}
		for _, st := range d.Streams {
			if err := dropStream(ctx, tx, st); err != nil {
				return err
			}
		}
		if d.Registrations, err = s.clearBy(ctx, tx, "subject_id", id); err != nil {
			return err
		}
		if d.Credentials, err = queryIDs(ctx, tx, "DELETE FROM credentials WHERE person_id = $1 RETURNING id", id); err != nil {
			return fmt.Errorf("delete person %s: %w", id, err)
		}
		_, err = tx.Exec(ctx, "DELETE FROM persons WHERE id = $1", id)
		return deleteError("person", id, err)
	})
	return sortDeletion(d), err
}

// DeleteStream removes the stream with its registration, refusal and
// history. Errors: ENOTFOUND.
func (s *Store) DeleteStream(ctx context.Context, id string) (live.Deletion, error) {
	d := newDeletion("stream", id)
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if err := mustExist(ctx, tx, "streams", "stream", id); err != nil {
			return err
		}
		return dropStream(ctx, tx, id)
	})
	return d, err
}

// DeleteService removes the service and its tokens, and clears the
// registrations and refusals it made, in one transaction. Errors: ENOTFOUND.
func (s *Store) DeleteService(ctx context.Context, id string) (live.Deletion, error) {
	d := newDeletion("service", id)
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if err := mustExist(ctx, tx, "services", "service", id); err != nil {
			return err
		}
		var err error
		if d.Registrations, err = s.clearBy(ctx, tx, "service_id", id); err != nil {
			return err
		}
		if d.Credentials, err = queryIDs(ctx, tx, "DELETE FROM credentials WHERE service_id = $1 RETURNING id", id); err != nil {
			return fmt.Errorf("delete service %s: %w", id, err)
		}
		_, err = tx.Exec(ctx, "DELETE FROM services WHERE id = $1", id)
		return deleteError("service", id, err)
	})
	return sortDeletion(d), err
}

// inTx runs fn in a transaction on a writable store; its error is
// classified by storageError, as the pool's are (see db).
func (s *Store) inTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	if err := s.writable(); err != nil {
		return err
	}
	return storageError(pgx.BeginFunc(ctx, s.pool, fn))
}

func newDeletion(kind, id string) live.Deletion {
	return live.Deletion{Kind: kind, ID: id, Credentials: []string{}, Streams: []string{}, Registrations: []string{}}
}

// sortDeletion orders the lists, so that they read the same on every store.
func sortDeletion(d live.Deletion) live.Deletion {
	for _, l := range [][]string{d.Credentials, d.Streams, d.Registrations} {
		slices.Sort(l)
	}
	return d
}

// mustExist returns ENOTFOUND unless table holds a row with id.
func mustExist(ctx context.Context, tx pgx.Tx, table, what, id string) error {
	var one int
	err := tx.QueryRow(ctx, "SELECT 1 FROM "+table+" WHERE id = $1", id).Scan(&one)
	return getError(what, id, err)
}

// dropStream deletes a stream and everything recorded for it.
func dropStream(ctx context.Context, tx pgx.Tx, id string) error {
	for _, table := range []string{"transitions", "registrations", "refusals"} {
		if _, err := tx.Exec(ctx, "DELETE FROM "+table+" WHERE stream_id = $1", id); err != nil {
			return fmt.Errorf("delete stream %s: %s: %w", id, table, err)
		}
	}
	_, err := tx.Exec(ctx, "DELETE FROM streams WHERE id = $1", id)
	return deleteError("stream", id, err)
}

// clearBy deletes the registrations and refusals whose column (service_id
// or subject_id) is id, records the streams' transitions to absent and
// returns those streams.
func (s *Store) clearBy(ctx context.Context, tx pgx.Tx, column, id string) ([]string, error) {
	var at time.Time
	if err := tx.QueryRow(ctx, "SELECT clock_timestamp()").Scan(&at); err != nil {
		return nil, fmt.Errorf("clear by %s: %w", id, err)
	}
	at = utc(at)
	refused, err := queryIDs(ctx, tx, "DELETE FROM refusals WHERE "+column+" = $1 RETURNING stream_id", id)
	if err != nil {
		return nil, fmt.Errorf("clear refusals by %s: %w", id, err)
	}
	cleared, err := queryIDs(ctx, tx, "SELECT stream_id FROM registrations WHERE "+column+" = $1", id)
	if err != nil {
		return nil, fmt.Errorf("clear registrations by %s: %w", id, err)
	}
	for _, st := range cleared {
		if _, err := s.clear(ctx, tx, st, at, live.StateAbsent); err != nil {
			return nil, err
		}
	}
	for _, st := range refused {
		if slices.Contains(cleared, st) {
			continue
		}
		// The refusal is gone; the stream is absent unless it has a
		// registration (newer than the refusal), which stays.
		var one int
		switch err := tx.QueryRow(ctx, "SELECT 1 FROM registrations WHERE stream_id = $1", st).Scan(&one); {
		case err == nil:
		case errors.Is(err, pgx.ErrNoRows):
			if _, err := s.clear(ctx, tx, st, at, live.StateAbsent); err != nil {
				return nil, err
			}
		default:
			return nil, fmt.Errorf("clear refusals by %s: %w", id, err)
		}
	}
	all := append(cleared, refused...)
	slices.Sort(all)
	return slices.Compact(all), nil
}

// deleteError wraps the error of a delete.
func deleteError(what, id string, err error) error {
	if err != nil {
		return fmt.Errorf("delete %s %s: %w", what, id, err)
	}
	return nil
}
