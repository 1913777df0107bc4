package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// fakeWorker is a worker's API as far as a pool uses it: its status and
// creates, with capacity slots; code, when set, is what every create
// answers instead.
type fakeWorker struct {
	mu       sync.Mutex
	capacity int
	active   int
	creates  int
	statuses int
	code     int
	srv      *httptest.Server
	// gate, when set, holds every status answer until it is closed.
	gate chan struct{}
}

func newFakeWorker(t *testing.T, capacity int) *fakeWorker {
	f := &fakeWorker{capacity: capacity}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeWorker) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	gate := f.gate
	f.mu.Unlock()
	if gate != nil && r.URL.Path == "/v1/status" {
		<-gate
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/v1/status":
		f.statuses++
		_ = json.NewEncoder(w).Encode(WorkerStatus{Capacity: f.capacity, Active: f.active})
	case r.Method == http.MethodPost && r.URL.Path == "/v1/sandboxes":
		f.creates++
		switch {
		case f.code != 0:
			w.WriteHeader(f.code)
			fmt.Fprintf(w, `{"error":{"code":"invalid_request","message":"refused by the test"}}`)
		case f.active >= f.capacity:
			w.WriteHeader(http.StatusTooManyRequests)
			fmt.Fprint(w, `{"error":{"code":"at_capacity","message":"every slot is in use"}}`)
		default:
			f.active++
			w.WriteHeader(http.StatusCreated)
			fmt.Fprintf(w, `{"id":"%020d"}`, f.creates)
		}
	default:
		w.WriteHeader(http.StatusNotFound)
	}
}

func (f *fakeWorker) counts() (active, creates, statuses int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.active, f.creates, f.statuses
}

// TestPoolSpreadsCreates: creates made at once spread by free slots, each
// worker's status asked once for them all (it is cached), and fill every
// slot; one more is ErrCapacity, saying what each worker answered.
func TestPoolSpreadsCreates(t *testing.T) {
	workers := []*fakeWorker{newFakeWorker(t, 4), newFakeWorker(t, 2), newFakeWorker(t, 3)}
	var urls []string
	for _, w := range workers {
		urls = append(urls, w.srv.URL)
	}
	p, err := NewPool(urls, "token", PoolOptions{StatusTTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 9)
	for range 9 {
		wg.Go(func() {
			_, err := p.Create(ctx, CreateOptions{})
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("create: %v", err)
		}
	}
	for i, w := range workers {
		active, creates, statuses := w.counts()
		if active != w.capacity || creates != w.capacity || statuses != 1 {
			t.Errorf("worker %d: %d active, %d creates, %d statuses; want %d, %d (no 429: the pool counted its own creates), 1",
				i, active, creates, statuses, w.capacity, w.capacity)
		}
	}
	_, err = p.Create(ctx, CreateOptions{})
	if !errors.Is(err, ErrCapacity) || !strings.Contains(err.Error(), workers[1].srv.URL) {
		t.Fatalf("create on a full pool: %v, want ErrCapacity naming each worker", err)
	}
}

// TestPoolMovesOn: a create moves past a worker that is down (tried last,
// and it fails only its own sandboxes with ErrUnreachable) and one that
// answers 429, to one that takes it; a 400 is returned at once.
func TestPoolMovesOn(t *testing.T) {
	down, full, ok := newFakeWorker(t, 8), newFakeWorker(t, 8), newFakeWorker(t, 1)
	p, err := NewPool([]string{down.srv.URL, full.srv.URL, ok.srv.URL}, "token", PoolOptions{StatusTTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	p.refresh(ctx) // every worker answered once
	stale, err := p.Sandbox(PoolKey(down.srv.URL) + "-00000000000000000007")
	if err != nil {
		t.Fatal(err)
	}
	down.srv.Close()
	full.mu.Lock()
	full.active = full.capacity // its cached status still says 8 free
	full.mu.Unlock()

	sb, err := p.Create(ctx, CreateOptions{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if sb.WorkerURL() != ok.srv.URL || sb.ID() != PoolKey(ok.srv.URL)+"-"+sb.SandboxID() {
		t.Errorf("sandbox %s on %s, want it on %s with the pool id naming it", sb.ID(), sb.WorkerURL(), ok.srv.URL)
	}
	if _, err := stale.Info(ctx); !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), down.srv.URL) {
		t.Errorf("a sandbox of the worker that is down: %v, want ErrUnreachable naming it", err)
	}
	again, err := p.Sandbox(sb.ID())
	if err != nil || again.WorkerURL() != ok.srv.URL || again.SandboxID() != sb.SandboxID() {
		t.Errorf("Sandbox(%s) = %v, %v: want the same sandbox on the same worker", sb.ID(), again, err)
	}

	ok.mu.Lock()
	ok.code = http.StatusBadRequest
	ok.mu.Unlock()
	full.mu.Lock()
	full.code = http.StatusBadRequest
	full.mu.Unlock()
	creates := func() int {
		_, a, _ := full.counts()
		_, b, _ := ok.counts()
		return a + b
	}
	before := creates()
	if _, err := p.Create(ctx, CreateOptions{}); !errors.Is(err, ErrInvalidRequest) {
		t.Fatalf("create refused with 400: %v, want ErrInvalidRequest", err)
	}
	if n := creates() - before; n != 1 {
		t.Errorf("a create refused with 400 was tried on %d workers, want 1", n)
	}
}

// TestPoolIDs: pool ids are KEY-ID with the worker's key; ids of no worker
// of the pool, or not pool ids at all, are refused.
func TestPoolIDs(t *testing.T) {
	p, err := NewPool([]string{"http://127.0.0.1:8088/", "http://127.0.0.1:8089"}, "token", PoolOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"http://127.0.0.1:8088", "http://127.0.0.1:8089"}, p.Workers()); diff != "" {
		t.Errorf("workers (-want +got):\n%s", diff)
	}
	if got, want := PoolKey("http://127.0.0.1:8088/"), PoolKey("http://127.0.0.1:8088"); got != want || len(got) != 8 {
		t.Errorf("PoolKey = %q and %q: want one 8-digit key for a URL with or without its slash", got, want)
	}
	sb, err := p.Sandbox(PoolKey("http://127.0.0.1:8089") + "-abc")
	if err != nil || sb.WorkerURL() != "http://127.0.0.1:8089" || sb.SandboxID() != "abc" {
		t.Errorf("Sandbox: %v, %v", sb, err)
	}
	for _, tc := range []struct {
		id   string
		want error
	}{{"deadbeef-abc", ErrUnknownWorker}, {"abc", nil}, {PoolKey("http://127.0.0.1:8089") + "-", nil}} {
		_, err := p.Sandbox(tc.id)
		if err == nil || (tc.want != nil && !errors.Is(err, tc.want)) {
			t.Errorf("Sandbox(%q) = %v, want an error (%v)", tc.id, err, tc.want)
		}
	}
	for _, urls := range [][]string{nil, {"127.0.0.1:8088"}, {"http://a", "http://a/"}} {
		if _, err := NewPool(urls, "token", PoolOptions{}); err == nil {
			t.Errorf("NewPool(%q): no error", urls)
		}
	}
}

// TestPoolStatusInBackground: once a worker's status is known, a create
// never waits for it to be asked again: a stale status is asked for in the
// background, and the create goes by what is known.
func TestPoolStatusInBackground(t *testing.T) {
	w := newFakeWorker(t, 4)
	now := time.Unix(1000, 0)
	var clock sync.Mutex
	p, err := NewPool([]string{w.srv.URL}, "token", PoolOptions{StatusTTL: time.Second, Now: func() time.Time {
		clock.Lock()
		defer clock.Unlock()
		return now
	}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := p.Create(ctx, CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	gate := make(chan struct{})
	w.mu.Lock()
	w.gate = gate
	w.mu.Unlock()
	clock.Lock()
	now = now.Add(2 * time.Second)
	clock.Unlock()
	if _, err := p.Create(ctx, CreateOptions{}); err != nil { // would block on the gate if it waited
		t.Fatal(err)
	}
	close(gate)
	for {
		if _, creates, statuses := w.counts(); statuses == 2 && creates == 2 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the stale status was never asked again: %v", ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}
