package main

import (
	"context"
	"fmt"
	"strings"

	"openvibe.network/agentsandbox/live"
	"openvibe.network/agentsandbox/live/postgres"
	"openvibe.network/agentsandbox/live/sqlite"
)

// openStore opens the store that d names: sqlite:PATH, or a postgres:// or
// postgresql:// URL; read-only, it never creates or migrates a database. It
// fails on any other DSN, a schema given for SQLite, or when the store
// cannot be opened.
func openStore(ctx context.Context, d dbFlags, readOnly bool) (live.Store, error) {
	switch {
	case strings.HasPrefix(d.dsn, "sqlite:"):
		if d.schema != "" {
			return nil, fmt.Errorf("--db-schema is for PostgreSQL only; drop it for %s", d.dsn)
		}
		return sqlite.Open(ctx, strings.TrimPrefix(d.dsn, "sqlite:"), sqlite.Options{ReadOnly: readOnly})
	case strings.HasPrefix(d.dsn, "postgres://"), strings.HasPrefix(d.dsn, "postgresql://"):
		return postgres.Open(ctx, d.dsn, postgres.Options{Schema: d.schema, ReadOnly: readOnly})
	default:
		return nil, fmt.Errorf("--db %q: use sqlite:PATH or postgres://USER@HOST:PORT/DB", d.dsn)
	}
}

// dbKind names the store without the rest of the DSN (which may hold a
// password).
func dbKind(dsn string) string {
	if strings.HasPrefix(dsn, "sqlite:") {
		return "sqlite"
	}
	return "postgres"
}
