package httpapi

import (
	"context"
	"database/sql"
	"encoding/json"
	"io"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"openvibe.network/agentsandbox/internal/testenv"
	"openvibe.network/agentsandbox/live"
	"openvibe.network/agentsandbox/live/postgres"
	"openvibe.network/agentsandbox/live/postgres/pgtest"
	"openvibe.network/agentsandbox/live/sqlite"
)

// testStoreTimeout is the store timeout of the tests below: short, so that
// they run fast; the bound they check is relative to it.
const testStoreTimeout = 500 * time.Millisecond

// wantUnavailableInTime sends r and checks that it is answered 503
// unavailable, saying the database did not answer within the store
// timeout, within twice the timeout (plus a second for a loaded machine).
func wantUnavailableInTime(t *testing.T, f *fixture, name string, r req) {
	t.Helper()
	start := time.Now()
	status, body := f.do(t, r)
	took := time.Since(start)
	if limit := 2*testStoreTimeout + time.Second; took > limit {
		t.Errorf("%s took %s, want at most %s", name, took, limit)
	}
	var e errorBody
	isJSON := json.Unmarshal(body, &e) == nil
	if status != 503 || (isJSON && e.Error.Code != live.EUNAVAILABLE) || !strings.Contains(string(body), "did not answer within 0.5 s") {
		t.Errorf("%s: %d %s; want 503 unavailable saying the database did not answer within 0.5 s", name, status, body)
	}
}

// TestSQLiteLockHeld: while another process holds SQLite's write lock, a
// check-in is answered 503 within the store timeout, not after SQLite's
// busy timeout; once the lock is released, the next check-in is stored.
func TestSQLiteLockHeld(t *testing.T) {
	path := filepath.Join(t.TempDir(), "live.db")
	b := backend{name: "SQLite", open: func(tb testing.TB, now func() time.Time) live.Store {
		st, err := sqlite.Open(context.Background(), path, sqlite.Options{Now: now})
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { _ = st.Close() })
		return st
	}}
	f := newFixture(t, b, fixtureOptions{storeTimeout: testStoreTimeout, logs: true})
	if status, body := f.checkIn(t, f.stream, validReport(t)); status != 200 {
		t.Fatalf("check in: %d %s", status, body)
	}
	defer func() {
		for len(f.logs) > 0 {
			if line := <-f.logs; t.Failed() {
				t.Logf("%s", line)
			}
		}
	}()
	other, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	conn, err := other.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(t.Context(), "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	checkIn := req{method: "POST", path: checkInPath(f.stream), subject: []string{f.owner},
		headers: map[string]string{"Authorization": "Bearer " + f.secrets["service"], "Content-Type": "application/json"}}
	var wg sync.WaitGroup
	for i := range 3 { // one at a time and several at once: each within its own time
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := checkIn
			r.body = strings.NewReader(string(validReport(t)))
			wantUnavailableInTime(t, f, "check-in "+string(rune('a'+i)), r)
		}()
	}
	wg.Wait()
	wantUnavailableInTime(t, f, "healthz", req{method: "GET", path: "/healthz"})
	if _, err := conn.ExecContext(t.Context(), "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	if status, body := f.checkIn(t, f.stream, validReport(t)); status != 200 {
		t.Fatalf("check in once the lock is released: %d %s", status, body)
	}
}

// TestPostgresSilent: a PostgreSQL that accepts connections and never
// answers (a loopback relay to the real server that stops forwarding)
// makes the check-in, the owner's view and page and /healthz answer 503
// within the store timeout; once it answers again, so does Live.
func TestPostgresSilent(t *testing.T) {
	dsn := testenv.PostgresDSN(t)
	u, err := url.Parse(dsn)
	if err != nil || !strings.HasPrefix(u.Scheme, "postgres") || u.Host == "" {
		t.Fatalf("%s must be a postgres:// URL with a host for this test, not %q", testenv.PostgresEnv, dsn)
	}
	r := newSilentRelay(t, u.Host)
	relayed := *u
	relayed.Host = r.addr
	b := backend{name: "PostgreSQL", dbClock: true, open: func(tb testing.TB, _ func() time.Time) live.Store {
		schema := pgtest.Schema(tb, dsn, "httpapi_silent_")
		st, err := postgres.Open(context.Background(), relayed.String(), postgres.Options{Schema: schema, ConnectTimeout: testStoreTimeout})
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { _ = st.Close() })
		return st
	}}
	f := newFixture(t, b, fixtureOptions{storeTimeout: testStoreTimeout})
	if status, body := f.checkIn(t, f.stream, validReport(t)); status != 200 {
		t.Fatalf("check in: %d %s", status, body)
	}
	// A second service token: its check-in is not in the lookup cache.
	f.credential(t, "service2", live.Credential{Kind: live.KindServiceToken, ServiceID: f.services["worker"]})
	r.silence(true)
	for _, name := range []string{"service", "service2"} {
		wantUnavailableInTime(t, f, "check-in with "+name, req{method: "POST", path: checkInPath(f.stream), subject: []string{f.owner},
			headers: map[string]string{"Authorization": "Bearer " + f.secrets[name], "Content-Type": "application/json"}, body: strings.NewReader(string(validReport(t)))})
	}
	owner := map[string]string{"Authorization": "Bearer " + f.secrets["person"]}
	wantUnavailableInTime(t, f, "owner's view", req{method: "GET", path: checkInPath(f.stream), headers: owner})
	wantUnavailableInTime(t, f, "owner's page", req{method: "GET", path: "/streams/agent/" + f.stream + "/worker", headers: owner})
	wantUnavailableInTime(t, f, "healthz", req{method: "GET", path: "/healthz"})
	r.silence(false)
	deadline := time.Now().Add(10 * time.Second)
	for {
		status, body := f.checkIn(t, f.stream, validReport(t))
		if status == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("check in once the server answers again: %d %s", status, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// silentRelay forwards loopback TCP connections to a target until
// silenced: then it forwards nothing either way (connections stay open,
// new ones are accepted and never answered), as a server that hangs.
type silentRelay struct {
	addr, target string
	mu           sync.Mutex
	silent       bool
	wake         *sync.Cond
	conns        []net.Conn
}

func newSilentRelay(tb testing.TB, target string) *silentRelay {
	tb.Helper()
	r := &silentRelay{target: target}
	r.wake = sync.NewCond(&r.mu)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	r.addr = ln.Addr().String()
	tb.Cleanup(func() {
		_ = ln.Close()
		r.mu.Lock()
		r.silent = false
		for _, c := range r.conns {
			_ = c.Close()
		}
		r.wake.Broadcast()
		r.mu.Unlock()
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", r.target)
			if err != nil {
				c.Close()
				continue
			}
			r.mu.Lock()
			r.conns = append(r.conns, c, up)
			r.mu.Unlock()
			go r.pipe(up, c)
			go r.pipe(c, up)
		}
	}()
	return r
}

// pipe copies from src to dst, holding each chunk while the relay is silent.
func (r *silentRelay) pipe(dst, src net.Conn) {
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		r.mu.Lock()
		for r.silent {
			r.wake.Wait()
		}
		r.mu.Unlock()
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if err != io.EOF {
				return
			}
			return
		}
	}
}

// silence stops (true) or resumes (false) forwarding.
func (r *silentRelay) silence(on bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.silent = on
	r.wake.Broadcast()
}
