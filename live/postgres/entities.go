package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"openvibe.network/agentsandbox/live"
)

// CreatePerson stores p with a fresh id when it has none and the database's
// time as CreatedAt. Errors: EINVALID (bad id or empty name), ECONFLICT.
func (s *Store) CreatePerson(ctx context.Context, p live.Person) (live.Person, error) {
	if err := s.writable(); err != nil {
		return p, err
	}
	p, err := live.PreparePerson(p)
	if err != nil {
		return p, err
	}
	err = s.pool.QueryRow(ctx, "INSERT INTO persons (id, name, created_at) VALUES ($1, $2, clock_timestamp()) RETURNING created_at",
		p.ID, p.Name).Scan(&p.CreatedAt)
	p.CreatedAt = utc(p.CreatedAt)
	return p, createError("person", p.ID, err, "")
}

// Person returns the person with id. Errors: ENOTFOUND.
func (s *Store) Person(ctx context.Context, id string) (live.Person, error) {
	p, err := scanPerson(s.pool.QueryRow(ctx, "SELECT id, name, created_at FROM persons WHERE id = $1", id))
	return p, getError("person", id, err)
}

// ListPersons returns every person, oldest first.
func (s *Store) ListPersons(ctx context.Context) ([]live.Person, error) {
	return list(ctx, s, "persons", "SELECT id, name, created_at FROM persons ORDER BY created_at, id", scanPerson)
}

func scanPerson(r pgx.Row) (live.Person, error) {
	var p live.Person
	err := r.Scan(&p.ID, &p.Name, &p.CreatedAt)
	p.CreatedAt = utc(p.CreatedAt)
	return p, err
}

// CreateStream stores st with a fresh id when it has none. Errors: EINVALID
// (bad id, no owner, or an owner who is not a known person), ECONFLICT.
func (s *Store) CreateStream(ctx context.Context, st live.Stream) (live.Stream, error) {
	if err := s.writable(); err != nil {
		return st, err
	}
	st, err := live.PrepareStream(st)
	if err != nil {
		return st, err
	}
	err = s.pool.QueryRow(ctx, "INSERT INTO streams (id, owner_id, created_at) VALUES ($1, $2, clock_timestamp()) RETURNING created_at",
		st.ID, st.OwnerID).Scan(&st.CreatedAt)
	st.CreatedAt = utc(st.CreatedAt)
	return st, createError("stream", st.ID, err, fmt.Sprintf("owner %q is not a known person", st.OwnerID))
}

// Stream returns the stream with id. Errors: ENOTFOUND.
func (s *Store) Stream(ctx context.Context, id string) (live.Stream, error) {
	st, err := scanStream(s.pool.QueryRow(ctx, "SELECT id, owner_id, created_at FROM streams WHERE id = $1", id))
	return st, getError("stream", id, err)
}

// ListStreams returns every stream, oldest first.
func (s *Store) ListStreams(ctx context.Context) ([]live.Stream, error) {
	return list(ctx, s, "streams", "SELECT id, owner_id, created_at FROM streams ORDER BY created_at, id", scanStream)
}

// ListStreamsOwnedBy returns the streams of owner, oldest first.
func (s *Store) ListStreamsOwnedBy(ctx context.Context, owner string) ([]live.Stream, error) {
	return list(ctx, s, "streams", "SELECT id, owner_id, created_at FROM streams WHERE owner_id = $1 ORDER BY created_at, id", scanStream, owner)
}

func scanStream(r pgx.Row) (live.Stream, error) {
	var st live.Stream
	err := r.Scan(&st.ID, &st.OwnerID, &st.CreatedAt)
	st.CreatedAt = utc(st.CreatedAt)
	return st, err
}

// CreateService stores sv with a fresh id when it has none. Errors:
// EINVALID (bad id, empty name or capability), ECONFLICT.
func (s *Store) CreateService(ctx context.Context, sv live.Service) (live.Service, error) {
	if err := s.writable(); err != nil {
		return sv, err
	}
	sv, err := live.PrepareService(sv)
	if err != nil {
		return sv, err
	}
	err = s.pool.QueryRow(ctx, `INSERT INTO services (id, name, first_party, capabilities, created_at)
		VALUES ($1, $2, $3, $4, clock_timestamp()) RETURNING created_at`,
		sv.ID, sv.Name, sv.FirstParty, sv.Capabilities).Scan(&sv.CreatedAt)
	sv.CreatedAt = utc(sv.CreatedAt)
	return sv, createError("service", sv.ID, err, "")
}

// Service returns the service with id. Errors: ENOTFOUND.
func (s *Store) Service(ctx context.Context, id string) (live.Service, error) {
	sv, err := scanService(s.pool.QueryRow(ctx, "SELECT id, name, first_party, capabilities, created_at FROM services WHERE id = $1", id))
	return sv, getError("service", id, err)
}

// ListServices returns every service, oldest first.
func (s *Store) ListServices(ctx context.Context) ([]live.Service, error) {
	return list(ctx, s, "services", "SELECT id, name, first_party, capabilities, created_at FROM services ORDER BY created_at, id", scanService)
}

// SetCapability grants (held) or withdraws capability c of service id, in
// one statement. Errors: ENOTFOUND (no such service), EINVALID (an empty
// capability).
func (s *Store) SetCapability(ctx context.Context, id, c string, held bool) (live.Service, error) {
	if err := s.writable(); err != nil {
		return live.Service{}, err
	}
	if c == "" {
		return live.Service{}, live.Errorf(live.EINVALID, "the capability is empty: name one, e.g. %s", live.CapabilityRegister)
	}
	sv, err := scanService(s.pool.QueryRow(ctx, `UPDATE services SET capabilities =
			CASE WHEN NOT $3 THEN array_remove(capabilities, $2)
				WHEN $2 = ANY (capabilities) THEN capabilities ELSE array_append(capabilities, $2) END
		WHERE id = $1 RETURNING id, name, first_party, capabilities, created_at`, id, c, held))
	return sv, getError("service", id, err)
}

func scanService(r pgx.Row) (live.Service, error) {
	var sv live.Service
	err := r.Scan(&sv.ID, &sv.Name, &sv.FirstParty, &sv.Capabilities, &sv.CreatedAt)
	sv.CreatedAt = utc(sv.CreatedAt)
	if sv.Capabilities == nil {
		sv.Capabilities = []string{}
	}
	return sv, err
}

// list runs query and scans every row with scan.
func list[T any](ctx context.Context, s *Store, what, query string, scan func(pgx.Row) (T, error), args ...any) ([]T, error) {
	rows, err := s.pool.Query(ctx, query, args...)
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
	case errors.Is(err, pgx.ErrNoRows):
		return live.Errorf(live.ENOTFOUND, "%s %q not found", what, id)
	default:
		return fmt.Errorf("get %s %s: %w", what, id, err)
	}
}

// SQLSTATEs the store maps to live error codes.
const (
	foreignKeyViolation = "23503"
	uniqueViolation     = "23505"
)

// pgError returns err's PostgreSQL error, or nil.
func pgError(err error) *pgconn.PgError {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe
	}
	return nil
}

// createError maps an insert's error: a taken primary key is ECONFLICT, a
// taken hash ECONFLICT, a foreign key that points nowhere EINVALID with
// fkMessage; anything else is wrapped.
func createError(what, id string, err error, fkMessage string) error {
	if err == nil {
		return nil
	}
	if pe := pgError(err); pe != nil {
		switch {
		case pe.Code == uniqueViolation && pe.ConstraintName == "credentials_hash_key":
			return live.Errorf(live.ECONFLICT, "%s %q: a %s with the same secret already exists", what, id, what)
		case pe.Code == uniqueViolation:
			return live.Errorf(live.ECONFLICT, "%s %q already exists: choose another id", what, id)
		case pe.Code == foreignKeyViolation:
			return live.Errorf(live.EINVALID, "cannot create %s %q: %s", what, id, fkMessage)
		}
	}
	return fmt.Errorf("create %s %s: %w", what, id, err)
}

// storageError makes an error of the database server itself (out of disk,
// memory or connections, shutting down, a read-only standby, out of reach,
// a connection lost) live.StorageUnavailable, saying what the operator must
// fix; any other error is returned as it is.
func storageError(err error) error {
	var ce *pgconn.ConnectError
	var oe *net.OpError
	var why string
	pe := pgError(err)
	switch {
	case live.ErrorCode(err) != live.EINTERNAL: // nil, or classified already
		return err
	case pe != nil && (pe.Code == "22021" || pe.Code == "22P05"):
		// Text PostgreSQL cannot hold (a NUL, invalid UTF-8) names nothing.
		return fmt.Errorf("%w (%w)", live.Errorf(live.EINVALID, "a value is not text the database can hold (it has a NUL byte or invalid UTF-8)"), err)
	case pe != nil && pe.Code == "53100":
		why = "the disk of its database server is full: free space there"
	case pe != nil && pe.Code == "53200":
		why = "its database server is out of memory"
	case pe != nil && pe.Code == "53300":
		why = "its database server has no connection to spare: raise max_connections or lower the connections of Live's instances"
	case pe != nil && strings.HasPrefix(pe.Code, "53"):
		why = "its database server is out of resources (" + pe.Code + ")"
	case pe != nil && (pe.Code == "57P01" || pe.Code == "57P02" || pe.Code == "57P03"):
		why = "its database server is shutting down or starting up"
	case pe != nil && pe.Code == "25006":
		why = "its database server accepts no writes (is it a read-only standby?)"
	case pe != nil && strings.HasPrefix(pe.Code, "08"):
		why = "its connection to the database server failed"
	case pe != nil:
		return err
	case errors.As(err, &ce):
		why = "its database server cannot be reached: check that it runs and that --db names it"
	case errors.As(err, &oe), errors.Is(err, pgconn.ErrConnClosed), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		why = "its connection to the database server failed"
	default:
		return err
	}
	return live.StorageUnavailable(why, err)
}
