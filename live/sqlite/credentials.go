package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"openvibe.network/agentsandbox/live"
)

// CreateCredential stores c (its hash, never a secret) with a fresh id when
// it has none. Errors: EINVALID (see live.PrepareCredential, or a holder that
// does not exist), ECONFLICT (id or hash taken).
func (s *Store) CreateCredential(ctx context.Context, c live.Credential) (live.Credential, error) {
	c, err := live.PrepareCredential(c)
	if err != nil {
		return c, err
	}
	if c.ExpiresAt != nil {
		e := fromNanos(nanos(*c.ExpiresAt))
		c.ExpiresAt = &e
	}
	c.RevokedAt = nil
	err = s.writeOne(ctx, func(ctx context.Context, q execer) error {
		c.CreatedAt = fromNanos(nanos(s.now()))
		_, err := q.ExecContext(ctx, `INSERT INTO credentials (id, kind, service_id, person_id, hash, created_at, expires_at)
			VALUES (?, ?, ?, ?, ?, ?, ?)`,
			c.ID, string(c.Kind), nullString(c.ServiceID), nullString(c.PersonID), c.Hash[:], nanos(c.CreatedAt), nullNanos(c.ExpiresAt))
		return err
	})
	if err != nil {
		return c, createError("credential", c.ID, err, holderMissing(c))
	}
	return c, nil
}

const credentialColumns = "id, kind, service_id, person_id, hash, created_at, expires_at, revoked_at"

// CredentialByHash returns the credential whose secret hashes to hash,
// revoked and expired ones included. Errors: ENOTFOUND.
func (s *Store) CredentialByHash(ctx context.Context, hash [32]byte) (live.Credential, error) {
	c, err := scanCredential(s.readRow(ctx, "SELECT "+credentialColumns+" FROM credentials WHERE hash = ?", hash[:]))
	if errors.Is(err, sql.ErrNoRows) {
		return c, live.Errorf(live.ENOTFOUND, "no credential has that secret")
	}
	if err != nil {
		return c, fmt.Errorf("credential by hash: %w", err)
	}
	return c, nil
}

// RevokeCredential marks credential id revoked at the store's time; revoking
// it again keeps the first time. Errors: ENOTFOUND.
func (s *Store) RevokeCredential(ctx context.Context, id string) error {
	return s.writeOne(ctx, func(ctx context.Context, q execer) error {
		res, err := q.ExecContext(ctx, "UPDATE credentials SET revoked_at = coalesce(revoked_at, ?) WHERE id = ?", nanos(s.now()), id)
		if err != nil {
			return fmt.Errorf("revoke credential %s: %w", id, err)
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return live.Errorf(live.ENOTFOUND, "credential %q not found", id)
		}
		return nil
	})
}

// ListCredentials lists credentials of kind ("" for all), oldest first,
// without their hashes.
func (s *Store) ListCredentials(ctx context.Context, kind live.CredentialKind) ([]live.Credential, error) {
	cs, err := list(ctx, s.rdb, "credentials", "SELECT "+credentialColumns+" FROM credentials WHERE ? = '' OR kind = ? ORDER BY created_at, id",
		scanCredential, string(kind), string(kind))
	for i := range cs {
		cs[i].Hash = [32]byte{}
	}
	return cs, err
}

func scanCredential(r scanner) (live.Credential, error) {
	var c live.Credential
	var kind string
	var svc, per sql.NullString
	var hash []byte
	var created int64
	var expires, revoked sql.NullInt64
	if err := r.Scan(&c.ID, &kind, &svc, &per, &hash, &created, &expires, &revoked); err != nil {
		return c, err
	}
	c.Kind = live.CredentialKind(kind)
	c.ServiceID, c.PersonID = svc.String, per.String
	copy(c.Hash[:], hash)
	c.CreatedAt = fromNanos(created)
	c.ExpiresAt, c.RevokedAt = fromNullNanos(expires), fromNullNanos(revoked)
	return c, nil
}

func nullString(s string) sql.NullString { return sql.NullString{String: s, Valid: s != ""} }

// holderMissing says which holder of c does not exist.
func holderMissing(c live.Credential) string {
	if c.Kind == live.KindServiceToken {
		return fmt.Sprintf("service %q does not exist", c.ServiceID)
	}
	return fmt.Sprintf("person %q does not exist", c.PersonID)
}
