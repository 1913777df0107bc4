package client

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"openvibe.network/agentsandbox/workerapi"
	"time"
	"unicode/utf8"
)

// ExecRequest is a command to run in a sandbox.
type ExecRequest struct {
	// Argv is the command and its arguments (required).
	Argv []string
	// Env is added to the sandbox's environment for this command.
	Env map[string]string
	// Cwd is the working directory relative to /workspace (default: it).
	// A missing one is an ErrInvalidRequest naming it.
	Cwd string
	// Stdin is the command's standard input (foreground only; see Run and
	// (*Process).Stdin for streamed input).
	Stdin []byte
	// Timeout ends the command (whole seconds); 0 means the time box
	// (foreground only; bound a background command with Signal).
	Timeout time.Duration
}

// ExecEvent is an output event of a running command.
type ExecEvent struct {
	// Stream is "stdout" or "stderr".
	Stream string
	// Data is the exact output bytes (nil on a drop marker).
	Data []byte
	// DroppedBytes is how much output of Stream the worker dropped here
	// because the client read too slowly.
	DroppedBytes int64
}

// ExecResult is how a command ended.
type ExecResult struct {
	ExitCode int
	// Reason names the limit that ended the command (timeout, time_box,
	// memory, pids, deleted); empty for a normal exit (a command killed by
	// a signal exits 128 + its number).
	Reason string
	// DroppedBytes is the output dropped because the client read too slowly.
	DroppedBytes int64
}

// bodyOf is the exec body of req.
func bodyOf(req ExecRequest) workerapi.ExecRequest {
	b := workerapi.ExecRequest{Argv: req.Argv, Env: req.Env, Cwd: req.Cwd}
	if len(req.Stdin) > 0 {
		if utf8.Valid(req.Stdin) {
			s := string(req.Stdin)
			b.Stdin = &s
		} else {
			s := base64.StdEncoding.EncodeToString(req.Stdin)
			b.StdinBase64 = &s
		}
	}
	if req.Timeout > 0 {
		b.TimeoutSeconds = int((req.Timeout + time.Second - 1) / time.Second)
	}
	return b
}

// last reports whether ev ends its stream, and its error as an *APIError.
func last(ev workerapi.ExecEvent) (bool, error) {
	if ev.Error != nil {
		return true, &APIError{StatusCode: http.StatusOK, Code: ev.Error.Code, Message: ev.Error.Message}
	}
	return ev.ExitCode != nil || ev.Process != nil, nil
}

// output converts an output event.
func output(ev workerapi.ExecEvent) (ExecEvent, error) {
	out := ExecEvent{Stream: ev.Stream, DroppedBytes: ev.DroppedBytes}
	switch {
	case ev.DataBase64 != "":
		b, err := base64.StdEncoding.DecodeString(ev.DataBase64)
		if err != nil {
			return ExecEvent{}, fmt.Errorf("decode output: %w", err)
		}
		out.Data = b
	case ev.Data != "":
		out.Data = []byte(ev.Data)
	}
	return out, nil
}

// maxDrain bounds what is read of an answer after its last event.
const maxDrain = 4 << 10

// errNoEnd is the error of a stream that stopped before its last event.
var errNoEnd = errors.New("the worker's stream ended before the command's exit")

// ExecStream runs a command in the foreground and calls fn with each
// output event as it arrives; an error from fn ends the call (and, as the
// connection closes, the command), as does ending ctx. It returns how the
// command ended. It fails with ErrSandboxNotFound for an unknown sandbox,
// ErrInvalidRequest for a bad request (a missing cwd among them), or an
// *APIError from the stream's last event when the command could not run to
// its end.
func (sb *Sandbox) ExecStream(ctx context.Context, req ExecRequest, fn func(ExecEvent) error) (ExecResult, error) {
	var res ExecResult
	err := sb.w.doStream(ctx, http.MethodPost, sb.path("exec"), bodyOf(req), func(ev workerapi.ExecEvent) (bool, error) {
		if done, err := last(ev); done {
			if err == nil {
				res = ExecResult{ExitCode: *ev.ExitCode, Reason: ev.Reason, DroppedBytes: ev.DroppedBytes}
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
		return ExecResult{}, fmt.Errorf("exec: %w", err)
	}
	return res, nil
}

// doStream sends body (when not nil) and calls fn with each NDJSON event
// of the answer until fn says the stream is done.
func (w *Worker) doStream(ctx context.Context, method, path string, body any, fn func(workerapi.ExecEvent) (bool, error)) error {
	hdr := http.Header{"Accept": {"application/x-ndjson"}}
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		r = bytes.NewReader(b)
		hdr.Set("Content-Type", "application/json")
	}
	resp, err := w.do(ctx, method, path, r, hdr, http.StatusOK)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(resp.Body)
	for {
		var ev workerapi.ExecEvent
		if err := dec.Decode(&ev); err != nil {
			if errors.Is(err, io.EOF) {
				return errNoEnd
			}
			return fmt.Errorf("read stream: %w", scrub(err))
		}
		if done, err := fn(ev); done || err != nil {
			if done {
				// The answer ends right after its last event: read to its
				// end, so the connection is kept for the next call.
				_, _ = io.CopyN(io.Discard, resp.Body, maxDrain)
			}
			return err
		}
	}
}

// ExecStream runs a command in sandbox id: see (*Sandbox).ExecStream.
func (w *Worker) ExecStream(ctx context.Context, id string, req ExecRequest, fn func(ExecEvent) error) (ExecResult, error) {
	return w.Sandbox(id).ExecStream(ctx, req, fn)
}

// Exec runs a command in sandbox id: see (*Sandbox).Exec.
func (w *Worker) Exec(ctx context.Context, id string, req ExecRequest, stdout, stderr io.Writer) (ExecResult, error) {
	return w.Sandbox(id).Exec(ctx, req, stdout, stderr)
}
