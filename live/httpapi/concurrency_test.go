package httpapi

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"openvibe.network/agentsandbox/live"
)

// TestConcurrentCheckIns: 50 streams check in at once, each several times
// with its own reports; afterwards every stream holds exactly its own last
// report (none lost, none mixed up).
func TestConcurrentCheckIns(t *testing.T) { eachBackend(t, testConcurrentCheckIns) }

func testConcurrentCheckIns(t *testing.T, b backend) {
	const streams, rounds = 50, 4
	f := newFixture(t, b, fixtureOptions{})
	ids := make([]string, streams)
	for i := range ids {
		ids[i] = f.newStream(t, f.owner)
	}
	report := func(i, round int) []byte {
		// Distinct per stream and round, and of varied length.
		pad := strings.Repeat("x", (i*37+round*11)%500)
		return []byte(fmt.Sprintf(`{"worker_id":"w-%d-%d","note":"%s",%s`, i, round, pad, isolationOnly[1:]))
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: streams}}
	defer client.CloseIdleConnections()
	start := make(chan struct{})
	errs := make(chan error, streams*rounds)
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for round := range rounds {
				errs <- f.post(client, id, report(i, round))
			}
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	for i, id := range ids {
		rec, err := f.store.Worker(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if want := report(i, rounds-1); rec.Registration == nil || !bytes.Equal(rec.Registration.Report, want) {
			t.Errorf("stream %d holds %.60q, want its own last report %.60q", i, regReport(rec.Registration), want)
		}
	}
}

// post checks body in for stream through client and returns an error
// unless it is accepted.
func (f *fixture) post(client *http.Client, stream string, body []byte) error {
	hr, err := http.NewRequest("POST", f.srv.URL+checkInPath(stream), bytes.NewReader(body))
	if err != nil {
		return err
	}
	hr.Header.Set("Authorization", "Bearer "+f.secrets["service"])
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set(SubjectHeader, f.owner)
	resp, err := client.Do(hr)
	if err != nil {
		return fmt.Errorf("check in %s: %w", stream, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("check in %s: status %d", stream, resp.StatusCode)
	}
	return nil
}

// regReport returns r's report (nil without a registration).
func regReport(r *live.Registration) []byte {
	if r == nil {
		return nil
	}
	return r.Report
}
