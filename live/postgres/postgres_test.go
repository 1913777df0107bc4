package postgres_test

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"openvibe.network/agentsandbox/internal/testenv"
	"openvibe.network/agentsandbox/live"
	"openvibe.network/agentsandbox/live/postgres"
	"openvibe.network/agentsandbox/live/postgres/pgtest"
	"openvibe.network/agentsandbox/live/storetest"
)

// schema returns a fresh schema name, dropped when tb ends.
func schema(tb testing.TB, dsn string) string {
	tb.Helper()
	return pgtest.Schema(tb, dsn, "ovlive_test_")
}

func open(tb testing.TB, dsn, schema string) *postgres.Store {
	tb.Helper()
	s, err := postgres.Open(context.Background(), dsn, postgres.Options{Schema: schema})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = s.Close() })
	return s
}

func TestStore(t *testing.T) {
	dsn := testenv.PostgresDSN(t)
	storetest.Run(t, func(t *testing.T) storetest.OpenFunc {
		name := schema(t, dsn)
		return func(o storetest.OpenOptions) live.Store {
			s, err := postgres.Open(context.Background(), dsn, postgres.Options{Schema: name, Window: o.Window,
				HistoryMaxAge: o.HistoryMaxAge, HistoryMaxRows: o.HistoryMaxRows})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			return s
		}
	}, storetest.Traits{DatabaseClock: true})
}

// TestReceiveTimeIsDatabaseClock checks that Accept and Refuse take their
// time from the database, in the statement that writes.
func TestReceiveTimeIsDatabaseClock(t *testing.T) {
	dsn := testenv.PostgresDSN(t)
	ctx := t.Context()
	s := open(t, dsn, schema(t, dsn))
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	dbNow := func() time.Time {
		var now time.Time
		if err := conn.QueryRow(ctx, "SELECT clock_timestamp()").Scan(&now); err != nil {
			t.Fatal(err)
		}
		return now
	}
	p, err := s.CreatePerson(ctx, live.Person{Name: "Ada"})
	if err != nil {
		t.Fatal(err)
	}
	st, err := s.CreateStream(ctx, live.Stream{OwnerID: p.ID})
	if err != nil {
		t.Fatal(err)
	}
	sv, err := s.CreateService(ctx, live.Service{Name: "w", FirstParty: true})
	if err != nil {
		t.Fatal(err)
	}
	before := dbNow()
	reg, err := s.Accept(ctx, live.Registration{StreamID: st.ID, Report: []byte(`{}`), ServiceID: sv.ID, SubjectID: p.ID})
	if err != nil {
		t.Fatal(err)
	}
	ref, err := s.Refuse(ctx, live.Refusal{StreamID: st.ID, ServiceID: sv.ID, SubjectID: p.ID})
	if err != nil {
		t.Fatal(err)
	}
	after := dbNow()
	for _, tc := range []struct {
		name string
		got  time.Time
	}{{"ReceivedAt", reg.ReceivedAt}, {"RefusalAt", ref.At}} {
		if tc.got.Before(before) || tc.got.After(after) {
			t.Errorf("%s = %v, not within the database's clock [%v, %v]", tc.name, tc.got, before, after)
		}
	}
	if ref.At.Before(reg.ReceivedAt) {
		t.Errorf("refusal at %v before the registration it cleared (%v)", ref.At, reg.ReceivedAt)
	}
}

// TestOpenTogether opens several stores on one new schema at once: the
// advisory lock lets exactly one apply the migrations.
func TestOpenTogether(t *testing.T) {
	dsn := testenv.PostgresDSN(t)
	name := schema(t, dsn)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() {
			s, err := postgres.Open(t.Context(), dsn, postgres.Options{Schema: name})
			if err == nil {
				err = s.Close()
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	s := open(t, dsn, name)
	if _, err := s.ListPersons(t.Context()); err != nil {
		t.Fatal(err)
	}
}

func TestOpenBadSchema(t *testing.T) {
	dsn := testenv.PostgresDSN(t)
	if _, err := postgres.Open(t.Context(), dsn, postgres.Options{Schema: `x"; DROP TABLE y; --`}); err == nil {
		t.Fatal("Open accepted a schema name that is not an identifier")
	}
}

// BenchmarkAccept measures concurrent check-ins (one upsert each) on one
// store.
func BenchmarkAccept(b *testing.B) {
	dsn := testenv.PostgresDSN(b)
	storetest.BenchmarkAccept(b, open(b, dsn, schema(b, dsn)))
}

// TestReadOnly: a read-only open creates no schema and no table, and
// refuses writes.
func TestReadOnly(t *testing.T) {
	dsn := testenv.PostgresDSN(t)
	ctx := t.Context()
	name := schema(t, dsn)
	_, err := postgres.Open(ctx, dsn, postgres.Options{Schema: name, ReadOnly: true})
	if err == nil || !strings.Contains(err.Error(), "no database at postgres://") || !strings.Contains(err.Error(), "schema "+name) {
		t.Fatalf("Open = %v, want no database at … schema %s", err, name)
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)", name).Scan(&exists); err != nil || exists {
		t.Fatalf("a read-only open created schema %s (%v)", name, err)
	}
	w := open(t, dsn, name)
	if _, err := w.CreatePerson(ctx, live.Person{Name: "Ada"}); err != nil {
		t.Fatal(err)
	}
	r, err := postgres.Open(ctx, dsn, postgres.Options{Schema: name, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if list, err := r.ListPersons(ctx); err != nil || len(list) != 1 {
		t.Fatalf("ListPersons read-only = %+v, %v", list, err)
	}
	for name, err := range map[string]error{
		"CreatePerson": func() error { _, err := r.CreatePerson(ctx, live.Person{Name: "x"}); return err }(),
		"Accept": func() error {
			_, err := r.Accept(ctx, live.Registration{StreamID: "s", Report: []byte(`{}`), ServiceID: "v", SubjectID: "p"})
			return err
		}(),
		"Probe": r.Probe(ctx),
	} {
		if live.ErrorCode(err) != live.EUNAVAILABLE {
			t.Errorf("%s on a read-only store: %v, want %s", name, err, live.EUNAVAILABLE)
		}
	}
}

// TestMigrateFromV1 opens a schema that only the first migration made, with
// data in it: the data stays, the new kind is allowed.
func TestMigrateFromV1(t *testing.T) {
	dsn := testenv.PostgresDSN(t)
	ctx := t.Context()
	name := schema(t, dsn)
	v1, err := os.ReadFile(filepath.Join("migrations", "001_init.sql"))
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	secret, hash, _ := live.NewSecret(live.KindServiceToken)
	for _, stmt := range []string{
		"CREATE SCHEMA " + name, "SET search_path = " + name, string(v1),
		"CREATE TABLE schema_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())",
		"INSERT INTO schema_migrations (version, name) VALUES (1, '001_init.sql')",
		"INSERT INTO persons VALUES ('per_a', 'Ada', now())",
		"INSERT INTO streams VALUES ('s', 'per_a', now())",
		"INSERT INTO services VALUES ('svc_w', 'w', true, '{live.agent_sandbox.register}', now())",
		"INSERT INTO registrations VALUES ('s', '\\x7b7d', now(), 'svc_w', 'per_a')",
	} {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	if _, err := conn.Exec(ctx, "INSERT INTO credentials (id, kind, service_id, hash, created_at) VALUES ('cred_1', 'service_token', 'svc_w', $1, now())", hash[:]); err != nil {
		t.Fatal(err)
	}
	s := open(t, dsn, name)
	if c, err := s.CredentialByHash(ctx, live.HashSecret(secret)); err != nil || c.ID != "cred_1" {
		t.Fatalf("credential after migration: %+v, %v", c, err)
	}
	if rec, err := s.Worker(ctx, "s"); err != nil || rec.Registration == nil || string(rec.Registration.Report) != "{}" {
		t.Fatalf("worker after migration: %+v, %v", rec, err)
	}
	_, th, _ := live.NewSecret(live.KindLoginTicket)
	if _, err := s.CreateCredential(ctx, live.Credential{Kind: live.KindLoginTicket, PersonID: "per_a", Hash: th}); err != nil {
		t.Fatalf("login ticket after migration: %v", err)
	}
}

// BenchmarkLookupCheckIn measures a check-in's one read.
func BenchmarkLookupCheckIn(b *testing.B) {
	dsn := testenv.PostgresDSN(b)
	storetest.BenchmarkLookupCheckIn(b, open(b, dsn, schema(b, dsn)))
}

// TestRegistrationsUpdateInPlace checks that a check-in rewriting a
// registration finds room for the new version on the old one's page
// (migration 004), so that the update is heap-only and the next one's
// pruning reclaims the old version without a vacuum: 10 registrations of
// 1.4 KB, each rewritten once, stay on the pages they were written to
// (packed pages hold five such rows with no room for a sixth, so every
// update moved). It compares pages, not the table's size after many
// updates: how much pruning reclaims depends on the oldest snapshot of any
// session on the server, which other test binaries hold.
func TestRegistrationsUpdateInPlace(t *testing.T) {
	dsn := testenv.PostgresDSN(t)
	ctx := t.Context()
	name := schema(t, dsn)
	s := open(t, dsn, name)
	p, sv, streams := storetest.Streams(t, s, 10)
	report := []byte(`{"pad":"` + strings.Repeat("x", 1300) + `"}`)
	checkInAll := func() {
		for _, id := range streams {
			if _, err := s.Accept(ctx, live.Registration{StreamID: id, Report: report, ServiceID: sv.ID, SubjectID: p.ID}); err != nil {
				t.Fatal(err)
			}
		}
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	pages := func() map[string]int {
		rows, err := conn.Query(ctx, "SELECT stream_id, (ctid::text::point)[0]::int FROM "+pgx.Identifier{name, "registrations"}.Sanitize())
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]int{}
		for rows.Next() {
			var id string
			var page int
			if err := rows.Scan(&id, &page); err != nil {
				t.Fatal(err)
			}
			got[id] = page
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return got
	}
	checkInAll()
	before := pages()
	if len(before) != len(streams) {
		t.Fatalf("%d registrations after the first check-ins, want %d", len(before), len(streams))
	}
	checkInAll()
	if after := pages(); !reflect.DeepEqual(after, before) {
		t.Errorf("registrations' pages before a rewrite %v, after %v: the updates did not stay on their page", before, after)
	}
}
