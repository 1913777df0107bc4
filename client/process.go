package client

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"openvibe.network/agentsandbox/workerapi"
	"strconv"
	"time"
)

// ProcessInfo is the record of a command of a sandbox.
type ProcessInfo struct {
	Pid       int
	Argv      []string
	StartedAt time.Time
	// TTY says it runs on a terminal; Background that it was started in
	// the background (a foreground one ends with its request).
	TTY        bool
	Background bool
	// State is "running" or "exited".
	State string
	// ExitCode and Reason are set once State is "exited" (Reason as
	// ExecResult's).
	ExitCode int
	Reason   string
}

// processInfo is the client's record of the API's process.
func processInfo(p workerapi.Process) ProcessInfo {
	info := ProcessInfo{Pid: p.Pid, Argv: p.Argv, StartedAt: p.StartedAt, TTY: p.TTY, Background: p.Background,
		State: p.State, Reason: p.Reason}
	if p.ExitCode != nil {
		info.ExitCode = *p.ExitCode
	}
	return info
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
func (sb *Sandbox) start(ctx context.Context, body workerapi.ExecRequest) (ProcessInfo, error) {
	var p workerapi.Process
	if err := sb.w.doJSON(ctx, http.MethodPost, sb.path("exec"), body, &p, http.StatusCreated); err != nil {
		return ProcessInfo{}, fmt.Errorf("start: %w", err)
	}
	return processInfo(p), nil
}

// Info returns the process's record. It fails with ErrProcessNotFound for
// an unknown pid and ErrSandboxNotFound once the sandbox is gone.
func (p *Process) Info(ctx context.Context) (ProcessInfo, error) {
	var rec workerapi.Process
	if err := p.sb.w.doJSON(ctx, http.MethodGet, p.path(), nil, &rec, http.StatusOK); err != nil {
		return ProcessInfo{}, fmt.Errorf("process %d: %w", p.pid, err)
	}
	return processInfo(rec), nil
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
	err := p.sb.w.doStream(ctx, http.MethodGet, path, nil, func(ev workerapi.ExecEvent) (bool, error) {
		if done, err := last(ev); done {
			if err == nil && ev.Process != nil {
				rec = processInfo(*ev.Process)
			}
			return true, err
		}
		out, err := output(ev)
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
// ErrInvalidRequest for another signal, ErrProcessNotFound for an unknown
// process and ErrProcessExited for one that has exited.
func (p *Process) Signal(ctx context.Context, sig string) error {
	body := workerapi.SignalRequest{Signal: sig}
	if err := p.sb.w.doJSON(ctx, http.MethodPost, p.path("signal"), body, nil, http.StatusNoContent); err != nil {
		return fmt.Errorf("signal %d: %w", p.pid, err)
	}
	return nil
}

// Stdin streams r (nil: nothing) to the process's stdin as it reads it, in
// one request, then, when closeInput, closes its stdin (on a terminal:
// types the end-of-file character). One request carries at most the
// worker's body limit (64 MiB by default; more is a 413 *APIError): see Run
// for input of any size. It fails with ErrProcessNotFound for an unknown
// process, ErrProcessExited for one that had exited before the request
// (nothing of r was written), or with r's error.
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
