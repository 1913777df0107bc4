package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"openvibe.network/agentsandbox/live"
)

// CreateCredential stores c (its hash, never a secret) with a fresh id when
// it has none; ExpiresAt is kept to the microsecond. Errors: EINVALID (see
// live.PrepareCredential, or a holder that does not exist), ECONFLICT (id or
// hash taken).
func (s *Store) CreateCredential(ctx context.Context, c live.Credential) (live.Credential, error) {
	if err := s.writable(); err != nil {
		return c, err
	}
	c, err := live.PrepareCredential(c)
	if err != nil {
		return c, err
	}
	if c.ExpiresAt != nil {
		e := c.ExpiresAt.UTC().Truncate(time.Microsecond)
		c.ExpiresAt = &e
	}
	c.RevokedAt, c.LastUsedAt = nil, nil
	err = s.pool.QueryRow(ctx, `INSERT INTO credentials (id, kind, service_id, person_id, hash, created_at, expires_at)
		VALUES ($1, $2, $3, $4, $5, clock_timestamp(), $6) RETURNING created_at`,
		c.ID, string(c.Kind), nullString(c.ServiceID), nullString(c.PersonID), c.Hash[:], c.ExpiresAt).Scan(&c.CreatedAt)
	c.CreatedAt = utc(c.CreatedAt)
	return c, createError("credential", c.ID, err, holderMissing(c))
}

const credentialColumns = "id, kind, service_id, person_id, hash, created_at, expires_at, revoked_at, last_used_at"

// CredentialByHash returns the credential whose secret hashes to hash,
// revoked and expired ones included. Errors: ENOTFOUND.
func (s *Store) CredentialByHash(ctx context.Context, hash [32]byte) (live.Credential, error) {
	c, err := scanCredential(s.pool.QueryRow(ctx, "SELECT "+credentialColumns+" FROM credentials WHERE hash = $1", hash[:]))
	if errors.Is(err, pgx.ErrNoRows) {
		return c, live.Errorf(live.ENOTFOUND, "no credential has that secret")
	}
	if err != nil {
		return c, fmt.Errorf("credential by hash: %w", err)
	}
	return c, nil
}

// RevokeCredential marks credential id revoked at the database's time;
// revoking it again keeps the first time. Errors: ENOTFOUND.
func (s *Store) RevokeCredential(ctx context.Context, id string) error {
	if err := s.writable(); err != nil {
		return err
	}
	tag, err := s.pool.Exec(ctx, "UPDATE credentials SET revoked_at = coalesce(revoked_at, clock_timestamp()) WHERE id = $1", id)
	if err != nil {
		return fmt.Errorf("revoke credential %s: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return live.Errorf(live.ENOTFOUND, "credential %q not found", id)
	}
	return nil
}

// RevokeSessions revokes every unrevoked session of person at the
// database's time and returns their ids. Errors: ENOTFOUND (no such person).
func (s *Store) RevokeSessions(ctx context.Context, person string) ([]string, error) {
	if err := s.writable(); err != nil {
		return nil, err
	}
	if _, err := s.Person(ctx, person); err != nil {
		return nil, err
	}
	ids, err := queryIDs(ctx, s.pool, `UPDATE credentials SET revoked_at = clock_timestamp()
		WHERE person_id = $1 AND kind = 'session' AND revoked_at IS NULL RETURNING id`, person)
	if err != nil {
		return nil, fmt.Errorf("revoke sessions of %s: %w", person, err)
	}
	return ids, nil
}

// ConsumeLoginTicket revokes the usable login ticket with hash and returns
// it. Errors: ENOTFOUND (no usable login ticket has that hash).
func (s *Store) ConsumeLoginTicket(ctx context.Context, hash [32]byte) (live.Credential, error) {
	if err := s.writable(); err != nil {
		return live.Credential{}, err
	}
	c, err := scanCredential(s.pool.QueryRow(ctx, `UPDATE credentials SET revoked_at = clock_timestamp(), last_used_at = clock_timestamp()
		WHERE hash = $1 AND kind = 'login_ticket' AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > clock_timestamp())
		RETURNING `+credentialColumns, hash[:]))
	if errors.Is(err, pgx.ErrNoRows) {
		return c, live.Errorf(live.ENOTFOUND, "no usable login ticket has that secret: it is unknown, used or expired")
	}
	if err != nil {
		return c, fmt.Errorf("consume login ticket: %w", err)
	}
	return c, nil
}

// TouchCredential records the database's time, to the minute, as
// credential id's last use. Errors: ENOTFOUND.
func (s *Store) TouchCredential(ctx context.Context, id string) error {
	if err := s.writable(); err != nil {
		return err
	}
	tag, err := s.pool.Exec(ctx, "UPDATE credentials SET last_used_at = date_trunc('minute', clock_timestamp()) WHERE id = $1", id)
	if err != nil {
		return fmt.Errorf("touch credential %s: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return live.Errorf(live.ENOTFOUND, "credential %q not found", id)
	}
	return nil
}

// ListCredentials lists credentials of kind ("" for all), oldest first,
// without their hashes, with their holders' names.
func (s *Store) ListCredentials(ctx context.Context, kind live.CredentialKind) ([]live.Credential, error) {
	return list(ctx, s, "credentials", `SELECT c.id, c.kind, c.service_id, c.person_id, c.created_at, c.expires_at, c.revoked_at,
			c.last_used_at, coalesce(p.name, v.name, '')
		FROM credentials c LEFT JOIN persons p ON p.id = c.person_id LEFT JOIN services v ON v.id = c.service_id
		WHERE $1 = '' OR c.kind = $1 ORDER BY c.created_at, c.id`, scanListedCredential, string(kind))
}

func scanListedCredential(r pgx.Row) (live.Credential, error) {
	var c live.Credential
	var kind string
	var svc, per *string
	if err := r.Scan(&c.ID, &kind, &svc, &per, &c.CreatedAt, &c.ExpiresAt, &c.RevokedAt, &c.LastUsedAt, &c.HolderName); err != nil {
		return c, err
	}
	c.Kind = live.CredentialKind(kind)
	c.ServiceID, c.PersonID = deref(svc), deref(per)
	c.CreatedAt = utc(c.CreatedAt)
	c.ExpiresAt, c.RevokedAt, c.LastUsedAt = utcPtr(c.ExpiresAt), utcPtr(c.RevokedAt), utcPtr(c.LastUsedAt)
	return c, nil
}

func scanCredential(r pgx.Row) (live.Credential, error) {
	var c live.Credential
	var kind string
	var svc, per *string
	var hash []byte
	if err := r.Scan(&c.ID, &kind, &svc, &per, &hash, &c.CreatedAt, &c.ExpiresAt, &c.RevokedAt, &c.LastUsedAt); err != nil {
		return c, err
	}
	c.Kind = live.CredentialKind(kind)
	c.ServiceID, c.PersonID = deref(svc), deref(per)
	copy(c.Hash[:], hash)
	c.CreatedAt = utc(c.CreatedAt)
	c.ExpiresAt, c.RevokedAt, c.LastUsedAt = utcPtr(c.ExpiresAt), utcPtr(c.RevokedAt), utcPtr(c.LastUsedAt)
	return c, nil
}

// querier runs a query: the pool or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// queryIDs runs a statement that returns one id per row.
func queryIDs(ctx context.Context, q querier, query string, args ...any) ([]string, error) {
	rows, err := q.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if ids == nil {
		ids = []string{}
	}
	return ids, err
}

func nullString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// holderMissing says which holder of c does not exist.
func holderMissing(c live.Credential) string {
	if c.Kind == live.KindServiceToken {
		return fmt.Sprintf("service %q does not exist", c.ServiceID)
	}
	return fmt.Sprintf("person %q does not exist", c.PersonID)
}
