package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"time"

	"openvibe.network/agentsandbox/live/internal/migrations"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrate applies the migrations that db has not applied yet, in order, in
// one immediate transaction (so two processes opening one file at once
// apply each migration once). A database that has them all is only read,
// so that opening it needs no write access (Probe then tells whether the
// store can write).
func migrate(ctx context.Context, db *sql.DB) error {
	ms, err := migrations.Load(migrationFiles, "migrations")
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if have, err := schemaVersion(ctx, db); err == nil && have >= ms[len(ms)-1].Version {
		return checkVersion(have)
	}
	tx, err := db.BeginTx(ctx, nil) // BEGIN IMMEDIATE (_txlock)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL) STRICT`); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	var current int
	if err := tx.QueryRowContext(ctx, "SELECT coalesce(max(version), 0) FROM schema_migrations").Scan(&current); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	for _, m := range ms {
		if m.Version <= current {
			continue
		}
		if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
			return fmt.Errorf("migrate %s: %w", m.Name, err)
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)",
			m.Version, m.Name, time.Now().UnixNano()); err != nil {
			return fmt.Errorf("migrate %s: %w", m.Name, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}

// schemaVersion returns the highest migration db has applied; it fails
// when db is not an ovlive database.
func schemaVersion(ctx context.Context, db *sql.DB) (int, error) {
	var v sql.NullInt64
	if err := db.QueryRowContext(ctx, "SELECT max(version) FROM schema_migrations").Scan(&v); err != nil {
		return 0, fmt.Errorf("the file is not an ovlive database: %w", err)
	}
	return int(v.Int64), nil
}

// checkVersion fails unless have is the latest embedded migration.
func checkVersion(have int) error {
	ms, err := migrations.Load(migrationFiles, "migrations")
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	switch want := ms[len(ms)-1].Version; {
	case have < want:
		return fmt.Errorf("the database is at schema version %d and this ovlive needs %d: run `ovlive serve` (or an admin command that writes) once to migrate it", have, want)
	case have > want:
		return fmt.Errorf("the database is at schema version %d, newer than this ovlive knows (%d): use a newer ovlive", have, want)
	}
	return nil
}
