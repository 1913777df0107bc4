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
	err = s.write(ctx, func(ctx context.Context, q execer) error {
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

const credentialColumns = "id, kind, service_id, person_id, hash, created_at, expires_at, revoked_at, last_used_at"

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
	return s.write(ctx, func(ctx context.Context, q execer) error {
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

// RevokeSessions revokes every unrevoked session of person at the store's
// time and returns their ids. Errors: ENOTFOUND (no such person).
func (s *Store) RevokeSessions(ctx context.Context, person string) ([]string, error) {
	var ids []string
	err := s.write(ctx, func(ctx context.Context, q execer) error {
		ids = []string{}
		var one int
		if err := q.QueryRowContext(ctx, "SELECT 1 FROM persons WHERE id = ?", person).Scan(&one); err != nil {
			return getError("person", person, err)
		}
		var err error
		ids, err = queryIDs(ctx, q, "UPDATE credentials SET revoked_at = ? WHERE person_id = ? AND kind = 'session' AND revoked_at IS NULL RETURNING id",
			nanos(s.now()), person)
		if err != nil {
			return fmt.Errorf("revoke sessions of %s: %w", person, err)
		}
		return nil
	})
	return ids, err
}

// ConsumeLoginTicket revokes the usable login ticket with hash and returns
// it. Errors: ENOTFOUND (no usable login ticket has that hash).
func (s *Store) ConsumeLoginTicket(ctx context.Context, hash [32]byte) (live.Credential, error) {
	var c live.Credential
	err := s.write(ctx, func(ctx context.Context, q execer) error {
		now := nanos(s.now())
		var err error
		c, err = scanCredential(q.QueryRowContext(ctx, `UPDATE credentials SET revoked_at = ?1, last_used_at = ?1
			WHERE hash = ?2 AND kind = 'login_ticket' AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ?1)
			RETURNING `+credentialColumns, now, hash[:]))
		if errors.Is(err, sql.ErrNoRows) {
			return live.Errorf(live.ENOTFOUND, "no usable login ticket has that secret: it is unknown, used or expired")
		}
		if err != nil {
			return fmt.Errorf("consume login ticket: %w", err)
		}
		return nil
	})
	return c, err
}

// TouchCredential records now, to the minute, as credential id's last use.
// Errors: ENOTFOUND.
func (s *Store) TouchCredential(ctx context.Context, id string) error {
	return s.writeKeepingAuth(ctx, 0, func(ctx context.Context, q execer) error {
		now := s.now().Truncate(live.LastUseGrain)
		res, err := q.ExecContext(ctx, "UPDATE credentials SET last_used_at = ? WHERE id = ?", nanos(now), id)
		if err != nil {
			return fmt.Errorf("touch credential %s: %w", id, err)
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return live.Errorf(live.ENOTFOUND, "credential %q not found", id)
		}
		return nil
	})
}

// ListCredentials lists credentials of kind ("" for all), oldest first,
// without their hashes, with their holders' names.
func (s *Store) ListCredentials(ctx context.Context, kind live.CredentialKind) ([]live.Credential, error) {
	return list(ctx, s.rdb, "credentials", `SELECT c.id, c.kind, c.service_id, c.person_id, c.created_at, c.expires_at, c.revoked_at,
			c.last_used_at, coalesce(p.name, v.name, '')
		FROM credentials c LEFT JOIN persons p ON p.id = c.person_id LEFT JOIN services v ON v.id = c.service_id
		WHERE ?1 = '' OR c.kind = ?1 ORDER BY c.created_at, c.id`, scanListedCredential, string(kind))
}

func scanListedCredential(r scanner) (live.Credential, error) {
	var c live.Credential
	var kind string
	var svc, per sql.NullString
	var created int64
	var expires, revoked, used sql.NullInt64
	if err := r.Scan(&c.ID, &kind, &svc, &per, &created, &expires, &revoked, &used, &c.HolderName); err != nil {
		return c, err
	}
	c.Kind = live.CredentialKind(kind)
	c.ServiceID, c.PersonID = svc.String, per.String
	c.CreatedAt = fromNanos(created)
	c.ExpiresAt, c.RevokedAt, c.LastUsedAt = fromNullNanos(expires), fromNullNanos(revoked), fromNullNanos(used)
	return c, nil
}

func scanCredential(r scanner) (live.Credential, error) {
	var c live.Credential
	var kind string
	var svc, per sql.NullString
	var hash []byte
	var created int64
	var expires, revoked, used sql.NullInt64
	if err := r.Scan(&c.ID, &kind, &svc, &per, &hash, &created, &expires, &revoked, &used); err != nil {
		return c, err
	}
	c.Kind = live.CredentialKind(kind)
	c.ServiceID, c.PersonID = svc.String, per.String
	copy(c.Hash[:], hash)
	c.CreatedAt = fromNanos(created)
	c.ExpiresAt, c.RevokedAt, c.LastUsedAt = fromNullNanos(expires), fromNullNanos(revoked), fromNullNanos(used)
	return c, nil
}

// queryIDs runs a statement that returns one id per row.
func queryIDs(ctx context.Context, q execer, query string, args ...any) ([]string, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	ids := []string{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

func nullString(s string) sql.NullString { return sql.NullString{String: s, Valid: s != ""} }

// holderMissing says which holder of c does not exist.
func holderMissing(c live.Credential) string {
	if c.Kind == live.KindServiceToken {
		return fmt.Sprintf("service %q does not exist", c.ServiceID)
	}
	return fmt.Sprintf("person %q does not exist", c.PersonID)
}
