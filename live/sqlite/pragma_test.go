package sqlite

import (
	"path/filepath"
	"testing"
)

// TestPragmas checks the settings that durability and safety rest on: the
// writer commits in WAL mode with synchronous=FULL and enforces foreign
// keys; readers cannot write.
func TestPragmas(t *testing.T) {
	s, err := Open(t.Context(), filepath.Join(t.TempDir(), "live.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := t.Context()
	for _, tc := range []struct {
		name, pragma, want string
	}{
		{"JournalModeWAL", "PRAGMA journal_mode", "wal"},
		{"SynchronousFull", "PRAGMA synchronous", "2"},
		{"ForeignKeys", "PRAGMA foreign_keys", "1"},
		{"BusyTimeout", "PRAGMA busy_timeout", "10000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got string
			if err := s.wconn.QueryRowContext(ctx, tc.pragma).Scan(&got); err != nil || got != tc.want {
				t.Fatalf("%s on the writer = %q (%v), want %q", tc.pragma, got, err, tc.want)
			}
		})
	}
	t.Run("ReadersQueryOnly", func(t *testing.T) {
		if _, err := s.rdb.ExecContext(ctx, "INSERT INTO persons (id, name, created_at) VALUES ('p', 'x', 0)"); err == nil {
			t.Fatal("a reader connection wrote")
		}
	})
}
