// Package pgtest gives a test its own PostgreSQL schema, so that tests (and
// test binaries) running at once on one database never see each other's
// rows. It is for tests only.
package pgtest

import (
	"context"
	"crypto/rand"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Schema returns a fresh schema name that starts with prefix (lowercase
// letters, digits and underscores) and is valid for postgres.Options.Schema;
// the store that first opens it creates it. When tb ends, the schema is
// dropped with everything in it; a failure to drop it fails tb.
func Schema(tb testing.TB, dsn, prefix string) string {
	tb.Helper()
	name := prefix + strings.ToLower(rand.Text()[:16])
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			tb.Errorf("drop schema %s: %v", name, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{name}.Sanitize()+" CASCADE"); err != nil {
			tb.Errorf("drop schema %s: %v", name, err)
		}
	})
	return name
}
