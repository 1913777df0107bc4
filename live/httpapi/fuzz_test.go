package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
)

// FuzzCheckIn sends arbitrary bodies and Content-Types with valid
// credentials: the answer is always one of the table's body-path statuses,
// never a 500; a refusal is a coded JSON error, and an accepted body is
// stored exactly.
func FuzzCheckIn(f *testing.F) {
	fx := newFixture(f, sqliteBackend, fixtureOptions{})
	for _, seed := range []struct {
		body  string
		ctype string
	}{
		{isolationOnly, "application/json"},
		{string(validReport(f)), "application/json; charset=utf-8"},
		{noProfile, "application/json"},
		{`{"isolation":`, "application/json"},
		{isolationOnly + "{}", "application/json"},
		{`{"a":1,"a":2}`, "application/json"},
		{"{\"worker_id\":\"\xff\"}", "application/json"},
		{`[]`, "application/json"},
		{``, ""},
		{`null`, "text/plain"},
		{`{"isolation":{"host_network":false,"credentials":false,"profile":false,"egress_proxy":true,"workspace":"ephemeral"},"capacity":1e400}`, "application/json"},
		{`{"checked_at":"2026-02-30T25:00:00Z",` + isolationOnly[1:], "APPLICATION/JSON;charset=\"utf-8\""},
	} {
		f.Add([]byte(seed.body), seed.ctype)
	}
	allowed := map[int]bool{200: true, 400: true, 413: true, 415: true, 422: true}
	f.Fuzz(func(t *testing.T, body []byte, ctype string) {
		r := httptest.NewRequest("POST", checkInPath(fx.stream), bytes.NewReader(body))
		r.Header.Set("Authorization", "Bearer "+fx.secrets["service"])
		r.Header.Set(SubjectHeader, fx.owner)
		if ctype != "" {
			r.Header["Content-Type"] = []string{ctype}
		}
		w := httptest.NewRecorder()
		fx.handler.ServeHTTP(w, r)
		if !allowed[w.Code] {
			t.Fatalf("status %d for body %q, type %q: %s", w.Code, body, ctype, w.Body)
		}
		if w.Code == http.StatusOK {
			rec, err := fx.store.Worker(context.Background(), fx.stream)
			if err != nil || rec.Registration == nil || !bytes.Equal(rec.Registration.Report, body) {
				t.Fatalf("accepted %q but stored %q (%v)", body, regReport(rec.Registration), err)
			}
			return
		}
		var e errorBody
		if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || e.Error.Code == "" || e.Error.Message == "" {
			t.Fatalf("status %d with body %s (%v)", w.Code, w.Body, err)
		}
	})
}
