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
	c, err := live.PrepareCredential(c)
	if err != nil {
		return c, err
	}
	if c.ExpiresAt != nil {
		e := c.ExpiresAt.UTC().Truncate(time.Microsecond)
		c.ExpiresAt = &e
	}
	c.RevokedAt = nil
	err = s.pool.QueryRow(ctx, `INSERT INTO credentials (id, kind, service_id, person_id, hash, created_at, expires_at)
		VALUES ($1, $2, $3, $4, $5, clock_timestamp(), $6) RETURNING created_at`,
		c.ID, string(c.Kind), nullString(c.ServiceID), nullString(c.PersonID), c.Hash[:], c.ExpiresAt).Scan(&c.CreatedAt)
	c.CreatedAt = utc(c.CreatedAt)
	return c, createError("credential", c.ID, err, holderMissing(c))
}

const credentialColumns = "id, kind, service_id, person_id, hash, created_at, expires_at, revoked_at"

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
	tag, err := s.pool.Exec(ctx, "UPDATE credentials SET revoked_at = coalesce(revoked_at, clock_timestamp()) WHERE id = $1", id)
	if err != nil {
		return fmt.Errorf("revoke credential %s: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return live.Errorf(live.ENOTFOUND, "credential %q not found", id)
	}
	return nil
}

// ListCredentials lists credentials of kind ("" for all), oldest first,
// without their hashes.
func (s *Store) ListCredentials(ctx context.Context, kind live.CredentialKind) ([]live.Credential, error) {
	cs, err := list(ctx, s, "credentials", "SELECT "+credentialColumns+" FROM credentials WHERE $1 = '' OR kind = $1 ORDER BY created_at, id",
		scanCredential, string(kind))
	for i := range cs {
		cs[i].Hash = [32]byte{}
	}
	return cs, err
}

func scanCredential(r pgx.Row) (live.Credential, error) {
	var c live.Credential
	var kind string
	var svc, per *string
	var hash []byte
	if err := r.Scan(&c.ID, &kind, &svc, &per, &hash, &c.CreatedAt, &c.ExpiresAt, &c.RevokedAt); err != nil {
		return c, err
	}
	c.Kind = live.CredentialKind(kind)
	c.ServiceID, c.PersonID = deref(svc), deref(per)
	copy(c.Hash[:], hash)
	c.CreatedAt = utc(c.CreatedAt)
	c.ExpiresAt, c.RevokedAt = utcPtr(c.ExpiresAt), utcPtr(c.RevokedAt)
	return c, nil
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
