package postgres_test

import (
	"context"
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
		return func(func() time.Time) live.Store { return open(t, dsn, name) }
	})
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
