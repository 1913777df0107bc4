package postgres_test

import (
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"openvibe.network/agentsandbox/internal/testenv"
	"openvibe.network/agentsandbox/live"
	"openvibe.network/agentsandbox/live/storetest"
)

// TestServerOutOfReach: while the database server cannot be reached (a
// loopback relay between the store and the real server, cut and then put
// back on the same port), every call a check-in and the owner's page make
// fails with EUNAVAILABLE saying so, not an internal error; once the
// server is back, the same store works again and kept what it had.
func TestServerOutOfReach(t *testing.T) {
	dsn := testenv.PostgresDSN(t)
	u, err := url.Parse(dsn)
	if err != nil || !strings.HasPrefix(u.Scheme, "postgres") || u.Host == "" {
		t.Fatalf("%s must be a postgres:// URL with a host for this test, not %q", testenv.PostgresEnv, dsn)
	}
	r := newRelay(t, u.Host)
	u.Host = r.addr
	s := open(t, u.String(), schema(t, dsn))
	owner, svc, streams := storetest.Streams(t, s, 1)
	reg := live.Registration{StreamID: streams[0], Report: []byte(`{"n":1}`), ServiceID: svc.ID, SubjectID: owner.ID}
	if _, err := s.Accept(t.Context(), reg); err != nil {
		t.Fatal(err)
	}

	r.cut()
	calls := map[string]func() error{
		"Accept": func() error { _, err := s.Accept(t.Context(), reg); return err },
		"Refuse": func() error {
			_, err := s.Refuse(t.Context(), live.Refusal{StreamID: streams[0], ServiceID: svc.ID, SubjectID: owner.ID})
			return err
		},
		"LookupCheckIn":    func() error { _, err := s.LookupCheckIn(t.Context(), [32]byte{1}, streams[0], owner.ID); return err },
		"CredentialByHash": func() error { _, err := s.CredentialByHash(t.Context(), [32]byte{1}); return err },
		"Worker":           func() error { _, err := s.Worker(t.Context(), streams[0]); return err },
		"History":          func() error { _, err := s.History(t.Context(), streams[0], time.Now().Add(-time.Hour)); return err },
		"Probe":            func() error { return s.Probe(t.Context()) },
	}
	for name, call := range calls {
		err := call()
		if live.ErrorCode(err) != live.EUNAVAILABLE || !strings.Contains(live.ErrorMessage(err), "database server") {
			t.Errorf("%s while the server is out of reach = %v, want %s naming the database server", name, err, live.EUNAVAILABLE)
		}
	}

	r.restore(t)
	if rec, err := s.Worker(t.Context(), streams[0]); err != nil || rec.Registration == nil || string(rec.Registration.Report) != `{"n":1}` {
		t.Fatalf("Worker once the server is back = %+v, %v; want the report stored before", rec.Registration, err)
	}
	if _, err := s.Accept(t.Context(), reg); err != nil {
		t.Fatalf("Accept once the server is back: %v", err)
	}
}

// relay forwards loopback TCP connections from addr to a target, until cut.
type relay struct {
	addr, target string
	mu           sync.Mutex
	ln           net.Listener
	conns        []net.Conn
}

func newRelay(tb testing.TB, target string) *relay {
	tb.Helper()
	r := &relay{target: target}
	r.listen(tb, "127.0.0.1:0")
	tb.Cleanup(r.cut)
	return r
}

func (r *relay) listen(tb testing.TB, addr string) {
	tb.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		tb.Fatal(err)
	}
	r.mu.Lock()
	r.ln, r.addr = ln, ln.Addr().String()
	r.mu.Unlock()
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
			go func() { _, _ = io.Copy(up, c); up.Close() }()
			go func() { _, _ = io.Copy(c, up); c.Close() }()
		}
	}()
}

// cut stops listening and closes every relayed connection.
func (r *relay) cut() {
	r.mu.Lock()
	defer r.mu.Unlock()
	_ = r.ln.Close()
	for _, c := range r.conns {
		_ = c.Close()
	}
	r.conns = nil
}

// restore listens again on the same address.
func (r *relay) restore(tb testing.TB) {
	tb.Helper()
	r.listen(tb, r.addr)
}
