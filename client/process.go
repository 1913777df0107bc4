package client

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
)

// ProcessInfo is the record of a command of a sandbox.
type ProcessInfo struct {
	Pid       int       `json:"pid"`
	Argv      []string  `json:"argv"`
	StartedAt time.Time `json:"started_at"`
	// TTY says it runs on a terminal; Background that it was started in
	// the background (a foreground one ends with its request).
	TTY        bool `json:"tty"`
	Background bool `json:"background"`
	// State is "running" or "exited".
	State string `json:"state"`
	// ExitCode and Reason are set once State is "exited" (Reason as
	// ExecResult's).
	ExitCode int    `json:"exit_code"`
	Reason   string `json:"reason"`
}

// Running reports whether the process had not exited when the record was
// taken.
func (p ProcessInfo) Running() bool { return p.State == "running" }

// Process is a handle of one command of a sandbox: from Start, or
// (*Sandbox).Process for a pid of Processes. It is safe for concurrent use.
type Process struct {
	sb  *Sandbox
	pid int
}

// Process returns the handle of command pid of the sandbox.
func (sb *Sandbox) Process(pid int) *Process { return &Process{sb: sb, pid: pid} }

// Pid returns the process's id in its sandbox.
func (p *Process) Pid() int { return p.pid }

// path is the path of the process plus rest.
func (p *Process) path(rest ...string) string {
	return p.sb.path(append([]string{"processes", strconv.Itoa(p.pid)}, rest...)...)
}

// Start runs req in the background and returns its handle at once (after
// the command started); it runs on, its output kept in a bounded buffer,
// until it exits, is signalled or the sandbox ends. req.Stdin and
// req.Timeout must be empty: write with Stdin, end it with Signal. It fails
// with ErrInvalidRequest for a bad request (a missing cwd among them) and
// ErrSandboxNotFound for an unknown sandbox.
func (sb *Sandbox) Start(ctx context.Context, req ExecRequest) (*Process, error) {
	body := bodyOf(req)
	body.Background = true
	info, err := sb.start(ctx, body)
	if err != nil {
		return nil, err
	}
	return sb.Process(info.Pid), nil
}

// start posts a background exec.
func (sb *Sandbox) start(ctx context.Context, body execBody) (ProcessInfo, error) {
	var info ProcessInfo
	if err := sb.w.doJSON(ctx, http.MethodPost, sb.path("exec"), body, &info, http.StatusCreated); err != nil {
		return ProcessInfo{}, fmt.Errorf("start: %w", err)
	}
	return info, nil
}

// Info returns the process's record. It fails with ErrProcessNotFound for
// an unknown pid and ErrSandboxNotFound once the sandbox is gone.
func (p *Process) Info(ctx context.Context) (ProcessInfo, error) {
	var info ProcessInfo
	if err := p.sb.w.doJSON(ctx, http.MethodGet, p.path(), nil, &info, http.StatusOK); err != nil {
		return ProcessInfo{}, fmt.Errorf("process %d: %w", p.pid, err)
	}
	return info, nil
}

// Output calls fn with each output event of the process: first what its
// buffer holds (an event with DroppedBytes when it has lost older output),
// then, when follow, everything it writes until it exits. It returns the
// process's record at the end (with follow: its exit). An error from fn
// ends the call, as does ending ctx (the process runs on). It fails with
// ErrProcessNotFound for an unknown pid and ErrSandboxNotFound once the
// sandbox is gone.
func (p *Process) Output(ctx context.Context, follow bool, fn func(ExecEvent) error) (ProcessInfo, error) {
	path := p.path("output")
	if follow {
		path += "?follow=1"
	}
	var rec ProcessInfo
	err := p.sb.w.doStream(ctx, http.MethodGet, path, nil, func(ev wireEvent) (bool, error) {
		if done, err := ev.last(); done {
			if err == nil && ev.Process != nil {
				rec = *ev.Process
			}
			return true, err
		}
		out, err := ev.output()
		if err != nil {
			return true, err
		}
		return false, fn(out)
	})
	if err != nil {
		return ProcessInfo{}, fmt.Errorf("output of %d: %w", p.pid, err)
	}
	return rec, nil
}

// Wait follows the process's output to its end, discarding it, and
// returns its record once it exited. Ending ctx ends the wait (the process
// runs on). Its errors are Output's.
func (p *Process) Wait(ctx context.Context) (ProcessInfo, error) {
	return p.Output(ctx, true, func(ExecEvent) error { return nil })
}

// Signal sends sig (TERM, KILL, INT, HUP, QUIT, USR1, USR2, STOP, CONT or
// WINCH; a SIG prefix is allowed) to the process's group. It fails with
// ErrInvalidRequest for another signal and ErrProcessNotFound for an
// unknown or exited process.
func (p *Process) Signal(ctx context.Context, sig string) error {
	body := map[string]string{"signal": sig}
	if err := p.sb.w.doJSON(ctx, http.MethodPost, p.path("signal"), body, nil, http.StatusNoContent); err != nil {
		return fmt.Errorf("signal %d: %w", p.pid, err)
	}
	return nil
}

// Stdin streams r (nil: nothing) to the process's stdin as it reads it, in
// one request, then, when closeInput, closes its stdin (on a terminal:
// types the end-of-file character). One request carries at most the
// worker's body limit (64 MiB by default; more is a 413 *APIError): see Run
// for input of any size. It fails with ErrProcessNotFound for an unknown or
// exited process, or with r's error.
func (p *Process) Stdin(ctx context.Context, r io.Reader, closeInput bool) error {
	path := p.path("stdin")
	if closeInput {
		path += "?close=1"
	}
	if r == nil {
		r = http.NoBody
	}
	resp, err := p.sb.w.do(ctx, http.MethodPost, path, r, http.Header{"Content-Type": {"application/octet-stream"}}, http.StatusNoContent)
	if err != nil {
		return fmt.Errorf("stdin of %d: %w", p.pid, err)
	}
	resp.Body.Close()
	return nil
}
