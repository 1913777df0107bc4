package httpapi

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"openvibe.network/agentsandbox/live"
)

// lookups returns how often the server read a check-in's lookup from the
// store.
func (f *fixture) lookups(tb testing.TB) string {
	tb.Helper()
	_, body := f.do(tb, req{method: "GET", path: "/metrics"})
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, `ovlive_store_duration_seconds_count{op="lookup_check_in"} `); ok {
			return v
		}
	}
	return "0"
}

// TestLookupCacheKeepsTheRules: a worker that checks in again costs no
// read, but every change that withdraws its authorisation answers at once,
// in the table's order, on both stores.
func TestLookupCacheKeepsTheRules(t *testing.T) { eachBackend(t, testLookupCacheKeepsTheRules) }

func testLookupCacheKeepsTheRules(t *testing.T, b backend) {
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		withdraw func(f *fixture) error
		status   int
		reason   string
	}{
		{"TokenRevoked", func(f *fixture) error {
			c, err := f.store.CredentialByHash(ctx, live.HashSecret(f.secrets["service"]))
			if err != nil {
				return err
			}
			return f.store.RevokeCredential(ctx, c.ID)
		}, 401, "revoked_credential"},
		{"CapabilityWithdrawn", func(f *fixture) error {
			_, err := f.store.SetCapability(ctx, f.services["worker"], live.CapabilityRegister, false)
			return err
		}, 403, "lacks_capability"},
		{"StreamDeleted", func(f *fixture) error { _, err := f.store.DeleteStream(ctx, f.stream); return err }, 404, "no_stream"},
		{"ServiceDeleted", func(f *fixture) error { _, err := f.store.DeleteService(ctx, f.services["worker"]); return err }, 401, "unknown_credential"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, b, fixtureOptions{logs: true})
			for range 3 {
				if status, body := f.checkIn(t, f.stream, []byte(isolationOnly)); status != 200 {
					t.Fatalf("check in: %d %s", status, body)
				}
				f.nextLog(t)
			}
			if n := f.lookups(t); n != "1" {
				t.Fatalf("three check-ins read the lookup %s times, want once", n)
			}
			f.nextLog(t)
			if err := tc.withdraw(f); err != nil {
				t.Fatal(err)
			}
			for _, body := range []string{isolationOnly, `{"not":"closed"`, noProfile} {
				status, resp := f.checkIn(t, f.stream, []byte(body))
				line := f.nextLog(t)
				if status != tc.status || line["reason"] != tc.reason {
					t.Fatalf("after the change, body %s: %d (%v) %s; want %d %s", body, status, line["reason"], resp, tc.status, tc.reason)
				}
			}
			// Nothing of the refused check-ins was stored (a deleted service
			// took its registration with it; a deleted stream has no record).
			if rec, err := f.store.Worker(ctx, f.stream); err == nil && (rec.Refusal != nil || rec.Registration != nil && !bytes.Equal(rec.Registration.Report, []byte(isolationOnly))) {
				t.Fatalf("a refused check-in changed the record: %+v", rec)
			}
		})
	}
}
