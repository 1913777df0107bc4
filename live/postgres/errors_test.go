package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"openvibe.network/agentsandbox/live"
)

// TestStorageError: what the database server cannot do now (out of disk,
// memory or connections, shutting down, a standby, out of reach) is
// EUNAVAILABLE with a message naming it; everything else keeps its code.
func TestStorageError(t *testing.T) {
	// A real refused connection: nothing listens on port 1 of loopback.
	_, refused := pgconn.Connect(context.Background(), "postgres://x@127.0.0.1:1/x?connect_timeout=5")
	if refused == nil {
		t.Fatal("connecting to 127.0.0.1:1 succeeded")
	}
	pg := func(code string) error { return fmt.Errorf("accept s: %w", &pgconn.PgError{Code: code}) }
	for _, tc := range []struct {
		name     string
		err      error
		wantCode string
		wantWhy  string // in the message
	}{
		{"DiskFull", pg("53100"), live.EUNAVAILABLE, "the disk of its database server is full"},
		{"OutOfMemory", pg("53200"), live.EUNAVAILABLE, "out of memory"},
		{"TooManyConnections", pg("53300"), live.EUNAVAILABLE, "no connection to spare"},
		{"OtherResource", pg("53400"), live.EUNAVAILABLE, "out of resources (53400)"},
		{"AdminShutdown", pg("57P01"), live.EUNAVAILABLE, "shutting down or starting up"},
		{"CannotConnectNow", pg("57P03"), live.EUNAVAILABLE, "shutting down or starting up"},
		{"ReadOnlyStandby", pg("25006"), live.EUNAVAILABLE, "accepts no writes"},
		{"ConnectionFailure", pg("08006"), live.EUNAVAILABLE, "connection to the database server failed"},
		{"Unreachable", fmt.Errorf("probe: %w", refused), live.EUNAVAILABLE, "cannot be reached"},
		{"ConnectionLost", fmt.Errorf("look up check-in: %w", io.ErrUnexpectedEOF), live.EUNAVAILABLE, "connection to the database server failed"},
		{"ConnectionClosed", fmt.Errorf("probe: %w", pgconn.ErrConnClosed), live.EUNAVAILABLE, "connection to the database server failed"},
		{"UniqueViolation", pg(uniqueViolation), live.EINTERNAL, "internal error"},
		{"Plain", errors.New("boom"), live.EINTERNAL, "internal error"},
		{"Classified", live.Errorf(live.ENOTFOUND, "stream %q not found", "s"), live.ENOTFOUND, `stream "s" not found`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := storageError(tc.err)
			if code, msg := live.ErrorCode(got), live.ErrorMessage(got); code != tc.wantCode || !strings.Contains(msg, tc.wantWhy) {
				t.Errorf("storageError(%v) = %s %q, want %s with %q", tc.err, code, msg, tc.wantCode, tc.wantWhy)
			}
			if !errors.Is(got, tc.err) {
				t.Errorf("storageError(%v) = %v, which no longer wraps the cause", tc.err, got)
			}
		})
	}
	if storageError(nil) != nil {
		t.Error("storageError(nil) is not nil")
	}
}
