// Package storetest is the conformance suite that every live.Store
// implementation runs (live/sqlite, live/postgres): the same cases, the same
// expectations, so the two stores cannot drift apart.
//
// A store's _test.go calls Run with a function that makes a test's own
// database and says how to open the store on it, and its benchmark calls
// BenchmarkAccept, so the stores' figures compare.
package storetest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"openvibe.network/agentsandbox/internal/fakeclock"
	"openvibe.network/agentsandbox/live"
)

// OpenFunc opens the store under test on one database with o; it fails the
// test that made the database when it cannot. The suite closes every store
// it opens; Close must tolerate a second call.
type OpenFunc func(o OpenOptions) live.Store

// OpenOptions are the store options the suite sets.
type OpenOptions struct {
	// Now is the clock a store that keeps its own clock (as live/sqlite
	// does) takes its times from; a store on its database's clock ignores
	// it.
	Now func() time.Time
	// Window is the alive window the store's history follows.
	Window time.Duration
	// HistoryMaxAge and HistoryMaxRows bound each stream's history (0: the
	// live package's bounds).
	HistoryMaxAge  time.Duration
	HistoryMaxRows int
}

// Traits say how the store under test keeps time.
type Traits struct {
	// DatabaseClock: the store takes every time from its database's clock
	// (as live/postgres does), so the suite lets real time pass where it
	// needs time to pass, with a short alive window.
	DatabaseClock bool
}

// NewFunc makes a fresh, empty database for t and returns the OpenFunc that
// opens the store on it. The suite calls that OpenFunc again (after closing
// the previous store) to check that data survives a reopen.
type NewFunc func(t *testing.T) OpenFunc

// Run runs every conformance case, each on its own database that newDB
// makes.
func Run(t *testing.T, newDB NewFunc, traits Traits) {
	for _, c := range []struct {
		name string
		run  func(*testing.T, *env)
	}{
		{"Person", testPerson},
		{"Stream", testStream},
		{"Service", testService},
		{"Credential", testCredential},
		{"CredentialByHash", testCredentialByHash},
		{"RevokeCredential", testRevokeCredential},
		{"ListCredentials", testListCredentials},
		{"Accept", testAccept},
		{"AcceptReportBytes", testAcceptReportBytes},
		{"Refuse", testRefuse},
		{"AcceptRefuseAccept", testAcceptRefuseAccept},
		{"Worker", testWorker},
		{"ConcurrentCheckIns", testConcurrentCheckIns},
		{"CloseWhileWriting", testCloseWhileWriting},
		{"Reopen", testReopen},
		{"ListStreamsOwnedBy", testListStreamsOwnedBy},
		{"SetCapability", testSetCapability},
		{"DeletePerson", testDeletePerson},
		{"DeleteStream", testDeleteStream},
		{"DeleteService", testDeleteService},
		{"RevokeSessions", testRevokeSessions},
		{"ConsumeLoginTicket", testConsumeLoginTicket},
		{"TouchCredential", testTouchCredential},
		{"LookupCheckIn", testLookupCheckIn},
		{"History", testHistory},
		{"HistoryPruned", testHistoryPruned},
		{"CountStates", testCountStates},
		{"Probe", testProbe},
		{"AuthEpoch", testAuthEpoch},
		{"TwoStores", testTwoStores},
		{"TextNoStoreCanHold", testTextNoStoreCanHold},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.run(t, newEnv(t, newDB(t), traits))
		})
	}
}

// fakeEpoch is the suite's clock start: far from the wall clock, so a time
// taken from the database's clock cannot be mistaken for it.
var fakeEpoch = time.Date(2031, 2, 3, 4, 5, 6, 123456789, time.UTC)

// env is one case's store, clock and context.
type env struct {
	t      *testing.T
	open   OpenFunc
	traits Traits
	window time.Duration // the store's alive window
	// historyAge and historyRows are the history bounds the store is opened
	// with (0: the defaults).
	historyAge  time.Duration
	historyRows int
	clock       *fakeclock.Clock
	store       live.Store
	ctx         context.Context
}

// dbClockWindow is the alive window of a store on its database's clock:
// short, so that a case lets it pass in real time.
const dbClockWindow = 500 * time.Millisecond

func newEnv(t *testing.T, open OpenFunc, traits Traits) *env {
	e := &env{t: t, open: open, traits: traits, window: live.AliveWindow, clock: fakeclock.New(fakeEpoch), ctx: t.Context()}
	if traits.DatabaseClock {
		e.window = dbClockWindow
	}
	e.reopen()
	return e
}

// pass lets d go by for the store: on the injected clock, or in real time
// for a store on its database's clock.
func (e *env) pass(d time.Duration) {
	e.clock.Advance(d)
	if e.traits.DatabaseClock {
		time.Sleep(d)
	}
}

// reopen closes the current store (if any) and opens the same database.
func (e *env) reopen() {
	e.t.Helper()
	if e.store != nil {
		if err := e.store.Close(); err != nil {
			e.t.Fatalf("close store: %v", err)
		}
	}
	s := e.open(OpenOptions{Now: e.clock.Now, Window: e.window, HistoryMaxAge: e.historyAge, HistoryMaxRows: e.historyRows})
	e.t.Cleanup(func() { _ = s.Close() })
	e.store = s
}

// checkTime fails unless got is the suite's clock reading want (a store with
// its own clock) or close to the wall clock (a store that uses its
// database's clock, which runs on this machine).
func checkTime(tb testing.TB, what string, got, want time.Time) {
	tb.Helper()
	if got.Equal(want) {
		return
	}
	if d := time.Since(got); d < -time.Minute || d > time.Minute {
		tb.Fatalf("%s = %v: neither the injected clock (%v) nor the database's clock (now %v)", what, got, want, time.Now())
	}
}

// wantCode fails unless err carries the live error code.
func wantCode(tb testing.TB, err error, code string) {
	tb.Helper()
	if got := live.ErrorCode(err); got != code {
		tb.Fatalf("error %v has code %q, want %q", err, got, code)
	}
	var le *live.Error
	if !errors.As(err, &le) || le.Message == "" {
		tb.Fatalf("error %v is not a *live.Error with a message", err)
	}
}

// wantMessageContains fails unless err's message names s.
func wantMessageContains(tb testing.TB, err error, s string) {
	tb.Helper()
	if !strings.Contains(live.ErrorMessage(err), s) {
		tb.Fatalf("error message %q does not mention %q", live.ErrorMessage(err), s)
	}
}

// fixture is a person who owns a stream, and a first-party service.
type fixture struct {
	owner   live.Person
	stream  live.Stream
	service live.Service
}

func (e *env) person(name string) live.Person {
	e.t.Helper()
	p, err := e.store.CreatePerson(e.ctx, live.Person{Name: name})
	if err != nil {
		e.t.Fatalf("create person: %v", err)
	}
	return p
}

func (e *env) stream(id, owner string) live.Stream {
	e.t.Helper()
	s, err := e.store.CreateStream(e.ctx, live.Stream{ID: id, OwnerID: owner})
	if err != nil {
		e.t.Fatalf("create stream: %v", err)
	}
	return s
}

func (e *env) service(name string, caps ...string) live.Service {
	e.t.Helper()
	s, err := e.store.CreateService(e.ctx, live.Service{Name: name, FirstParty: true, Capabilities: caps})
	if err != nil {
		e.t.Fatalf("create service: %v", err)
	}
	return s
}

func (e *env) fixture() fixture {
	e.t.Helper()
	owner := e.person("Ada")
	return fixture{
		owner:   owner,
		stream:  e.stream("", owner.ID),
		service: e.service("codes-sandbox", live.CapabilityRegister),
	}
}

func (f fixture) registration(report string) live.Registration {
	return live.Registration{StreamID: f.stream.ID, Report: []byte(report), ServiceID: f.service.ID, SubjectID: f.owner.ID}
}
