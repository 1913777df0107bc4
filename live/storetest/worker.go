package storetest

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"openvibe.network/agentsandbox"
	"openvibe.network/agentsandbox/live"
)

// reports are bodies that a re-encoding store would change.
var reports = []struct{ name, body string }{
	{"KeyOrderAndSpaces", "{\"z\":1,  \"a\" :\t[ 1,2 ,3 ],\r\n\"m\":{}}"},
	{"Unicode", `{"name":"Zoë 😀 \u00e9\u0000","cjk":"漢字","esc":"\/\"\\"}`},
	{"NumbersAndTrailingNewline", "{\"big\":123456789012345678901234567890,\"f\":1.50e+00,\"neg\":-0}\n"},
	{"DuplicateKeys", `{"a":1,"a":2}`},
	{"Large", `{"pad":"` + strings.Repeat("x", 60<<10) + `"}`},
	{"NotUTF8", "{\"s\":\"\xff\xfe\"}"},
}

func testAccept(t *testing.T, e *env) {
	f := e.fixture()
	t.Run("OK", func(t *testing.T) {
		in := f.registration(`{"v":1}`)
		in.ReceivedAt = time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC) // the store sets it
		got, err := e.store.Accept(e.ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		checkTime(t, "ReceivedAt", got.ReceivedAt, e.clock.Now())
		if got.StreamID != f.stream.ID || got.ServiceID != f.service.ID || got.SubjectID != f.owner.ID || string(got.Report) != `{"v":1}` {
			t.Fatalf("Accept = %+v", got)
		}
		rec := e.worker(f.stream.ID)
		if rec.Registration == nil || !rec.Registration.ReceivedAt.Equal(got.ReceivedAt) {
			t.Fatalf("Worker = %+v, want registration received at %v", rec.Registration, got.ReceivedAt)
		}
	})
	t.Run("Replaces", func(t *testing.T) {
		first, err := e.store.Accept(e.ctx, f.registration(`{"v":1}`))
		if err != nil {
			t.Fatal(err)
		}
		e.clock.Advance(20 * time.Second)
		second, err := e.store.Accept(e.ctx, f.registration(`{"v":2}`))
		if err != nil {
			t.Fatal(err)
		}
		if second.ReceivedAt.Before(first.ReceivedAt) {
			t.Fatalf("second receive time %v before first %v", second.ReceivedAt, first.ReceivedAt)
		}
		rec := e.worker(f.stream.ID)
		if rec.Registration == nil || string(rec.Registration.Report) != `{"v":2}` || !rec.Registration.ReceivedAt.Equal(second.ReceivedAt) {
			t.Fatalf("Worker = %+v, want the second report", rec.Registration)
		}
	})
	t.Run("ReplacesServiceAndSubject", func(t *testing.T) {
		if _, err := e.store.Accept(e.ctx, f.registration(`{"v":1}`)); err != nil {
			t.Fatal(err)
		}
		r := f.registration(`{"v":3}`)
		r.ServiceID, r.SubjectID = e.service("codes-sandbox-2", live.CapabilityRegister).ID, e.person("Bea").ID
		e.clock.Advance(time.Second)
		got, err := e.store.Accept(e.ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		rec := e.worker(f.stream.ID).Registration
		want := live.Registration{StreamID: f.stream.ID, Report: []byte(`{"v":3}`), ServiceID: r.ServiceID, SubjectID: r.SubjectID, ReceivedAt: got.ReceivedAt}
		if rec == nil || rec.StreamID != want.StreamID || string(rec.Report) != string(want.Report) || rec.ServiceID != want.ServiceID ||
			rec.SubjectID != want.SubjectID || !rec.ReceivedAt.Equal(want.ReceivedAt) {
			t.Fatalf("Worker = %+v, want %+v", rec, want)
		}
	})
	t.Run("ErrNotFound", func(t *testing.T) {
		r := f.registration(`{}`)
		r.StreamID = "x"
		_, err := e.store.Accept(e.ctx, r)
		wantCode(t, err, live.ENOTFOUND)
		wantMessageContains(t, err, `stream "x" not found`)
	})
	for _, tc := range []struct {
		name string
		edit func(*live.Registration)
	}{
		{"ErrInvalidUnknownService", func(r *live.Registration) { r.ServiceID = "svc_missing" }},
		{"ErrInvalidUnknownSubject", func(r *live.Registration) { r.SubjectID = "per_missing" }},
		{"ErrInvalidEmptyReport", func(r *live.Registration) { r.Report = nil }},
		{"ErrInvalidNoService", func(r *live.Registration) { r.ServiceID = "" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := e.worker(f.stream.ID)
			r := f.registration(`{"bad":true}`)
			tc.edit(&r)
			_, err := e.store.Accept(e.ctx, r)
			wantCode(t, err, live.EINVALID)
			if after := e.worker(f.stream.ID); !sameRecord(before, after) {
				t.Fatalf("a refused Accept changed the record: %+v -> %+v", before, after)
			}
		})
	}
}

func (e *env) worker(id string) live.WorkerRecord {
	e.t.Helper()
	rec, err := e.store.Worker(e.ctx, id)
	if err != nil {
		e.t.Fatalf("Worker(%s): %v", id, err)
	}
	return rec
}

func sameRecord(a, b live.WorkerRecord) bool {
	if (a.Registration == nil) != (b.Registration == nil) || (a.Refusal == nil) != (b.Refusal == nil) {
		return false
	}
	if a.Registration != nil && (!bytes.Equal(a.Registration.Report, b.Registration.Report) || !a.Registration.ReceivedAt.Equal(b.Registration.ReceivedAt)) {
		return false
	}
	return a.Refusal == nil || a.Refusal.At.Equal(b.Refusal.At)
}

func testAcceptReportBytes(t *testing.T, e *env) {
	f := e.fixture()
	for _, tc := range reports {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := e.store.Accept(e.ctx, f.registration(tc.body)); err != nil {
				t.Fatal(err)
			}
			rec := e.worker(f.stream.ID)
			if rec.Registration == nil || !bytes.Equal(rec.Registration.Report, []byte(tc.body)) {
				t.Fatalf("stored report differs:\n got %q\nwant %q", rec.Registration.Report, tc.body)
			}
		})
	}
}

var refusalErrors = []agentsandbox.ValidationError{
	{Path: "/isolation", Message: "must have required property 'profile'"},
	{Path: "/isolation/host_network", Message: "must be equal to constant"},
	{Path: "", Message: "unicode ✓ \"quoted\""},
}

var refusalReasons = []string{"the probe sandbox has no egress proxy", "read bubblewrap info: EOF ✓"}

var refusalFacts = map[string]string{"host_network": "true", "workspace": `"persistent ✓"`}

func (f fixture) refusal() live.Refusal {
	return live.Refusal{StreamID: f.stream.ID, ServiceID: f.service.ID, SubjectID: f.owner.ID, Errors: refusalErrors, ErrorsTotal: 25,
		Facts: refusalFacts, Reasons: refusalReasons}
}

func testRefuse(t *testing.T, e *env) {
	f := e.fixture()
	t.Run("OK", func(t *testing.T) {
		if _, err := e.store.Accept(e.ctx, f.registration(`{"v":1}`)); err != nil {
			t.Fatal(err)
		}
		e.clock.Advance(time.Second)
		got, err := e.store.Refuse(e.ctx, f.refusal())
		if err != nil {
			t.Fatal(err)
		}
		checkTime(t, "At", got.At, e.clock.Now())
		rec := e.worker(f.stream.ID)
		if rec.Registration != nil {
			t.Fatalf("registration %+v survived a refusal", rec.Registration)
		}
		r := rec.Refusal
		if r == nil || !r.At.Equal(got.At) || r.ServiceID != f.service.ID || r.SubjectID != f.owner.ID ||
			!slices.Equal(r.Errors, refusalErrors) || r.ErrorsTotal != 25 || !maps.Equal(r.Facts, refusalFacts) || !slices.Equal(r.Reasons, refusalReasons) {
			t.Fatalf("Refusal = %+v, want %+v (of 25), facts %v and reasons %q at %v", r, refusalErrors, refusalFacts, refusalReasons, got.At)
		}
		if h := live.Derive(rec, e.clock.Now(), live.AliveWindow); h.State != live.StateRefused {
			t.Fatalf("state %s, want refused", h.State)
		}
	})
	t.Run("NoReasons", func(t *testing.T) {
		r := f.refusal()
		r.Errors, r.ErrorsTotal, r.Facts, r.Reasons = nil, 0, nil, nil
		if _, err := e.store.Refuse(e.ctx, r); err != nil {
			t.Fatal(err)
		}
		got := e.worker(f.stream.ID).Refusal
		if got == nil || got.Errors == nil || len(got.Errors) != 0 || got.ErrorsTotal != 0 || got.Facts == nil || len(got.Facts) != 0 ||
			got.Reasons == nil || len(got.Reasons) != 0 {
			t.Fatalf("Refusal = %+v, want empty, non-nil errors, facts and reasons", got)
		}
		r.Errors = refusalErrors
		if _, err := e.store.Refuse(e.ctx, r); err != nil {
			t.Fatal(err)
		}
		if got := e.worker(f.stream.ID).Refusal; got == nil || got.ErrorsTotal != len(refusalErrors) {
			t.Fatalf("Refusal = %+v, want errors_total counting its %d errors", got, len(refusalErrors))
		}
	})
	t.Run("ErrNotFound", func(t *testing.T) {
		r := f.refusal()
		r.StreamID = "x"
		_, err := e.store.Refuse(e.ctx, r)
		wantCode(t, err, live.ENOTFOUND)
	})
	t.Run("ErrInvalidUnknownService", func(t *testing.T) {
		if _, err := e.store.Accept(e.ctx, f.registration(`{"v":3}`)); err != nil {
			t.Fatal(err)
		}
		r := f.refusal()
		r.ServiceID = "svc_missing"
		_, err := e.store.Refuse(e.ctx, r)
		wantCode(t, err, live.EINVALID)
		// The refusal failed as a whole: the registration is still there.
		if rec := e.worker(f.stream.ID); rec.Registration == nil || string(rec.Registration.Report) != `{"v":3}` {
			t.Fatalf("a failed Refuse cleared the registration: %+v", rec.Registration)
		}
	})
}

func testAcceptRefuseAccept(t *testing.T, e *env) {
	f := e.fixture()
	steps := []struct {
		refuse bool
		report string
		want   live.State
	}{
		{false, `{"n":1}`, live.StateAlive},
		{true, "", live.StateRefused},
		{false, `{"n":2}`, live.StateAlive},
		{true, "", live.StateRefused},
		{true, "", live.StateRefused},
		{false, `{"n":3}`, live.StateAlive},
	}
	var lastRefusal time.Time
	for i, s := range steps {
		e.clock.Advance(time.Second)
		if s.refuse {
			r, err := e.store.Refuse(e.ctx, f.refusal())
			if err != nil {
				t.Fatalf("step %d: %v", i, err)
			}
			lastRefusal = r.At
		} else if _, err := e.store.Accept(e.ctx, f.registration(s.report)); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		rec := e.worker(f.stream.ID)
		// Derive at a second after the receive time: the store's clock
		// (injected or the database's) decides the receive time.
		now := e.clock.Now()
		if rec.Registration != nil {
			now = rec.Registration.ReceivedAt.Add(time.Second)
		}
		if h := live.Derive(rec, now, live.AliveWindow); h.State != s.want {
			t.Fatalf("step %d: state %s, want %s (record %+v)", i, h.State, s.want, rec)
		}
		if !s.refuse && string(rec.Registration.Report) != s.report {
			t.Fatalf("step %d: report %q, want %q", i, rec.Registration.Report, s.report)
		}
		if !lastRefusal.IsZero() && (rec.Refusal == nil || !rec.Refusal.At.Equal(lastRefusal)) {
			t.Fatalf("step %d: last refusal %+v, want at %v", i, rec.Refusal, lastRefusal)
		}
	}
}

func testWorker(t *testing.T, e *env) {
	f := e.fixture()
	t.Run("Absent", func(t *testing.T) {
		rec := e.worker(f.stream.ID)
		if rec.Registration != nil || rec.Refusal != nil {
			t.Fatalf("new stream has record %+v", rec)
		}
	})
	t.Run("ErrNotFound", func(t *testing.T) {
		_, err := e.store.Worker(e.ctx, "x")
		wantCode(t, err, live.ENOTFOUND)
		wantMessageContains(t, err, `stream "x" not found`)
	})
}

// testConcurrentCheckIns runs many streams checking in at once, some ending
// with a refusal, and checks that every stream holds its own last report.
func testConcurrentCheckIns(t *testing.T, e *env) {
	const streams, rounds = 64, 6
	svc := e.service("codes-sandbox", live.CapabilityRegister)
	fs := make([]fixture, streams)
	for i := range fs {
		owner := e.person(fmt.Sprintf("owner %d", i))
		fs[i] = fixture{owner: owner, stream: e.stream(fmt.Sprintf("s-%02d", i), owner.ID), service: svc}
	}
	var wg sync.WaitGroup
	errs := make(chan error, streams)
	for i, f := range fs {
		wg.Go(func() {
			for k := range rounds {
				if i%4 == 3 && k == rounds-1 {
					if _, err := e.store.Refuse(e.ctx, f.refusal()); err != nil {
						errs <- err
					}
					return
				}
				if _, err := e.store.Accept(e.ctx, f.registration(report(i, k))); err != nil {
					errs <- err
					return
				}
				// A failing write beside the others fails alone.
				bad := f.registration(report(i, k))
				bad.SubjectID = "per_missing"
				if _, err := e.store.Accept(e.ctx, bad); live.ErrorCode(err) != live.EINVALID {
					errs <- fmt.Errorf("accept with unknown subject: %v, want code %s", err, live.EINVALID)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for i, f := range fs {
		rec := e.worker(f.stream.ID)
		if i%4 == 3 {
			if rec.Registration != nil || rec.Refusal == nil || rec.Refusal.SubjectID != f.owner.ID {
				t.Fatalf("stream %d: want refused by its own refusal, got %+v", i, rec)
			}
			continue
		}
		r := rec.Registration
		if r == nil || string(r.Report) != report(i, rounds-1) || r.SubjectID != f.owner.ID || r.StreamID != f.stream.ID {
			t.Fatalf("stream %d: registration %+v, want report %s by %s", i, r, report(i, rounds-1), f.owner.ID)
		}
	}
}

// testCloseWhileWriting closes the store while many streams check in:
// every Accept returns, and after a reopen each stream holds the report of
// its last acknowledged check-in (a check-in still queued at Close fails and
// is not written; one written is acknowledged).
func testCloseWhileWriting(t *testing.T, e *env) {
	const streams = 32
	svc := e.service("codes-sandbox", live.CapabilityRegister)
	owner := e.person("owner")
	fs := make([]fixture, streams)
	for i := range fs {
		fs[i] = fixture{owner: owner, stream: e.stream(fmt.Sprintf("c-%02d", i), owner.ID), service: svc}
	}
	acked := make([]int, streams) // the last acknowledged round, -1 for none
	var wg sync.WaitGroup
	var started sync.WaitGroup
	store := e.store
	for i, f := range fs {
		acked[i] = -1
		started.Add(1)
		wg.Go(func() {
			for k := 0; ; k++ {
				if k == 3 {
					started.Done()
				}
				if _, err := store.Accept(e.ctx, f.registration(report(i, k))); err != nil {
					if k < 3 {
						started.Done()
					}
					return
				}
				acked[i] = k
			}
		})
	}
	started.Wait()
	if err := store.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Accepts still waiting 30 s after Close")
	}
	e.store = e.open(OpenOptions{Now: e.clock.Now, Window: e.window})
	t.Cleanup(func() { _ = e.store.Close() })
	for i, f := range fs {
		rec := e.worker(f.stream.ID)
		if rec.Registration == nil || string(rec.Registration.Report) != report(i, acked[i]) {
			t.Errorf("stream %d: stored %+v, want the last acknowledged report %s", i, rec.Registration, report(i, acked[i]))
		}
	}
}

func report(stream, round int) string {
	return fmt.Sprintf(`{"stream":%d,"round":%d}`, stream, round)
}

// testReopen checks that everything written survives Close and reopen.
func testReopen(t *testing.T, e *env) {
	f := e.fixture()
	tok, secret := e.credential(live.KindServiceToken, f.service.ID, nil)
	other := e.fixture()
	acc, err := e.store.Accept(e.ctx, f.registration(reports[0].body))
	if err != nil {
		t.Fatal(err)
	}
	ref, err := e.store.Refuse(e.ctx, other.refusal())
	if err != nil {
		t.Fatal(err)
	}
	e.reopen()
	e.reopen() // migrations are idempotent
	if got, err := e.store.CredentialByHash(e.ctx, live.HashSecret(secret)); err != nil || got.ID != tok.ID {
		t.Fatalf("credential after reopen: %+v, %v", got, err)
	}
	if got, err := e.store.Service(e.ctx, f.service.ID); err != nil || !got.Has(live.CapabilityRegister) {
		t.Fatalf("service after reopen: %+v, %v", got, err)
	}
	rec := e.worker(f.stream.ID)
	if r := rec.Registration; r == nil || string(r.Report) != reports[0].body || !r.ReceivedAt.Equal(acc.ReceivedAt) {
		t.Fatalf("registration after reopen: %+v, want %+v", r, acc)
	}
	rec = e.worker(other.stream.ID)
	if r := rec.Refusal; r == nil || !r.At.Equal(ref.At) || !slices.Equal(r.Errors, refusalErrors) {
		t.Fatalf("refusal after reopen: %+v, want %+v", r, ref)
	}
}
