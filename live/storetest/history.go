package storetest

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"openvibe.network/agentsandbox/live"
)

// history returns the stream's whole recorded history.
func (e *env) history(stream string) []live.Transition {
	e.t.Helper()
	h, err := e.store.History(e.ctx, stream, time.Time{})
	if err != nil {
		e.t.Fatalf("History(%s): %v", stream, err)
	}
	return h
}

// wantHistory fails unless the stream's history is want.
func (e *env) wantHistory(tb testing.TB, stream string, want []live.Transition) {
	tb.Helper()
	got := e.history(stream)
	if len(got) == 0 && len(want) == 0 {
		return
	}
	if !reflect.DeepEqual(got, want) {
		tb.Fatalf("history of %s:\n got %+v\nwant %+v", stream, got, want)
	}
}

func testLookupCheckIn(t *testing.T, e *env) {
	f := e.fixture()
	other := e.person("Bob")
	tok, secret := e.credential(live.KindServiceToken, f.service.ID, nil)
	per, perSecret := e.credential(live.KindPersonToken, f.owner.ID, nil)
	for _, tc := range []struct {
		name             string
		secret           string
		stream, subject  string
		cred             string // credential id, "" none
		service, streamV bool
		known            bool
	}{
		{"All", secret, f.stream.ID, f.owner.ID, tok.ID, true, true, true},
		{"OtherSubject", secret, f.stream.ID, other.ID, tok.ID, true, true, true},
		{"UnknownSubject", secret, f.stream.ID, "per_missing", tok.ID, true, true, false},
		{"UnknownStream", secret, "missing", f.owner.ID, tok.ID, true, false, true},
		{"UnknownSecret", "ovs_nope", f.stream.ID, f.owner.ID, "", false, true, true},
		{"PersonToken", perSecret, f.stream.ID, f.owner.ID, per.ID, false, true, true},
		{"Nothing", "", "", "", "", false, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := e.store.LookupCheckIn(e.ctx, live.HashSecret(tc.secret), tc.stream, tc.subject)
			if err != nil {
				t.Fatal(err)
			}
			if got := l.Credential != nil; got != (tc.cred != "") || got && (l.Credential.ID != tc.cred || l.Credential.Hash != live.HashSecret(tc.secret)) {
				t.Fatalf("Credential = %+v, want %q", l.Credential, tc.cred)
			}
			if tc.cred == tok.ID && (l.Credential.Kind != live.KindServiceToken || l.Credential.ServiceID != f.service.ID || l.Credential.RevokedAt != nil) {
				t.Fatalf("Credential = %+v, want the service token %+v", l.Credential, tok)
			}
			if got := l.Service != nil; got != tc.service || got && !reflect.DeepEqual(*l.Service, f.service) {
				t.Fatalf("Service = %+v, want %v (%+v)", l.Service, tc.service, f.service)
			}
			if got := l.Stream != nil; got != tc.streamV || got && (l.Stream.ID != f.stream.ID || l.Stream.OwnerID != f.owner.ID || !l.Stream.CreatedAt.Equal(f.stream.CreatedAt)) {
				t.Fatalf("Stream = %+v, want %v (%+v)", l.Stream, tc.streamV, f.stream)
			}
			if l.SubjectKnown != tc.known {
				t.Fatalf("SubjectKnown = %v, want %v", l.SubjectKnown, tc.known)
			}
		})
	}
}

// testHistory runs a stream through every transition and checks its
// history against the rules (live.AcceptTransitions, ClearTransitions) fed
// with the times the store answered, so that it holds on a store's own
// clock, however long each step takes.
func testHistory(t *testing.T, e *env) {
	f := e.fixture()
	w := e.window
	var want []live.Transition
	var previous *time.Time // the current registration's receive time
	var wasDegraded bool    // and whether its report showed a problem
	lastState := func() live.State {
		if len(want) == 0 {
			return ""
		}
		return want[len(want)-1].State
	}
	accept := func(degraded bool) time.Time {
		t.Helper()
		reg := f.registration(`{}`)
		reg.Degraded = degraded
		r, err := e.store.Accept(e.ctx, reg)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, live.AcceptTransitions(previous, wasDegraded, r.ReceivedAt, w, degraded)...)
		previous, wasDegraded = &r.ReceivedAt, degraded
		e.wantHistory(t, f.stream.ID, want)
		if rec := e.worker(f.stream.ID); rec.Registration == nil || rec.Registration.Degraded != degraded {
			t.Fatalf("registration %+v, want degraded %v", rec.Registration, degraded)
		}
		return r.ReceivedAt
	}
	refuse := func() time.Time {
		t.Helper()
		r, err := e.store.Refuse(e.ctx, f.refusal())
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, live.ClearTransitions(previous, lastState(), r.At, w, live.StateRefused)...)
		previous = nil
		e.wantHistory(t, f.stream.ID, want)
		return r.At
	}
	e.wantHistory(t, f.stream.ID, nil)
	r1 := accept(false) // alive
	e.pass(w / 6)
	accept(false) // still alive: nothing new (on a store's own clock, unless a step took w)
	e.pass(w / 6)
	accept(true) // degraded
	e.pass(w / 6)
	accept(true) // still degraded: nothing new
	e.pass(w / 6)
	accept(false) // alive again
	e.pass(w + w/3)
	r3 := accept(false) // stale since the last check-in + w, then alive again
	e.pass(w / 3)
	refuse() // refused
	e.pass(w / 3)
	refuse()     // still refused: nothing new
	accept(true) // degraded from the start
	e.pass(w + w/3)
	f3 := refuse() // stale, then refused
	if !e.traits.DatabaseClock && len(want) != 9 {
		t.Fatalf("the pinned clock gave %d transitions, want 9: %+v", len(want), want)
	}

	t.Run("Since", func(t *testing.T) {
		// From just after r3: the last transition before (alive at r3)
		// comes first, then the rest.
		k := slices.Index(want, live.Transition{At: r3, State: live.StateAlive})
		if k < 0 {
			t.Fatalf("no alive transition at %v in %+v", r3, want)
		}
		got, err := e.store.History(e.ctx, f.stream.ID, r3.Add(time.Microsecond))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want[k:]) {
			t.Fatalf("History since r3 = %+v, want %+v", got, want[k:])
		}
		got, err = e.store.History(e.ctx, f.stream.ID, f3.Add(time.Hour))
		if err != nil || !reflect.DeepEqual(got, want[len(want)-1:]) {
			t.Fatalf("History after the last = %+v, %v; want the last alone", got, err)
		}
	})
	t.Run("Timeline", func(t *testing.T) {
		segs := live.Timeline(e.history(f.stream.ID), e.worker(f.stream.ID), f.stream.CreatedAt, r1, f3.Add(time.Second), w)
		var states, wantStates []live.State
		for _, s := range segs {
			states = append(states, s.State)
		}
		for _, tr := range want {
			if len(wantStates) == 0 || wantStates[len(wantStates)-1] != tr.State {
				wantStates = append(wantStates, tr.State)
			}
		}
		if !reflect.DeepEqual(states, wantStates) {
			t.Fatalf("timeline states %v, want %v (%+v)", states, wantStates, segs)
		}
	})
	t.Run("ErrNotFound", func(t *testing.T) {
		_, err := e.store.History(e.ctx, "missing", time.Time{})
		wantCode(t, err, live.ENOTFOUND)
	})
}

// testHistoryPruned opens the store with small history bounds and checks
// that old and surplus transitions go.
func testHistoryPruned(t *testing.T, e *env) {
	e.historyRows = 4
	e.historyAge = 1000 * e.window
	e.reopen()
	f := e.fixture()
	var last []live.Transition
	for range 4 { // each run adds alive (and, after the first, stale)
		r, err := e.store.Accept(e.ctx, f.registration(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		last = append(last, live.AcceptTransitions(prevOf(last), false, r.ReceivedAt, e.window, false)...)
		e.pass(e.window + e.window/3)
	}
	if h := e.history(f.stream.ID); !reflect.DeepEqual(h, last[len(last)-4:]) {
		t.Fatalf("history %+v, want the last 4 of %+v", h, last)
	}
	t.Run("ByAge", func(t *testing.T) {
		e.historyRows, e.historyAge = 0, 2*e.window
		e.reopen()
		e.pass(2 * e.window)
		r, err := e.store.Accept(e.ctx, f.registration(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		// Everything older than 2 windows before this accept is gone.
		var want []live.Transition
		for _, tr := range append(last, live.AcceptTransitions(prevOf(last), false, r.ReceivedAt, e.window, false)...) {
			if !tr.At.Before(r.ReceivedAt.Add(-2 * e.window)) {
				want = append(want, tr)
			}
		}
		if h := e.history(f.stream.ID); !reflect.DeepEqual(h, want) {
			t.Fatalf("history %+v, want %+v", h, want)
		}
	})
}

// prevOf returns the receive time a next accept replaces, as far as ts
// (the transitions of alive runs of one check-in each) shows it: the last
// alive transition, or nil for none.
func prevOf(ts []live.Transition) *time.Time {
	for i := len(ts) - 1; i >= 0; i-- {
		if ts[i].State == live.StateAlive {
			at := ts[i].At
			return &at
		}
	}
	return nil
}

func testCountStates(t *testing.T, e *env) {
	svc := e.service("w", live.CapabilityRegister)
	owner := e.person("Ada")
	streams := map[string]live.Stream{}
	for _, id := range []string{"stale", "alive", "refused", "absent", "absent2"} {
		streams[id] = e.stream(id, owner.ID)
	}
	reg := func(id string) live.Registration {
		return live.Registration{StreamID: id, Report: []byte(`{}`), ServiceID: svc.ID, SubjectID: owner.ID}
	}
	staleAt, err := e.store.Accept(e.ctx, reg("stale"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.Refuse(e.ctx, live.Refusal{StreamID: "refused", ServiceID: svc.ID, SubjectID: owner.ID}); err != nil {
		t.Fatal(err)
	}
	e.pass(100 * time.Millisecond)
	aliveAt, err := e.store.Accept(e.ctx, reg("alive"))
	if err != nil {
		t.Fatal(err)
	}
	// At the second accept, with a window half the time between them: the
	// first is stale, the second alive.
	window := aliveAt.ReceivedAt.Sub(staleAt.ReceivedAt) / 2
	got, err := e.store.CountStates(e.ctx, aliveAt.ReceivedAt, window)
	if err != nil {
		t.Fatal(err)
	}
	want := map[live.State]int{live.StateAlive: 1, live.StateStale: 1, live.StateRefused: 1, live.StateAbsent: 2}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("CountStates = %v, want %v", got, want)
	}
}

func testProbe(t *testing.T, e *env) {
	for range 3 {
		if err := e.store.Probe(e.ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// testTwoStores checks a stream checked in through two stores on one
// database (two Live processes on one SQLite file, or two instances on one
// PostgreSQL), each of which wrote the stream before the other's write:
// its registration, its subject and its history are what the writes made,
// whatever a store remembers of its own last write.
func testTwoStores(t *testing.T, e *env) {
	f := e.fixture()
	other := e.person("Grace")
	a := e.store
	b := e.open(OpenOptions{Now: e.clock.Now, Window: e.window, HistoryMaxAge: e.historyAge, HistoryMaxRows: e.historyRows})
	t.Cleanup(func() { _ = b.Close() })
	w := e.window
	var want []live.Transition
	var previous *time.Time
	var wasDegraded bool
	check := func(s live.Store, r live.Registration, wantSubject string) {
		t.Helper()
		got, err := s.Accept(e.ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, live.AcceptTransitions(previous, wasDegraded, got.ReceivedAt, w, r.Degraded)...)
		previous, wasDegraded = &got.ReceivedAt, r.Degraded
		e.wantHistory(t, f.stream.ID, want)
		rec := e.worker(f.stream.ID)
		if rec.Registration == nil || string(rec.Registration.Report) != string(r.Report) || rec.Registration.Degraded != r.Degraded ||
			!rec.Registration.ReceivedAt.Equal(got.ReceivedAt) || rec.Registration.SubjectID != wantSubject {
			t.Fatalf("registration %+v, want the report %s from %s at %v", rec.Registration, r.Report, wantSubject, got.ReceivedAt)
		}
	}
	degraded := func(r live.Registration) live.Registration {
		r.Degraded = true
		return r
	}
	check(a, f.registration(`{"n":1}`), f.owner.ID) // alive
	e.pass(w + w/3)
	check(b, f.registration(`{"n":2}`), f.owner.ID) // stale, then alive again
	e.pass(w / 3)
	check(a, f.registration(`{"n":3}`), f.owner.ID) // alive since b's: nothing new
	e.pass(w / 3)
	byOther := f.registration(`{"n":4}`)
	byOther.SubjectID = other.ID
	check(b, byOther, other.ID) // another subject
	e.pass(w / 3)
	check(a, f.registration(`{"n":5}`), f.owner.ID) // the owner again
	e.pass(w / 3)
	byOther.Report = []byte(`{"n":6}`)
	check(a, byOther, other.ID) // another subject, through the store that wrote last
	e.pass(w / 3)
	check(a, f.registration(`{"n":7}`), f.owner.ID)
	check(b, degraded(f.registration(`{"n":7.1}`)), f.owner.ID) // degraded, written by the store that did not write last
	check(a, f.registration(`{"n":7.2}`), f.owner.ID)           // alive again: the row is not what a wrote last
	check(a, degraded(f.registration(`{"n":7.3}`)), f.owner.ID) // degraded, through the store that wrote last
	ref, err := b.Refuse(e.ctx, f.refusal())
	if err != nil {
		t.Fatal(err)
	}
	want = append(want, live.ClearTransitions(previous, want[len(want)-1].State, ref.At, w, live.StateRefused)...)
	previous = nil
	e.pass(w / 3)
	check(a, f.registration(`{"n":8}`), f.owner.ID) // alive after the refusal
	if !e.traits.DatabaseClock && len(want) != 8 {
		t.Fatalf("the pinned clock gave %d transitions, want 8: %+v", len(want), want)
	}
}
