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
	Cwd string
	// Stdin is the command's standard input.
	Stdin []byte
	// Timeout ends the command (whole seconds); 0 means the time box.
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
	// memory, pids, deleted); empty for a normal exit.
	Reason string
	// DroppedBytes is the output dropped because the client read too slowly.
	DroppedBytes int64
}

// wireEvent is one NDJSON line of the exec answer.
type wireEvent struct {
	Stream       string `json:"stream"`
	Data         string `json:"data"`
	DataBase64   string `json:"data_base64"`
	DroppedBytes int64  `json:"dropped_bytes"`
	ExitCode     *int   `json:"exit_code"`
	Reason       string `json:"reason"`
	Error        *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// errNoEnd is the error of a stream that stopped before its last event.
var errNoEnd = errors.New("the worker's stream ended before the command's exit")

// ExecStream runs a command in sandbox id and calls fn with each output
// event as it arrives; an error from fn ends the call (and, as the
// connection closes, the command). It returns how the command ended. It
// fails with ErrNotFound for an unknown sandbox, a 400 *APIError for a bad
// request, or an *APIError from the stream's last event when the command
// could not run to its end.
func (w *Worker) ExecStream(ctx context.Context, id string, req ExecRequest, fn func(ExecEvent) error) (ExecResult, error) {
	body := map[string]any{"argv": req.Argv}
	if len(req.Env) > 0 {
		body["env"] = req.Env
	}
	if req.Cwd != "" {
		body["cwd"] = req.Cwd
	}
	if len(req.Stdin) > 0 {
		if utf8.Valid(req.Stdin) {
			body["stdin"] = string(req.Stdin)
		} else {
			body["stdin_base64"] = base64.StdEncoding.EncodeToString(req.Stdin)
		}
	}
	if req.Timeout > 0 {
		body["timeout_seconds"] = int((req.Timeout + time.Second - 1) / time.Second)
	}
	var res ExecResult
	err := w.doStream(ctx, sandboxPath(id, "exec"), body, func(ev wireEvent) (bool, error) {
		switch {
		case ev.Error != nil:
			return true, &APIError{StatusCode: http.StatusOK, Code: ev.Error.Code, Message: ev.Error.Message}
		case ev.ExitCode != nil:
			res = ExecResult{ExitCode: *ev.ExitCode, Reason: ev.Reason, DroppedBytes: ev.DroppedBytes}
			return true, nil
		}
		out := ExecEvent{Stream: ev.Stream, DroppedBytes: ev.DroppedBytes}
		if ev.DataBase64 != "" {
			b, err := base64.StdEncoding.DecodeString(ev.DataBase64)
			if err != nil {
				return true, fmt.Errorf("decode output: %w", err)
			}
			out.Data = b
		} else if ev.Data != "" {
			out.Data = []byte(ev.Data)
		}
		return false, fn(out)
	})
	if err != nil {
		return ExecResult{}, fmt.Errorf("exec: %w", err)
	}
	return res, nil
}

// doStream posts body and calls fn with each event until fn says the
// stream is done.
func (w *Worker) doStream(ctx context.Context, path string, body any, fn func(wireEvent) (bool, error)) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	hdr := http.Header{"Content-Type": {"application/json"}, "Accept": {"application/x-ndjson"}}
	resp, err := w.do(ctx, http.MethodPost, path, bytes.NewReader(b), hdr, http.StatusOK)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(resp.Body)
	for {
		var ev wireEvent
		if err := dec.Decode(&ev); err != nil {
			if errors.Is(err, io.EOF) {
				return errNoEnd
			}
			return fmt.Errorf("read stream: %w", scrub(err))
		}
		if done, err := fn(ev); done || err != nil {
			return err
		}
	}
}

// Exec runs a command in sandbox id, copying its output to stdout and
// stderr (nil: discarded) as it arrives, and returns how it ended; its
// errors are those of ExecStream, or a writer's.
func (w *Worker) Exec(ctx context.Context, id string, req ExecRequest, stdout, stderr io.Writer) (ExecResult, error) {
	return w.ExecStream(ctx, id, req, func(ev ExecEvent) error {
		dst := stdout
		if ev.Stream == "stderr" {
			dst = stderr
		}
		if dst == nil || len(ev.Data) == 0 {
			return nil
		}
		_, err := dst.Write(ev.Data)
		return err
	})
}
