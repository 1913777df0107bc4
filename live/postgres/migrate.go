package postgres

import (
	"context"
	"embed"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"openvibe.network/agentsandbox/live/internal/migrations"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrate creates schema (when set) and applies the migrations not applied
// yet, in order, in one transaction that holds an advisory lock for the
// schema, so instances starting together wait for each other.
func migrate(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	ms, err := migrations.Load(migrationFiles, "migrations")
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	// A schema that has every migration is only read, so that opening it
	// needs no write access (Probe then tells whether the store can write).
	if have, ok := appliedVersion(ctx, pool); ok && have == ms[len(ms)-1].Version {
		return nil
	}
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtext('ovlive migrate ' || $1))", schema); err != nil {
			return fmt.Errorf("migrate: lock: %w", err)
		}
		if schema != "" {
			if _, err := tx.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+pgx.Identifier{schema}.Sanitize()); err != nil {
				return fmt.Errorf("migrate: create schema: %w", err)
			}
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
			version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		var current int
		if err := tx.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM schema_migrations").Scan(&current); err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		for _, m := range ms {
			if m.Version <= current {
				continue
			}
			if _, err := tx.Exec(ctx, m.SQL); err != nil {
				return fmt.Errorf("migrate %s: %w", m.Name, err)
			}
			if _, err := tx.Exec(ctx, "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", m.Version, m.Name); err != nil {
				return fmt.Errorf("migrate %s: %w", m.Name, err)
			}
		}
		return nil
	})
}

// appliedVersion returns the highest migration the search path's schema
// has applied, and false when it has none (or cannot be read).
func appliedVersion(ctx context.Context, pool *pgxpool.Pool) (int, bool) {
	var have *int
	err := pool.QueryRow(ctx, "SELECT CASE WHEN to_regclass('schema_migrations') IS NULL THEN NULL ELSE (SELECT max(version) FROM schema_migrations) END").Scan(&have)
	if err != nil || have == nil {
		return 0, false
	}
	return *have, true
}

// checkSchema fails unless the schema (the search path's when "") holds an
// ovlive database at the latest embedded migration; it creates nothing.
func checkSchema(ctx context.Context, pool *pgxpool.Pool, schema, db string) error {
	ms, err := migrations.Load(migrationFiles, "migrations")
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	where := db
	if schema != "" {
		where += " schema " + schema
	}
	var exists bool
	if err := pool.QueryRow(ctx, "SELECT to_regclass('schema_migrations') IS NOT NULL").Scan(&exists); err != nil {
		return fmt.Errorf("check schema: %w", err)
	}
	if !exists {
		return fmt.Errorf("no database at %s: it is created by `ovlive serve` or by an admin command that writes, such as `person add`", where)
	}
	var have int
	if err := pool.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM schema_migrations").Scan(&have); err != nil {
		return fmt.Errorf("check schema: %w", err)
	}
	switch want := ms[len(ms)-1].Version; {
	case have < want:
		return fmt.Errorf("the database at %s is at schema version %d and this ovlive needs %d: run `ovlive serve` (or an admin command that writes) once to migrate it", where, have, want)
	case have > want:
		return fmt.Errorf("the database at %s is at schema version %d, newer than this ovlive knows (%d): use a newer ovlive", where, have, want)
	}
	return nil
}
