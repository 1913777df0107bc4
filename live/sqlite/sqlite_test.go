package sqlite_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"openvibe.network/agentsandbox/live"
	"openvibe.network/agentsandbox/live/sqlite"
	"openvibe.network/agentsandbox/live/storetest"
)

func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.OpenFunc {
		path := filepath.Join(t.TempDir(), "live.db")
		return func(o storetest.OpenOptions) live.Store {
			s, err := sqlite.Open(t.Context(), path, sqlite.Options{Now: o.Now, Window: o.Window, HistoryMaxAge: o.HistoryMaxAge, HistoryMaxRows: o.HistoryMaxRows})
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
	}, storetest.Traits{})
}

// TestClock checks that the store's times come from the injected clock.
func TestClock(t *testing.T) {
	at := time.Date(2030, 5, 6, 7, 8, 9, 987654321, time.FixedZone("X", 3600))
	s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "live.db"), sqlite.Options{Now: func() time.Time { return at }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := t.Context()
	p, err := s.CreatePerson(ctx, live.Person{Name: "Ada"})
	if err != nil {
		t.Fatal(err)
	}
	st, err := s.CreateStream(ctx, live.Stream{OwnerID: p.ID})
	if err != nil {
		t.Fatal(err)
	}
	sv, err := s.CreateService(ctx, live.Service{Name: "w"})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := s.Accept(ctx, live.Registration{StreamID: st.ID, Report: []byte(`{}`), ServiceID: sv.ID, SubjectID: p.ID})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := s.Worker(ctx, st.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		got  time.Time
	}{{"CreatedAt", p.CreatedAt}, {"Accept", reg.ReceivedAt}, {"Worker", rec.Registration.ReceivedAt}} {
		if !tc.got.Equal(at) || tc.got.Location() != time.UTC {
			t.Errorf("%s = %v, want %v in UTC", tc.name, tc.got, at)
		}
	}
}

// TestOpenOddPath opens a file whose name holds characters that a file:
// URI would otherwise interpret.
func TestOpenOddPath(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "live 100%20.db")
	s, err := sqlite.Open(t.Context(), path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreatePerson(t.Context(), live.Person{Name: "x"}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("the database is not at %s: %v", path, err)
	}
}

func TestOpenBadPath(t *testing.T) {
	for _, path := range []string{"", "a?mode=memory", filepath.Join(t.TempDir(), "missing", "dir", "live.db")} {
		if s, err := sqlite.Open(t.Context(), path, sqlite.Options{}); err == nil {
			s.Close()
			t.Errorf("Open(%q) succeeded", path)
		}
	}
}

// BenchmarkAccept measures concurrent durable check-ins on one store.
func BenchmarkAccept(b *testing.B) {
	s, err := sqlite.Open(b.Context(), filepath.Join(b.TempDir(), "live.db"), sqlite.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	storetest.BenchmarkAccept(b, s)
}

// BenchmarkLookupCheckIn measures a check-in's one read.
func BenchmarkLookupCheckIn(b *testing.B) {
	s, err := sqlite.Open(b.Context(), filepath.Join(b.TempDir(), "live.db"), sqlite.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	storetest.BenchmarkLookupCheckIn(b, s)
}
