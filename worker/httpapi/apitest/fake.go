// Package apitest holds a fake sandbox runtime for tests of the worker API
// and of programs that use it: sandboxes are records in memory, files a map,
// and commands a function the test supplies.
package apitest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strings"
	"sync"
	"time"

	"openvibe.network/agentsandbox"
	"openvibe.network/agentsandbox/sandbox"
)

// ExecFunc runs a command in the fake.
type ExecFunc func(ctx context.Context, id string, req agentsandbox.ExecRequest, stdout, stderr io.Writer) (agentsandbox.ExecResult, error)

// Fake is an in-memory runtime with the methods of httpapi.Runtime. Its
// errors are the sandbox package's sentinels, as the real runtime's are.
type Fake struct {
	// ExecFunc runs commands; nil copies stdin to stdout and exits 0. Set it
	// and Leftovers before the first call.
	ExecFunc ExecFunc
	// Leftovers, when set, makes every wipe unverified with these leftovers.
	Leftovers []string

	mu      sync.Mutex
	cap     int
	next    int
	boxes   map[string]*box
	created []sandbox.Options
	ports   map[string]string // "ID PORT" -> the address DialPort connects to
}

type box struct {
	info  sandbox.Info
	files map[string][]byte
}

// NewFake returns a Fake with capacity slots.
func NewFake(capacity int) *Fake {
	return &Fake{cap: capacity, boxes: map[string]*box{}}
}

// Create records a sandbox, or fails with sandbox.ErrCapacity.
func (f *Fake) Create(_ context.Context, opts sandbox.Options) (sandbox.Info, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.boxes) >= f.cap {
		return sandbox.Info{}, sandbox.ErrCapacity
	}
	f.next++
	now := time.Now().UTC().Truncate(time.Second)
	tb := opts.TimeBox
	if tb == 0 {
		tb = agentsandbox.DefaultTimeBox
	}
	info := sandbox.Info{ID: fmt.Sprintf("sb-%d", f.next), Slot: f.next, CreatedAt: now, ExpiresAt: now.Add(tb),
		Limits: opts.Limits.WithDefaults(), Egress: opts.Egress, EgressPolicy: opts.EgressPolicy, Browser: opts.Browser}
	if opts.Image != nil {
		info.Image, info.ImageDigest = opts.Image.Ref, opts.Image.Digest
	}
	for name, s := range opts.Secrets {
		if info.Secrets == nil {
			info.Secrets = map[string][]string{}
		}
		info.Secrets[name] = slices.Clone(s.Hosts)
	}
	f.boxes[info.ID] = &box{info: info, files: map[string][]byte{}}
	f.created = append(f.created, opts)
	return info, nil
}

// Created returns the options of every Create that succeeded, in order.
func (f *Fake) Created() []sandbox.Options {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.created)
}

func (f *Fake) get(id string) (*box, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, ok := f.boxes[id]
	if !ok {
		return nil, sandbox.ErrNotFound
	}
	return b, nil
}

// Exec runs ExecFunc, telling a stdout with a Started(pid) method first;
// sandbox.ErrNotFound for an unknown id.
func (f *Fake) Exec(ctx context.Context, id string, req agentsandbox.ExecRequest, stdout, stderr io.Writer) (agentsandbox.ExecResult, error) {
	if _, err := f.get(id); err != nil {
		return agentsandbox.ExecResult{}, err
	}
	if st, ok := stdout.(interface{ Started(int) }); ok {
		st.Started(1) // as the real runtime tells a started command
	}
	if f.ExecFunc != nil {
		return f.ExecFunc(ctx, id, req, stdout, stderr)
	}
	_, err := stdout.Write(req.Stdin)
	return agentsandbox.ExecResult{}, err
}

// checkPath fails with sandbox.ErrPath for a path that leaves the workspace.
func checkPath(p string) error {
	if strings.HasPrefix(p, "/") || slices.Contains(strings.Split(p, "/"), "..") {
		return sandbox.ErrPath
	}
	return nil
}

// PutFile stores r's content (mode is ignored). It fails with
// sandbox.ErrNotFound for an unknown id, sandbox.ErrPath for a path that
// leaves the workspace, sandbox.ErrIsDir for a directory, or r's error.
func (f *Fake) PutFile(_ context.Context, id, path string, r io.Reader, _ fs.FileMode) error {
	b, err := f.get(id)
	if err != nil {
		return err
	}
	if err := checkPath(path); err != nil {
		return err
	}
	data, err := io.ReadAll(r)
	if err != nil {
		return fmt.Errorf("put file: %w", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := isDirError(b, path); err != nil {
		return err
	}
	b.files[path] = data
	return nil
}

// GetFile writes a stored file. It fails with sandbox.ErrNotFound for an
// unknown id, sandbox.ErrPath for a path that leaves the workspace,
// sandbox.ErrIsDir for a directory and fs.ErrNotExist (wrapped) for a
// missing file.
func (f *Fake) GetFile(_ context.Context, id, path string, w io.Writer) error {
	b, err := f.get(id)
	if err != nil {
		return err
	}
	if err := checkPath(path); err != nil {
		return err
	}
	f.mu.Lock()
	data, ok := b.files[path]
	dirErr := isDirError(b, path)
	f.mu.Unlock()
	if dirErr != nil {
		return dirErr
	}
	if !ok {
		return fmt.Errorf("get file %s: %w", path, fs.ErrNotExist)
	}
	_, err = io.Copy(w, bytes.NewReader(data))
	return err
}

// Delete removes a sandbox; the report is unverified when Leftovers is set.
// It fails with sandbox.ErrNotFound for an unknown id.
func (f *Fake) Delete(_ context.Context, id string) (sandbox.WipeReport, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.boxes[id]; !ok {
		return sandbox.WipeReport{}, sandbox.ErrNotFound
	}
	delete(f.boxes, id)
	return sandbox.WipeReport{Verified: len(f.Leftovers) == 0, Leftovers: f.Leftovers, Duration: time.Millisecond}, nil
}

// List returns the sandboxes, oldest first.
func (f *Fake) List() []sandbox.Info {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]sandbox.Info, 0, len(f.boxes))
	for _, b := range f.boxes {
		out = append(out, b.info)
	}
	slices.SortFunc(out, func(a, b sandbox.Info) int { return a.Slot - b.Slot })
	return out
}

// Capacity returns the number of slots.
func (f *Fake) Capacity() int { return f.cap }

// Active returns the number of sandboxes.
func (f *Fake) Active() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.boxes)
}

// Usage says the workspace holds the files put; the rest is zero.
func (f *Fake) Usage(id string) (agentsandbox.Usage, error) {
	b, err := f.get(id)
	if err != nil {
		return agentsandbox.Usage{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var u agentsandbox.Usage
	for _, data := range b.files {
		u.WorkspaceBytes += int64(len(data))
	}
	return u, nil
}

// Extend sets the time box to total from the sandbox's creation.
func (f *Fake) Extend(id string, total time.Duration) (sandbox.Info, error) {
	b, err := f.get(id)
	if err != nil {
		return sandbox.Info{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if end := b.info.CreatedAt.Add(total); end.After(time.Now()) {
		b.info.ExpiresAt = end
		return b.info, nil
	}
	return sandbox.Info{}, fmt.Errorf("extend: over: %w", sandbox.ErrInvalid)
}

// UpdateSecrets records secrets' names and hosts in the sandbox's Info and
// answers a placeholder per name ("agentsandbox-secret-" and the name in
// lower case): the fake brokers nothing (see sandbox.Runtime's).
func (f *Fake) UpdateSecrets(id string, secrets map[string]agentsandbox.Secret) (sandbox.Info, map[string]string, error) {
	b, err := f.get(id)
	if err != nil {
		return sandbox.Info{}, nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if b.info.Secrets == nil {
		b.info.Secrets = map[string][]string{}
	}
	ph := map[string]string{}
	for k, s := range secrets {
		b.info.Secrets[k] = s.Hosts
		ph[k] = agentsandbox.SecretPlaceholderPrefix + strings.ToLower(k)
	}
	return b.info, ph, nil
}

// errNoProcesses is the answer of every process method: the fake keeps no
// processes (test those against a real sandbox.Runtime).
var errNoProcesses = errors.New("apitest: the fake runtime keeps no processes")

// Start fails: see errNoProcesses.
func (f *Fake) Start(context.Context, string, agentsandbox.ExecRequest) (sandbox.Process, error) {
	return sandbox.Process{}, errNoProcesses
}

// Processes fails: see errNoProcesses.
func (f *Fake) Processes(context.Context, string) ([]sandbox.Process, error) {
	return nil, errNoProcesses
}

// Process fails: see errNoProcesses.
func (f *Fake) Process(context.Context, string, int) (sandbox.Process, error) {
	return sandbox.Process{}, errNoProcesses
}

// Output fails: see errNoProcesses.
func (f *Fake) Output(context.Context, string, int, bool, func(sandbox.Output) error) (sandbox.Process, error) {
	return sandbox.Process{}, errNoProcesses
}

// Signal fails: see errNoProcesses.
func (f *Fake) Signal(context.Context, string, int, string) error { return errNoProcesses }

// Stdin fails: see errNoProcesses.
func (f *Fake) Stdin(context.Context, string, int, io.Reader, bool) error { return errNoProcesses }

// Attach fails: see errNoProcesses.
func (f *Fake) Attach(context.Context, string, int) (*sandbox.Attachment, error) {
	return nil, errNoProcesses
}

// StartBrowser fails: see errNoProcesses.
func (f *Fake) StartBrowser(context.Context, string) (sandbox.Process, error) {
	return sandbox.Process{}, errNoProcesses
}

// Browser fails: see errNoProcesses.
func (f *Fake) Browser(context.Context, string) (*sandbox.BrowserConn, error) {
	return nil, errNoProcesses
}
