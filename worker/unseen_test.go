package worker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"openvibe.network/agentsandbox/client"
	"openvibe.network/agentsandbox/sandbox"
	"openvibe.network/agentsandbox/worker/httpapi"
)

// byIDRoutes are the API's routes of one sandbox, each asked about a
// self-test's probe by its id: every one must answer 404 sandbox_not_found.
func byIDRoutes(id string) [][3]string {
	p := "/v1/sandboxes/" + id
	return [][3]string{
		{http.MethodGet, p, ""},
		{http.MethodPatch, p, `{"time_box_minutes":30}`},
		{http.MethodPost, p + "/exec", `{"argv":["true"]}`},
		{http.MethodGet, p + "/processes", ""},
		{http.MethodGet, p + "/processes/1", ""},
		{http.MethodPost, p + "/processes/1/signal", `{"signal":"KILL"}`},
		{http.MethodGet, p + "/files/", ""},
		{http.MethodPut, p + "/files/x", "x"},
		{http.MethodGet, p + "/archive/", ""},
		{http.MethodGet, p + "/browser/json/version", ""},
		{http.MethodDelete, p, ""},
	}
}

// apiProber stands between the self-test and its runtime view: each probe
// sandbox the self-test creates is at once asked for by id through every
// route of the API, and looked for in its list and its active count.
type apiProber struct {
	Sandboxes
	Browsers
	srv      *httptest.Server
	w        *client.Worker
	mu       sync.Mutex
	probes   int
	problems []string
}

func (p *apiProber) Create(ctx context.Context, o sandbox.Options) (sandbox.Info, error) {
	info, err := p.Sandboxes.Create(ctx, o)
	if err != nil {
		return info, err
	}
	var problems []string
	for _, rt := range byIDRoutes(info.ID) {
		req, _ := http.NewRequestWithContext(ctx, rt[0], p.srv.URL+rt[1], strings.NewReader(rt[2]))
		req.Header.Set("Authorization", "Bearer "+testAPIToken)
		if rt[2] != "" && rt[2] != "x" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := p.srv.Client().Do(req)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s %s: %v", rt[0], rt[1], err))
			continue
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(body), `"sandbox_not_found"`) {
			problems = append(problems, fmt.Sprintf("%s %s answered %d %s, want 404 sandbox_not_found", rt[0], rt[1], resp.StatusCode, body))
		}
	}
	list, err := p.w.List(ctx)
	for _, s := range list {
		if s.ID == info.ID {
			problems = append(problems, "GET /v1/sandboxes lists the probe "+info.ID)
		}
	}
	st, serr := p.w.Status(ctx)
	if err = errors.Join(err, serr); err != nil {
		problems = append(problems, err.Error())
	} else if st.Active != 0 {
		problems = append(problems, fmt.Sprintf("GET /v1/status counts %d active during the self-test", st.Active))
	}
	p.mu.Lock()
	p.probes++
	p.problems = append(p.problems, problems...)
	p.mu.Unlock()
	return info, nil
}

const testAPIToken = "test-token"

// TestSelfTestUnseenByTheAPI: the self-test's probe sandboxes (and the
// browser check's, with Chromium) are not in GET /v1/sandboxes, not counted
// in active, and every route answers 404 for their ids; a client that
// deletes every sandbox it lists all through a self-test does not make it
// fail.
func TestSelfTestUnseenByTheAPI(t *testing.T) {
	browser := sandbox.FindBrowser()
	d, rt := realStack(t, true, browser)
	api, err := httpapi.New(httpapi.Config{Runtime: rt, Token: testAPIToken, Egress: true, Browser: browser != ""})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api.Handler())
	defer srv.Close()
	w := client.NewWorker(srv.URL, testAPIToken, srv.Client())
	prober := &apiProber{Sandboxes: d.Sandboxes, Browsers: d.Browser, srv: srv, w: w}
	d.Sandboxes = prober
	if d.Browser != nil {
		d.Browser = prober
	}

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cleanCtx, stopCleaning := context.WithCancel(ctx)
	var cleaner sync.WaitGroup
	cleaner.Go(func() { // a client's clean-up: delete whatever is listed
		for cleanCtx.Err() == nil {
			list, _ := w.List(cleanCtx)
			for _, s := range list {
				_, _ = w.Delete(cleanCtx, s.ID)
			}
			time.Sleep(5 * time.Millisecond)
		}
	})
	res := SelfTest(ctx, d)
	stopCleaning()
	cleaner.Wait()

	wantProbes := 1
	if browser != "" {
		wantProbes = 2
	}
	if !res.Passed {
		t.Errorf("the self-test failed beside a client's clean-up: %q", res.Reasons)
	}
	if prober.probes != wantProbes {
		t.Errorf("%d probe sandboxes made, want %d", prober.probes, wantProbes)
	}
	for _, p := range prober.problems {
		t.Error(p)
	}
}
