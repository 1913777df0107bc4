package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"openvibe.network/agentsandbox/live"
)

// CreatePerson stores p with a fresh id when it has none and the store's
// time as CreatedAt. Errors: EINVALID (bad id or empty name), ECONFLICT (id
// taken).
func (s *Store) CreatePerson(ctx context.Context, p live.Person) (live.Person, error) {
	p, err := live.PreparePerson(p)
	if err != nil {
		return p, err
	}
	err = s.write(ctx, func(ctx context.Context, q execer) error {
		p.CreatedAt = fromNanos(nanos(s.now()))
		_, err := q.ExecContext(ctx, "INSERT INTO persons (id, name, created_at) VALUES (?, ?, ?)", p.ID, p.Name, nanos(p.CreatedAt))
		return err
	})
	if err != nil {
		return p, createError("person", p.ID, err, "")
	}
	return p, nil
}

// Person returns the person with id. Errors: ENOTFOUND.
func (s *Store) Person(ctx context.Context, id string) (live.Person, error) {
	p, err := scanPerson(s.readRow(ctx, "SELECT id, name, created_at FROM persons WHERE id = ?", id))
	return p, getError("person", id, err)
}

// ListPersons returns every person, oldest first.
func (s *Store) ListPersons(ctx context.Context) ([]live.Person, error) {
	return list(ctx, s.rdb, "persons", "SELECT id, name, created_at FROM persons ORDER BY created_at, id", scanPerson)
}

func scanPerson(r scanner) (live.Person, error) {
	var p live.Person
	var created int64
	err := r.Scan(&p.ID, &p.Name, &created)
	p.CreatedAt = fromNanos(created)
	return p, err
}

// CreateStream stores st with a fresh id when it has none. Errors: EINVALID
// (bad id, no owner, or an owner who is not a known person), ECONFLICT.
func (s *Store) CreateStream(ctx context.Context, st live.Stream) (live.Stream, error) {
	st, err := live.PrepareStream(st)
	if err != nil {
		return st, err
	}
	err = s.write(ctx, func(ctx context.Context, q execer) error {
		st.CreatedAt = fromNanos(nanos(s.now()))
		_, err := q.ExecContext(ctx, "INSERT INTO streams (id, owner_id, created_at) VALUES (?, ?, ?)", st.ID, st.OwnerID, nanos(st.CreatedAt))
		return err
	})
	if err != nil {
		return st, createError("stream", st.ID, err, fmt.Sprintf("owner %q is not a known person", st.OwnerID))
	}
	return st, nil
}

// Stream returns the stream with id. Errors: ENOTFOUND.
func (s *Store) Stream(ctx context.Context, id string) (live.Stream, error) {
	st, err := scanStream(s.readRow(ctx, "SELECT id, owner_id, created_at FROM streams WHERE id = ?", id))
	return st, getError("stream", id, err)
}

// ListStreams returns every stream, oldest first.
func (s *Store) ListStreams(ctx context.Context) ([]live.Stream, error) {
	return list(ctx, s.rdb, "streams", "SELECT id, owner_id, created_at FROM streams ORDER BY created_at, id", scanStream)
}

// ListStreamsOwnedBy returns the streams of owner, oldest first.
func (s *Store) ListStreamsOwnedBy(ctx context.Context, owner string) ([]live.Stream, error) {
	return list(ctx, s.rdb, "streams", "SELECT id, owner_id, created_at FROM streams WHERE owner_id = ? ORDER BY created_at, id", scanStream, owner)
}

func scanStream(r scanner) (live.Stream, error) {
	var st live.Stream
	var created int64
	err := r.Scan(&st.ID, &st.OwnerID, &created)
	st.CreatedAt = fromNanos(created)
	return st, err
}

// CreateService stores sv with a fresh id when it has none. Errors:
// EINVALID (bad id, empty name or capability), ECONFLICT.
func (s *Store) CreateService(ctx context.Context, sv live.Service) (live.Service, error) {
	sv, err := live.PrepareService(sv)
	if err != nil {
		return sv, err
	}
	caps, err := json.Marshal(sv.Capabilities)
	if err != nil {
		return sv, fmt.Errorf("create service: %w", err)
	}
	err = s.write(ctx, func(ctx context.Context, q execer) error {
		sv.CreatedAt = fromNanos(nanos(s.now()))
		_, err := q.ExecContext(ctx, "INSERT INTO services (id, name, first_party, capabilities, created_at) VALUES (?, ?, ?, ?, ?)",
			sv.ID, sv.Name, sv.FirstParty, string(caps), nanos(sv.CreatedAt))
		return err
	})
	if err != nil {
		return sv, createError("service", sv.ID, err, "")
	}
	return sv, nil
}

// Service returns the service with id. Errors: ENOTFOUND.
func (s *Store) Service(ctx context.Context, id string) (live.Service, error) {
	sv, err := scanService(s.readRow(ctx, "SELECT id, name, first_party, capabilities, created_at FROM services WHERE id = ?", id))
	return sv, getError("service", id, err)
}

// ListServices returns every service, oldest first.
func (s *Store) ListServices(ctx context.Context) ([]live.Service, error) {
	return list(ctx, s.rdb, "services", "SELECT id, name, first_party, capabilities, created_at FROM services ORDER BY created_at, id", scanService)
}

// SetCapability grants (held) or withdraws capability c of service id.
// Errors: ENOTFOUND (no such service), EINVALID (an empty capability).
func (s *Store) SetCapability(ctx context.Context, id, c string, held bool) (live.Service, error) {
	var sv live.Service
	if c == "" {
		return sv, live.Errorf(live.EINVALID, "the capability is empty: name one, e.g. %s", live.CapabilityRegister)
	}
	err := s.write(ctx, func(ctx context.Context, q execer) error {
		var err error
		sv, err = scanService(q.QueryRowContext(ctx, "SELECT id, name, first_party, capabilities, created_at FROM services WHERE id = ?", id))
		if err != nil {
			return getError("service", id, err)
		}
		sv.Capabilities = withCapability(sv.Capabilities, c, held)
		caps, err := json.Marshal(sv.Capabilities)
		if err != nil {
			return fmt.Errorf("set capability: %w", err)
		}
		if _, err := q.ExecContext(ctx, "UPDATE services SET capabilities = ? WHERE id = ?", string(caps), id); err != nil {
			return fmt.Errorf("set capability of %s: %w", id, err)
		}
		return nil
	})
	return sv, err
}

// withCapability returns caps with c held (appended unless held already)
// or not, keeping the order of the others.
func withCapability(caps []string, c string, held bool) []string {
	if held && slices.Contains(caps, c) {
		return caps
	}
	out := slices.DeleteFunc(slices.Clone(caps), func(x string) bool { return x == c })
	if held {
		out = append(out, c)
	}
	if out == nil {
		out = []string{}
	}
	return out
}

func scanService(r scanner) (live.Service, error) {
	var sv live.Service
	var caps string
	var created int64
	if err := r.Scan(&sv.ID, &sv.Name, &sv.FirstParty, &caps, &created); err != nil {
		return sv, err
	}
	sv.CreatedAt = fromNanos(created)
	if err := json.Unmarshal([]byte(caps), &sv.Capabilities); err != nil {
		return sv, fmt.Errorf("service %s capabilities: %w", sv.ID, err)
	}
	return sv, nil
}

// scanner is a row or rows.
type scanner interface{ Scan(dest ...any) error }

// list runs query on db and scans every row with scan.
func list[T any](ctx context.Context, db *sql.DB, what, query string, scan func(scanner) (T, error), args ...any) ([]T, error) {
	rows, err := db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", what, err)
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", what, err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list %s: %w", what, err)
	}
	return out, nil
}

// getError maps a single-row read's error: no row is ENOTFOUND.
func getError(what, id string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, sql.ErrNoRows):
		return live.Errorf(live.ENOTFOUND, "%s %q not found", what, id)
	default:
		return fmt.Errorf("get %s %s: %w", what, id, err)
	}
}
