package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"slices"

	"openvibe.network/agentsandbox/live"
)

// DeletePerson removes the person, their credentials and streams (with
// those streams' records and history), and clears the registrations and
// refusals naming them on other streams. Errors: ENOTFOUND.
func (s *Store) DeletePerson(ctx context.Context, id string) (live.Deletion, error) {
	var d live.Deletion
	err := s.write(ctx, func(ctx context.Context, q execer) error {
		d = newDeletion("person", id)
		if err := mustExist(ctx, q, "persons", "person", id); err != nil {
			return err
		}
		streams, err := queryIDs(ctx, q, "SELECT id FROM streams WHERE owner_id = ? ORDER BY id", id)
		if err != nil {
			return fmt.Errorf("delete person %s: %w", id, err)
		}
		for _, st := range streams {
			if err := dropStream(ctx, q, st); err != nil {
				return err
			}
		}
		d.Streams = streams
		if d.Registrations, err = s.clearBy(ctx, q, "subject_id", id); err != nil {
			return err
		}
		if d.Credentials, err = queryIDs(ctx, q, "DELETE FROM credentials WHERE person_id = ? RETURNING id", id); err != nil {
			return fmt.Errorf("delete person %s: %w", id, err)
		}
		_, err = q.ExecContext(ctx, "DELETE FROM persons WHERE id = ?", id)
		return deleteError("person", id, err)
	})
	return sortDeletion(d), err
}

// DeleteStream removes the stream with its registration, refusal and
// history. Errors: ENOTFOUND.
func (s *Store) DeleteStream(ctx context.Context, id string) (live.Deletion, error) {
	var d live.Deletion
	err := s.write(ctx, func(ctx context.Context, q execer) error {
		d = newDeletion("stream", id)
		if err := mustExist(ctx, q, "streams", "stream", id); err != nil {
			return err
		}
		return dropStream(ctx, q, id)
	})
	return d, err
}

// DeleteService removes the service and its tokens, and clears the
// registrations and refusals it made. Errors: ENOTFOUND.
func (s *Store) DeleteService(ctx context.Context, id string) (live.Deletion, error) {
	var d live.Deletion
	err := s.write(ctx, func(ctx context.Context, q execer) error {
		d = newDeletion("service", id)
		if err := mustExist(ctx, q, "services", "service", id); err != nil {
			return err
		}
		var err error
		if d.Registrations, err = s.clearBy(ctx, q, "service_id", id); err != nil {
			return err
		}
		if d.Credentials, err = queryIDs(ctx, q, "DELETE FROM credentials WHERE service_id = ? RETURNING id", id); err != nil {
			return fmt.Errorf("delete service %s: %w", id, err)
		}
		_, err = q.ExecContext(ctx, "DELETE FROM services WHERE id = ?", id)
		return deleteError("service", id, err)
	})
	return sortDeletion(d), err
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
func mustExist(ctx context.Context, q execer, table, what, id string) error {
	var one int
	err := q.QueryRowContext(ctx, "SELECT 1 FROM "+table+" WHERE id = ?", id).Scan(&one)
	return getError(what, id, err)
}

// dropStream deletes a stream and everything recorded for it.
func dropStream(ctx context.Context, q execer, id string) error {
	for _, table := range []string{"transitions", "registrations", "refusals"} {
		if _, err := q.ExecContext(ctx, "DELETE FROM "+table+" WHERE stream_id = ?", id); err != nil {
			return fmt.Errorf("delete stream %s: %s: %w", id, table, err)
		}
	}
	_, err := q.ExecContext(ctx, "DELETE FROM streams WHERE id = ?", id)
	return deleteError("stream", id, err)
}

// clearBy deletes the registrations and refusals whose column (service_id
// or subject_id) is id, records the streams' transitions to absent and
// returns those streams.
func (s *Store) clearBy(ctx context.Context, q execer, column, id string) ([]string, error) {
	now := fromNanos(nanos(s.now()))
	refused, err := queryIDs(ctx, q, "DELETE FROM refusals WHERE "+column+" = ? RETURNING stream_id", id)
	if err != nil {
		return nil, fmt.Errorf("clear refusals by %s: %w", id, err)
	}
	cleared, err := queryIDs(ctx, q, "SELECT stream_id FROM registrations WHERE "+column+" = ?", id)
	if err != nil {
		return nil, fmt.Errorf("clear registrations by %s: %w", id, err)
	}
	for _, st := range cleared {
		if err := s.clear(ctx, q, st, now, live.StateAbsent); err != nil {
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
		switch err := q.QueryRowContext(ctx, "SELECT 1 FROM registrations WHERE stream_id = ?", st).Scan(&one); err {
		case nil:
		case sql.ErrNoRows:
			if err := s.clear(ctx, q, st, now, live.StateAbsent); err != nil {
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
