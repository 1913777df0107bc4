package sqlite

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"openvibe.network/agentsandbox/live"
)

// TestFileModes: the database and its WAL and shared-memory files are the
// owner's only.
func TestFileModes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "live.db")
	s, err := Open(t.Context(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.CreatePerson(t.Context(), live.Person{Name: "Ada"}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{path, path + "-wal", path + "-shm"} {
		info, err := os.Stat(name)
		if err != nil {
			t.Fatal(err)
		}
		if mode := info.Mode().Perm(); mode != 0o600 {
			t.Errorf("%s has mode %v, want 0600", filepath.Base(name), mode)
		}
	}
}

// TestReadOnly: a read-only open never creates or migrates a database, and
// refuses writes.
func TestReadOnly(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.db")
	t.Run("ErrNoDatabase", func(t *testing.T) {
		_, err := Open(t.Context(), missing, Options{ReadOnly: true})
		if err == nil || !strings.Contains(err.Error(), "no database at "+missing) {
			t.Fatalf("Open = %v, want no database at %s", err, missing)
		}
		if _, err := os.Stat(missing); !os.IsNotExist(err) {
			t.Fatalf("a read-only open created %s (%v)", missing, err)
		}
	})
	t.Run("ErrNotADatabase", func(t *testing.T) {
		other := filepath.Join(dir, "other.db")
		db, err := sql.Open("sqlite", other)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec("CREATE TABLE x (a)"); err != nil {
			t.Fatal(err)
		}
		db.Close()
		_, err = Open(t.Context(), other, Options{ReadOnly: true})
		if err == nil || !strings.Contains(err.Error(), "not an ovlive database") {
			t.Fatalf("Open = %v, want not an ovlive database", err)
		}
	})
	path := filepath.Join(dir, "live.db")
	w, err := Open(t.Context(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := w.CreatePerson(t.Context(), live.Person{Name: "Ada"})
	if err != nil {
		t.Fatal(err)
	}
	r, err := Open(t.Context(), path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if list, err := r.ListPersons(t.Context()); err != nil || len(list) != 1 || list[0].ID != p.ID {
		t.Fatalf("ListPersons read-only = %+v, %v", list, err)
	}
	for name, err := range map[string]error{
		"CreatePerson": func() error { _, err := r.CreatePerson(t.Context(), live.Person{Name: "x"}); return err }(),
		"Probe":        r.Probe(t.Context()),
	} {
		if live.ErrorCode(err) != live.EUNAVAILABLE {
			t.Errorf("%s on a read-only store: %v, want %s", name, err, live.EUNAVAILABLE)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestMigrateFromV1 opens a database that only the first migration made,
// with data in it: the data survives the rebuild of the credentials table,
// and the new columns start empty.
func TestMigrateFromV1(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v1.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=foreign_keys(1)")
	if err != nil {
		t.Fatal(err)
	}
	v1, err := migrationFiles.ReadFile("migrations/001_init.sql")
	if err != nil {
		t.Fatal(err)
	}
	secret, hash, _ := live.NewSecret(live.KindServiceToken)
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).UnixNano()
	for _, stmt := range []string{
		string(v1),
		"CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL) STRICT",
		"INSERT INTO schema_migrations VALUES (1, '001_init.sql', 0)",
		"INSERT INTO persons VALUES ('per_a', 'Ada', 0)",
		"INSERT INTO streams VALUES ('s', 'per_a', 0)",
		"INSERT INTO services VALUES ('svc_w', 'w', 1, '[\"live.agent_sandbox.register\"]', 0)",
		"INSERT INTO registrations VALUES ('s', CAST('{}' AS BLOB), " + itoa(at) + ", 'svc_w', 'per_a')",
		"INSERT INTO refusals VALUES ('s', " + itoa(at) + ", 'svc_w', 'per_a', '[]')",
	} {
		if _, err := db.Exec(stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	if _, err := db.Exec("INSERT INTO credentials (id, kind, service_id, hash, created_at) VALUES ('cred_1', 'service_token', 'svc_w', ?, 0)", hash[:]); err != nil {
		t.Fatal(err)
	}
	db.Close()
	s, err := Open(context.Background(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, err := s.CredentialByHash(t.Context(), live.HashSecret(secret))
	if err != nil || c.ID != "cred_1" || c.LastUsedAt != nil {
		t.Fatalf("credential after migration: %+v, %v", c, err)
	}
	rec, err := s.Worker(t.Context(), "s")
	if err != nil || rec.Registration == nil || rec.Refusal == nil || rec.Refusal.Reasons == nil || len(rec.Refusal.Reasons) != 0 {
		t.Fatalf("worker after migration: %+v, %v", rec, err)
	}
	// The new kind is allowed now.
	_, th, _ := live.NewSecret(live.KindLoginTicket)
	if _, err := s.CreateCredential(t.Context(), live.Credential{Kind: live.KindLoginTicket, PersonID: "per_a", Hash: th}); err != nil {
		t.Fatalf("login ticket after migration: %v", err)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
