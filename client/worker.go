package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"openvibe.network/agentsandbox/workerapi"
	"strings"
	"time"

	"openvibe.network/agentsandbox"
)

// Worker is a client of one sandbox worker's API (see docs/openapi.yaml).
// Its methods, and those of its handles (Sandbox, Process, Terminal), fail
// with an *APIError when the worker answered with an error (errors.Is
// matches it to the sentinels by its code: ErrNotFound, ErrCapacity, …),
// and with a wrapped transport error when no answer arrived. A Worker is
// safe for concurrent use.
type Worker struct {
	base  string
	token string
	http  *http.Client
}

// NewWorker returns a client of the worker API at baseURL (e.g.
// http://127.0.0.1:8080), sending token as a Bearer credential. A nil
// httpClient means one without an overall timeout (an exec streams for as
// long as its command runs; bound calls with their context). The client is
// copied so redirects are never followed: the token goes to baseURL only.
func NewWorker(baseURL, token string, httpClient *http.Client) *Worker {
	c := &http.Client{}
	if httpClient != nil {
		cp := *httpClient
		c = &cp
	}
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &Worker{base: strings.TrimRight(baseURL, "/"), token: token, http: c}
}

// do sends a request and returns the answer when its status is want; any
// other status is read into an *APIError and the body closed.
func (w *Worker) do(ctx context.Context, method, path string, body io.Reader, hdr http.Header, want int) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, w.base+path, body)
	if err != nil {
		return nil, err
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	return w.send(req, want)
}

// send sends req with the token and returns the answer when its status is
// want; any other status is read into an *APIError and the body closed.
func (w *Worker) send(req *http.Request, want int) (*http.Response, error) {
	req.Header.Set("Authorization", "Bearer "+w.token)
	resp, err := w.http.Do(req)
	if err != nil {
		return nil, scrub(err)
	}
	if resp.StatusCode != want {
		defer resp.Body.Close()
		return nil, readAPIError(resp)
	}
	return resp, nil
}

// doJSON sends in (when not nil) as JSON and decodes the answer into out
// (when not nil), reading at most maxAnswerBytes of it.
func (w *Worker) doJSON(ctx context.Context, method, path string, in, out any, want int) error {
	var body io.Reader
	hdr := http.Header{"Accept": {"application/json"}}
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
		hdr.Set("Content-Type", "application/json")
	}
	resp, err := w.do(ctx, method, path, body, hdr, want)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		return nil
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxAnswerBytes)).Decode(out); err != nil {
		return fmt.Errorf("read answer: %w", err)
	}
	return nil
}

// sandboxPath is the path of sandbox id plus rest, each segment escaped.
func sandboxPath(id string, rest ...string) string {
	p := "/v1/sandboxes/" + url.PathEscape(id)
	for _, r := range rest {
		p += "/" + r
	}
	return p
}

// filePath escapes each segment of a workspace path; dots of "." and ".."
// segments too, so the path reaches the worker as given (and a path that
// leaves the workspace is refused with a reason, not redirected).
func filePath(p string) string {
	segs := strings.Split(strings.TrimPrefix(p, "/"), "/")
	for i, s := range segs {
		if strings.Trim(s, ".") == "" {
			segs[i] = strings.Repeat("%2E", len(s))
			continue
		}
		segs[i] = url.PathEscape(s)
	}
	return strings.Join(segs, "/")
}

// CreateOptions are the settings of a new sandbox.
type CreateOptions struct {
	// TimeBoxMinutes is how long the sandbox lives, 5..30; 0 means 5.
	TimeBoxMinutes int
	// Env is added to the environment of every command.
	Env map[string]string
	// Secrets are credentials the sandbox may use but never read, by
	// variable name: its environment gets a placeholder for each, and the
	// worker's egress proxy puts the value in place of it only in HTTPS
	// requests to the secret's hosts (which Egress must allow). Bad ones
	// are ErrInvalidRequest saying what to fix.
	Secrets map[string]agentsandbox.Secret
	// Browser gives the sandbox a headless browser (see BrowserURL); the
	// worker must have one (else ErrNoBrowser), and the limits must hold it
	// (else ErrInvalidRequest saying which).
	Browser bool
	// StartBrowser starts the browser at create, not at the first
	// connection (with Browser).
	StartBrowser bool
	// Egress is what the sandbox may reach; nil takes the worker's default.
	Egress *agentsandbox.EgressPolicy
	// Limits are the sandbox's own, each within the worker's (a zero field
	// takes the worker's); one over the worker's is a 400 naming it.
	Limits RequestLimits
	// Image is the image the sandbox runs on instead of the worker's view
	// of its host (a reference from a registry the worker allows; it is
	// pulled first when the worker does not hold it). Errors: see
	// ErrImageNotAllowed, ErrImageNotFound and ErrImageUnavailable.
	Image string
}

// RequestLimits are the limits a sandbox asks for on create: memory_mb,
// disk_mb, pids and cpu_percent.
type RequestLimits = agentsandbox.Limits

// Usage is what a sandbox uses now: memory (now and peak), CPU seconds,
// tasks and the bytes its writable space holds.
type Usage = agentsandbox.Usage

// Limits are the limits of a sandbox.
type Limits = workerapi.SandboxLimits

// SandboxInfo describes a sandbox of the worker: its id, times, limits,
// egress policy, browser, image and state ("running", or "broken": its init
// stopped answering, every call but Delete fails with ErrSandboxBroken);
// Usage is set only by (*Sandbox).Info.
type SandboxInfo = workerapi.SandboxState

// WipeReport is the answer to a delete: the wipe removed everything of the
// sandbox and verified it, in Duration.
type WipeReport struct {
	Verified bool
	Duration time.Duration
}

// Create makes a sandbox. It fails with ErrCapacity when every slot is in
// use (see APIError.RetryAfter) and with ErrInvalidRequest for bad options
// (a limit over the worker's among them). See Sandbox for a handle of it.
func (w *Worker) Create(ctx context.Context, opts CreateOptions) (SandboxInfo, error) {
	var sb SandboxInfo
	if err := w.doJSON(ctx, http.MethodPost, "/v1/sandboxes", opts.request(), &sb, http.StatusCreated); err != nil {
		return SandboxInfo{}, fmt.Errorf("create sandbox: %w", err)
	}
	return sb, nil
}

// List returns the worker's sandboxes. Its errors are those of every Worker
// method (see Worker).
func (w *Worker) List(ctx context.Context) ([]SandboxInfo, error) {
	var out workerapi.SandboxList
	if err := w.doJSON(ctx, http.MethodGet, "/v1/sandboxes", nil, &out, http.StatusOK); err != nil {
		return nil, fmt.Errorf("list sandboxes: %w", err)
	}
	infos := make([]SandboxInfo, len(out.Items))
	for i, sb := range out.Items {
		infos[i] = SandboxInfo{Sandbox: sb}
	}
	return infos, nil
}

// Delete wipes sandbox id: see (*Sandbox).Delete.
func (w *Worker) Delete(ctx context.Context, id string) (WipeReport, error) {
	return w.Sandbox(id).Delete(ctx)
}

// PutFile writes r to path (relative to /workspace) in sandbox id with mode
// (0 means 0644): Files(id).Put. It fails with a 400 *APIError for a path
// that leaves the workspace and ErrNotFound for an unknown sandbox.
func (w *Worker) PutFile(ctx context.Context, id, path string, r io.Reader, mode fs.FileMode) error {
	return w.Files(id).Put(ctx, path, r, mode)
}

// GetFile copies path (relative to /workspace) of sandbox id to dst:
// Files(id).Get. It fails with ErrNotFound for an unknown sandbox or file.
func (w *Worker) GetFile(ctx context.Context, id, path string, dst io.Writer) error {
	return w.Files(id).Get(ctx, path, dst)
}

// SelfTest is the outcome of a worker's self-test: Checks holds the checks
// that ran, NotRun those that could not.
type SelfTest = workerapi.SelfTestSummary

// WorkerStatus is the worker's capacity, load, pooled slots and last
// self-test (nil before the first), and why slots are out of use (an
// unverified wipe).
type WorkerStatus = workerapi.Status

// Status returns the worker's status. Its errors are those of every Worker
// method (see Worker).
func (w *Worker) Status(ctx context.Context) (WorkerStatus, error) {
	var st WorkerStatus
	if err := w.doJSON(ctx, http.MethodGet, "/v1/status", nil, &st, http.StatusOK); err != nil {
		return WorkerStatus{}, fmt.Errorf("worker status: %w", err)
	}
	return st, nil
}

// RunSelfTest asks the worker to run its self-test now and returns the
// outcome; a 501 *APIError when the worker cannot.
func (w *Worker) RunSelfTest(ctx context.Context) (SelfTest, error) {
	var st SelfTest
	if err := w.doJSON(ctx, http.MethodPost, "/v1/selftest", nil, &st, http.StatusOK); err != nil {
		return SelfTest{}, fmt.Errorf("run self-test: %w", err)
	}
	return st, nil
}
