package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"openvibe.network/agentsandbox/live"
	"openvibe.network/agentsandbox/live/postgres"
	"openvibe.network/agentsandbox/live/sqlite"
)

// openStore opens the store that d names: sqlite:PATH, or a postgres:// or
// postgresql:// URL; read-only, it never creates or migrates a database;
// d.timeout bounds each new PostgreSQL connection. It fails on any other
// DSN, a schema given for SQLite, or when the store cannot be opened.
func openStore(ctx context.Context, d dbFlags, readOnly bool) (live.Store, error) {
	switch {
	case strings.HasPrefix(d.dsn, "sqlite:"):
		if d.schema != "" {
			return nil, fmt.Errorf("--db-schema is for PostgreSQL only; drop it for %s", d.dsn)
		}
		return sqlite.Open(ctx, strings.TrimPrefix(d.dsn, "sqlite:"), sqlite.Options{ReadOnly: readOnly})
	case strings.HasPrefix(d.dsn, "postgres://"), strings.HasPrefix(d.dsn, "postgresql://"):
		return postgres.Open(ctx, d.dsn, postgres.Options{Schema: d.schema, ReadOnly: readOnly, ConnectTimeout: d.timeout})
	default:
		return nil, fmt.Errorf("--db %q: use sqlite:PATH or postgres://USER@HOST:PORT/DB", d.dsn)
	}
}

// timedOut says, for an error that a deadline caused (ctx's, which opening
// and an admin command have, or a connection's: --db-timeout), that the
// database did not answer in time.
func timedOut(ctx context.Context, err error) error {
	if err != nil && (errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded)) {
		return fmt.Errorf("the database did not answer in time (a connection waits --db-timeout, opening at most %s): "+
			"check that it is running and that --db names it (%w)", openTimeout, err)
	}
	return err
}

// describeDB names the store for a log line: sqlite:PATH, or a PostgreSQL
// URL without its password and parameters.
func describeDB(dsn string) string {
	if strings.HasPrefix(dsn, "sqlite:") {
		return dsn
	}
	u, err := url.Parse(dsn)
	if err != nil || u.Host == "" {
		return "postgres (a DSN that is not a URL)"
	}
	out := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}
	if u.User != nil {
		out.User = url.User(u.User.Username())
	}
	return out.String()
}

// dbKind names the store without the rest of the DSN (which may hold a
// password).
func dbKind(dsn string) string {
	if strings.HasPrefix(dsn, "sqlite:") {
		return "sqlite"
	}
	return "postgres"
}
