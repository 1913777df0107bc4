package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"openvibe.network/agentsandbox/internal/testenv"
	"openvibe.network/agentsandbox/live"
	"openvibe.network/agentsandbox/live/postgres/pgtest"
)

// ack is the last check-in of a stream that got a 200.
type ack struct {
	seq int
	at  time.Time
}

// load checks in every stream of w through s, one request at a time per
// stream, until the server goes away or ctx ends, and keeps each stream's
// last acknowledged check-in.
type load struct {
	mu      sync.Mutex
	acked   map[string]ack
	total   int
	bad     []string      // non-200 answers
	reached chan struct{} // closed when total reaches the threshold
	target  int
	wg      sync.WaitGroup
}

func startLoad(ctx context.Context, tb testing.TB, s *server, w world, threshold int) *load {
	tb.Helper()
	l := &load{acked: map[string]ack{}, reached: make(chan struct{}), target: threshold}
	c := newClient(len(w.streams))
	bodies := map[string][]byte{} // stream -> template, "%d" in place of the sequence
	for _, st := range w.streams {
		bodies[st] = report(tb, st, 0)
	}
	for _, st := range w.streams {
		l.wg.Go(func() {
			for seq := 1; ctx.Err() == nil; seq++ {
				body := []byte(strings.Replace(string(bodies[st]), fmt.Sprintf(`"%s/0"`, st), fmt.Sprintf(`"%s/%d"`, st, seq), 1))
				status, at, err := checkIn(ctx, c, s, w, st, body)
				if err != nil {
					return // the server is gone
				}
				if !l.record(st, seq, status, at) {
					return
				}
			}
		})
	}
	return l
}

func (l *load) record(stream string, seq, status int, at time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if status != http.StatusOK {
		l.bad = append(l.bad, fmt.Sprintf("%s/%d: %d", stream, seq, status))
		return false
	}
	l.acked[stream] = ack{seq, at}
	l.total++
	if l.total == l.target {
		close(l.reached)
	}
	return true
}

// waitReached waits until threshold check-ins were acknowledged.
func (l *load) waitReached(tb testing.TB) {
	tb.Helper()
	select {
	case <-l.reached:
	case <-time.After(3 * time.Minute):
		l.mu.Lock()
		defer l.mu.Unlock()
		tb.Fatalf("only %d check-ins acknowledged (bad: %v)", l.total, l.bad)
	}
}

// verify waits for the load to end and checks, through s, that every
// acknowledged check-in is stored: each stream holds its last acknowledged
// report with the same receive time, or the one after it (in flight when
// the server stopped, committed but not answered).
func (l *load) verify(tb testing.TB, s *server, w world) {
	tb.Helper()
	l.wg.Wait()
	if len(l.bad) > 0 {
		tb.Fatalf("non-200 answers under load: %v", l.bad)
	}
	c := newClient(1)
	for stream, a := range l.acked {
		v := ownerView(tb, c, s, w, stream)
		switch v.Report.LoadSeq {
		case fmt.Sprintf("%s/%d", stream, a.seq):
			if !v.ReceivedAt.Equal(a.at) {
				tb.Errorf("%s: stored receive time %v, acknowledged %v", stream, v.ReceivedAt, a.at)
			}
		case fmt.Sprintf("%s/%d", stream, a.seq+1):
		default:
			tb.Errorf("%s: acknowledged check-in %d lost: stored %q", stream, a.seq, v.Report.LoadSeq)
		}
	}
	tb.Logf("%d check-ins acknowledged over %d streams, all stored", l.total, len(l.acked))
}

func sqliteDB(tb testing.TB) string {
	return "sqlite:" + filepath.Join(tb.TempDir(), "live.db")
}

// TestServeRestartKeepsData checks in, stops the server with SIGTERM, starts
// it again on the same file and finds the same registration.
func TestServeRestartKeepsData(t *testing.T) {
	w := setup(t, sqliteDB(t), "", 1)
	addrFile := filepath.Join(t.TempDir(), "addr")
	s := startServer(t, "--db", w.db, "--addr-file", addrFile)
	if b, err := os.ReadFile(addrFile); err != nil || strings.TrimSpace(string(b)) != s.addr {
		t.Fatalf("addr file holds %q (%v), want %s", b, err, s.addr)
	}
	c := newClient(1)
	status, at, err := checkIn(t.Context(), c, s, w, w.streams[0], report(t, w.streams[0], 1))
	if err != nil || status != http.StatusOK {
		t.Fatalf("check-in: %d, %v\n%s", status, err, s.logText())
	}
	s.stop(t)
	s = startServer(t, "--db", w.db)
	v := ownerView(t, c, s, w, w.streams[0])
	if v.State != string(live.StateAlive) || !v.ReceivedAt.Equal(at) || v.Report.LoadSeq != w.streams[0]+"/1" {
		t.Fatalf("after restart: %+v, want alive, received at %v, report %s/1", v, at, w.streams[0])
	}
	resp, err := c.Get(s.url("/healthz"))
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("healthz after restart: %v %v", resp, err)
	}
	resp.Body.Close()
}

// TestServeUnderLoad stops the server during a load of check-ins, with
// SIGTERM (it exits cleanly) or SIGKILL: either way the database opens
// cleanly afterwards and every acknowledged check-in is stored.
func TestServeUnderLoad(t *testing.T) {
	for _, tc := range []struct {
		name               string
		streams, threshold int
		stop               func(*server, testing.TB)
	}{
		{"GracefulShutdown", 16, 200, (*server).stop},
		{"Kill9", 32, 500, (*server).kill},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := setup(t, sqliteDB(t), "", tc.streams)
			s := startServer(t, "--db", w.db)
			l := startLoad(t.Context(), t, s, w, tc.threshold)
			l.waitReached(t)
			tc.stop(s, t)
			l.wg.Wait()
			s = startServer(t, "--db", w.db)
			l.verify(t, s, w)
			// The database is whole: the admin command reads and writes it.
			admin(t, w.db, "stream", "list")
			admin(t, w.db, "person", "add", "--name", "after the stop")
		})
	}
}

// TestServeTwoInstancesPostgres runs two servers on one PostgreSQL schema:
// a check-in through one is the health seen through the other, and so is a
// refusal.
func TestServeTwoInstancesPostgres(t *testing.T) {
	dsn := testenv.PostgresDSN(t)
	schema := pgtest.Schema(t, dsn, "ovlive_proc_")
	w := setup(t, dsn, schema, 1)
	a := startServer(t, "--db", dsn, "--db-schema", schema)
	b := startServer(t, "--db", dsn, "--db-schema", schema)
	c := newClient(2)
	stream := w.streams[0]
	if v := ownerView(t, c, b, w, stream); v.State != string(live.StateAbsent) {
		t.Fatalf("before any check-in, b sees %q", v.State)
	}
	status, at, err := checkIn(t.Context(), c, a, w, stream, report(t, stream, 1))
	if err != nil || status != http.StatusOK {
		t.Fatalf("check-in through a: %d, %v\n%s", status, err, a.logText())
	}
	if v := ownerView(t, c, b, w, stream); v.State != string(live.StateAlive) || !v.ReceivedAt.Equal(at) || v.Report.LoadSeq != stream+"/1" {
		t.Fatalf("b sees %+v, want alive received at %v", v, at)
	}
	bad := []byte(strings.Replace(string(report(t, stream, 2)), `"profile": false`, `"profile": true`, 1))
	if status, _, err := checkIn(t.Context(), c, b, w, stream, bad); err != nil || status != http.StatusUnprocessableEntity {
		t.Fatalf("contract-violating check-in through b: %d, %v", status, err)
	}
	if v := ownerView(t, c, a, w, stream); v.State != string(live.StateRefused) || v.Refusal == nil {
		t.Fatalf("a sees %+v after b refused, want refused", v)
	}
}
