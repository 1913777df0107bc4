package pgtest_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"openvibe.network/agentsandbox/internal/testenv"
	"openvibe.network/agentsandbox/live/postgres"
	"openvibe.network/agentsandbox/live/postgres/pgtest"
)

// TestSchema checks that the name is a store's valid schema, that two calls
// differ, and that the schema is gone once the test that asked for it ends.
func TestSchema(t *testing.T) {
	dsn := testenv.PostgresDSN(t)
	var name string
	t.Run("Open", func(t *testing.T) {
		name = pgtest.Schema(t, dsn, "pgtest_")
		if other := pgtest.Schema(t, dsn, "pgtest_"); other == name {
			t.Fatalf("two calls gave the same schema %s", name)
		}
		s, err := postgres.Open(t.Context(), dsn, postgres.Options{Schema: name})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if !exists(t, dsn, name) {
			t.Fatalf("schema %s was not created by the store", name)
		}
	})
	if exists(t, dsn, name) {
		t.Fatalf("schema %s is still there after its test ended", name)
	}
}

func exists(tb testing.TB, dsn, schema string) bool {
	tb.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		tb.Fatal(err)
	}
	defer conn.Close(ctx)
	var ok bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)", schema).Scan(&ok); err != nil {
		tb.Fatal(err)
	}
	return ok
}
