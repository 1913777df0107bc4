package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"openvibe.network/agentsandbox/internal/fakeclock"
	"openvibe.network/agentsandbox/internal/testenv"
	"openvibe.network/agentsandbox/live"
	"openvibe.network/agentsandbox/live/postgres"
	"openvibe.network/agentsandbox/live/postgres/pgtest"
	"openvibe.network/agentsandbox/live/sqlite"
)

// epoch is the tests' clock start.
var epoch = time.Date(2030, 5, 6, 7, 8, 9, 0, time.UTC)

// backend is a store implementation the tests run against.
type backend struct {
	name string
	// open opens a store on the test's own database, taking receive times
	// from now unless the store uses its database's clock.
	open func(tb testing.TB, now func() time.Time) live.Store
	// dbClock says the store takes receive times from its database's
	// clock, so the server's clock starts at the wall clock, not at epoch.
	dbClock bool
}

var (
	sqliteBackend   = backend{name: "SQLite", open: openSQLite}
	postgresBackend = backend{name: "PostgreSQL", open: openPostgres, dbClock: true}
)

// eachBackend runs test once per store implementation. PostgreSQL runs when
// testenv.PostgresDSN finds a database (and must, when CI is set).
func eachBackend(t *testing.T, test func(t *testing.T, b backend)) {
	for _, b := range []backend{sqliteBackend, postgresBackend} {
		t.Run(b.name, func(t *testing.T) { test(t, b) })
	}
}

// openSQLite opens a fresh SQLite store in tb's temporary directory.
func openSQLite(tb testing.TB, now func() time.Time) live.Store {
	tb.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(tb.TempDir(), "live.db"), sqlite.Options{Now: now})
	if err != nil {
		tb.Fatalf("open sqlite: %v", err)
	}
	tb.Cleanup(func() { _ = st.Close() })
	return st
}

// openPostgres opens a PostgreSQL store in a fresh schema, dropped when tb
// ends. The store keeps the database's clock, so now is unused.
func openPostgres(tb testing.TB, _ func() time.Time) live.Store {
	tb.Helper()
	dsn := testenv.PostgresDSN(tb)
	schema := pgtest.Schema(tb, dsn, "httpapi_test_")
	st, err := postgres.Open(context.Background(), dsn, postgres.Options{Schema: schema})
	if err != nil {
		tb.Fatalf("open postgres: %v", err)
	}
	tb.Cleanup(func() { _ = st.Close() })
	return st
}

// fixture is a real server over a real store with the principals the
// answer table needs. secrets maps a credential's name to its secret.
type fixture struct {
	store    live.Store
	clock    *fakeclock.Clock
	srv      *httptest.Server
	handler  http.Handler
	reg      *prometheus.Registry
	logs     chan []byte // one JSON log line per request (nil: logs discarded)
	owner    string      // owns stream
	other    string      // owns otherStream
	stream   string
	other2   string // otherStream
	services map[string]string
	secrets  map[string]string
}

// fixtureOptions select what a fixture logs and how long it waits for
// its store.
type fixtureOptions struct {
	logs         bool          // collect log lines in fixture.logs
	storeTimeout time.Duration // Config.StoreTimeout
}

func newFixture(tb testing.TB, b backend, opts fixtureOptions) *fixture {
	tb.Helper()
	f := &fixture{clock: fakeclock.New(epoch), reg: prometheus.NewRegistry(), secrets: map[string]string{}, services: map[string]string{}}
	if b.dbClock {
		f.clock.Set(time.Now().UTC().Truncate(time.Second))
	}
	f.store = b.open(tb, f.clock.Now)
	cfg := Config{Store: f.store, Now: f.clock.Now, Registerer: f.reg, Gatherer: f.reg, StoreTimeout: opts.storeTimeout}
	if opts.logs {
		f.logs = make(chan []byte, 4096)
		cfg.Logger = slog.New(slog.NewJSONHandler(chanWriter(f.logs), nil))
	}
	srv, err := New(cfg)
	if err != nil {
		tb.Fatalf("new server: %v", err)
	}
	f.handler = srv.Handler()
	f.srv = httptest.NewServer(f.handler)
	tb.Cleanup(f.srv.Close)
	f.populate(tb)
	return f
}

// populate creates persons, streams, services and one credential of each
// kind the table needs.
func (f *fixture) populate(tb testing.TB) {
	tb.Helper()
	ctx := context.Background()
	f.owner, f.other = f.person(tb, "Owner"), f.person(tb, "Other")
	f.stream, f.other2 = f.newStream(tb, f.owner), f.newStream(tb, f.other)
	for _, s := range []struct {
		name       string
		firstParty bool
		caps       []string
	}{
		{"worker", true, []string{"live.other", live.CapabilityRegister}},
		{"third_party", false, []string{live.CapabilityRegister}},
		{"no_capability", true, []string{"live.other"}},
	} {
		svc, err := f.store.CreateService(ctx, live.Service{Name: s.name, FirstParty: s.firstParty, Capabilities: s.caps})
		if err != nil {
			tb.Fatalf("create service: %v", err)
		}
		f.services[s.name] = svc.ID
	}
	past := f.clock.Now().Add(-time.Second)
	f.credential(tb, "service", live.Credential{Kind: live.KindServiceToken, ServiceID: f.services["worker"]})
	f.credential(tb, "service_expired", live.Credential{Kind: live.KindServiceToken, ServiceID: f.services["worker"], ExpiresAt: &past})
	revoked := f.credential(tb, "service_revoked", live.Credential{Kind: live.KindServiceToken, ServiceID: f.services["worker"]})
	if err := f.store.RevokeCredential(ctx, revoked); err != nil {
		tb.Fatalf("revoke: %v", err)
	}
	f.credential(tb, "third_party", live.Credential{Kind: live.KindServiceToken, ServiceID: f.services["third_party"]})
	f.credential(tb, "no_capability", live.Credential{Kind: live.KindServiceToken, ServiceID: f.services["no_capability"]})
	f.credential(tb, "person", live.Credential{Kind: live.KindPersonToken, PersonID: f.owner})
	f.credential(tb, "desk", live.Credential{Kind: live.KindDeskTicket, PersonID: f.owner})
	f.credential(tb, "session", live.Credential{Kind: live.KindSession, PersonID: f.owner})
	f.credential(tb, "other_person", live.Credential{Kind: live.KindPersonToken, PersonID: f.other})
	f.credential(tb, "other_session", live.Credential{Kind: live.KindSession, PersonID: f.other})
	revokedPerson := f.credential(tb, "person_revoked", live.Credential{Kind: live.KindPersonToken, PersonID: f.owner})
	if err := f.store.RevokeCredential(ctx, revokedPerson); err != nil {
		tb.Fatalf("revoke: %v", err)
	}
}

// credential stores c under a fresh secret named name and returns its id.
func (f *fixture) credential(tb testing.TB, name string, c live.Credential) string {
	tb.Helper()
	secret, hash, err := live.NewSecret(c.Kind)
	if err != nil {
		tb.Fatalf("new secret: %v", err)
	}
	c.Hash = hash
	c, err = f.store.CreateCredential(context.Background(), c)
	if err != nil {
		tb.Fatalf("create credential %s: %v", name, err)
	}
	f.secrets[name] = secret
	return c.ID
}

// person creates a person named name and returns its id.
func (f *fixture) person(tb testing.TB, name string) string {
	tb.Helper()
	p, err := f.store.CreatePerson(context.Background(), live.Person{Name: name})
	if err != nil {
		tb.Fatalf("create person: %v", err)
	}
	return p.ID
}

// newStream creates a stream owned by owner and returns its id.
func (f *fixture) newStream(tb testing.TB, owner string) string {
	tb.Helper()
	st, err := f.store.CreateStream(context.Background(), live.Stream{OwnerID: owner})
	if err != nil {
		tb.Fatalf("create stream: %v", err)
	}
	return st.ID
}

// chanWriter sends each write (one log record each) to a channel.
type chanWriter chan []byte

func (c chanWriter) Write(p []byte) (int, error) {
	c <- append([]byte(nil), p...)
	return len(p), nil
}

// nextLog returns the next request's log line, parsed.
func (f *fixture) nextLog(tb testing.TB) map[string]any {
	tb.Helper()
	select {
	case line := <-f.logs:
		f.assertNoSecret(tb, "log line", line)
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			tb.Fatalf("log line %q: %v", line, err)
		}
		return m
	case <-time.After(30 * time.Second):
		tb.Fatal("no log line within 30 s")
	}
	return nil
}

// assertNoSecret fails tb if data contains any of the fixture's secrets.
func (f *fixture) assertNoSecret(tb testing.TB, what string, data []byte) {
	tb.Helper()
	for name, s := range f.secrets {
		if bytes.Contains(data, []byte(s)) {
			tb.Errorf("%s contains the secret %s: %s", what, name, data)
		}
	}
}

// req describes one request to the fixture's server.
type req struct {
	method  string
	path    string
	headers map[string]string // "" value: header not sent
	subject []string          // X-OV-Subject values
	cookies []string          // ov_session values
	body    io.Reader
}

// do sends r and returns the status and body.
func (f *fixture) do(tb testing.TB, r req) (int, []byte) {
	tb.Helper()
	hr, err := http.NewRequest(r.method, f.srv.URL+r.path, r.body)
	if err != nil {
		tb.Fatalf("new request: %v", err)
	}
	for k, v := range r.headers {
		if v != "" {
			hr.Header.Set(k, v)
		}
	}
	for _, s := range r.subject {
		hr.Header.Add(SubjectHeader, s)
	}
	for _, c := range r.cookies {
		hr.AddCookie(&http.Cookie{Name: SessionCookie, Value: c})
	}
	resp, err := f.srv.Client().Do(hr)
	if err != nil {
		tb.Fatalf("%s %s: %v", r.method, r.path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatalf("read body: %v", err)
	}
	f.assertNoSecret(tb, "body", body)
	return resp.StatusCode, body
}

// checkIn posts body for stream with the service token, the owner as
// subject and application/json.
func (f *fixture) checkIn(tb testing.TB, stream string, body []byte) (int, []byte) {
	tb.Helper()
	return f.do(tb, req{method: "POST", path: checkInPath(stream), body: bytes.NewReader(body), subject: []string{f.owner},
		headers: map[string]string{"Authorization": "Bearer " + f.secrets["service"], "Content-Type": "application/json"}})
}

// ownerView gets the owner's JSON view of stream with the owner's token.
func (f *fixture) ownerView(tb testing.TB, stream string) ownerViewJSON {
	tb.Helper()
	status, body := f.do(tb, req{method: "GET", path: checkInPath(stream), headers: map[string]string{"Authorization": "Bearer " + f.secrets["person"]}})
	if status != http.StatusOK {
		tb.Fatalf("owner view: %d %s", status, body)
	}
	var v ownerViewJSON
	if err := json.Unmarshal(body, &v); err != nil {
		tb.Fatalf("owner view %s: %v", body, err)
	}
	return v
}

// ownerViewJSON is the owner's view as a client reads it.
type ownerViewJSON struct {
	State      string          `json:"state"`
	Reason     string          `json:"reason"`
	ReceivedAt *time.Time      `json:"received_at"`
	AgeSeconds *float64        `json:"age_seconds"`
	AliveUntil *time.Time      `json:"alive_until"`
	Report     json.RawMessage `json:"report"`
	Refusal    *struct {
		At        time.Time `json:"at"`
		ServiceID string    `json:"service_id"`
		SubjectID string    `json:"subject_id"`
		Errors    []struct {
			Path    string `json:"path"`
			Message string `json:"message"`
		} `json:"errors"`
	} `json:"refusal"`
}

// hasReport reports whether the view carries a report (not null).
func (v ownerViewJSON) hasReport() bool { return len(v.Report) > 0 && string(v.Report) != "null" }

func checkInPath(stream string) string { return "/api/streams/agent/" + stream + "/plays/worker" }

// validReport is the seed's full worker check-in fixture.
func validReport(tb testing.TB) []byte {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "worker-check-in.json"))
	if err != nil {
		tb.Fatalf("read fixture: %v", err)
	}
	return b
}

// isolationOnly is the smallest valid report.
const isolationOnly = `{"isolation":{"host_network":false,"credentials":false,"profile":false,"egress_proxy":true,"workspace":"ephemeral"}}`

// noProfile is the seed's rejected fixture without the profile fact.
const noProfile = `{"isolation":{"host_network":false,"credentials":false,"egress_proxy":true,"workspace":"ephemeral"}}`

// padTo returns report padded with trailing spaces inside the object to
// exactly n bytes.
func padTo(tb testing.TB, report string, n int) []byte {
	tb.Helper()
	i := strings.LastIndexByte(report, '}')
	if i < 0 || len(report) > n {
		tb.Fatalf("cannot pad %d bytes to %d", len(report), n)
	}
	return []byte(report[:i] + strings.Repeat(" ", n-len(report)) + report[i:])
}
