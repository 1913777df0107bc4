package httpapi

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"path"
	"slices"
	"strings"
	"time"

	"openvibe.network/agentsandbox"
	"openvibe.network/agentsandbox/sandbox"
)

// ExecRequest is the body of POST /v1/sandboxes/{id}/exec.
type ExecRequest struct {
	// Argv is the command and its arguments (required).
	Argv []string `json:"argv"`
	// Env is added to the sandbox's environment for this command.
	Env map[string]string `json:"env,omitempty"`
	// Cwd is the working directory, relative to /workspace (or an absolute
	// path under /workspace); default /workspace.
	Cwd string `json:"cwd,omitempty"`
	// Stdin is the command's standard input as text; StdinBase64 is the
	// same for bytes. At most one of them.
	Stdin       *string `json:"stdin,omitempty"`
	StdinBase64 *string `json:"stdin_base64,omitempty"`
	// TimeoutSeconds ends the command (not the sandbox); 0 means the time box.
	TimeoutSeconds int `json:"timeout_seconds,omitempty"`
}

// ExecEvent is one line of the NDJSON answer of an exec. Output events have
// Stream; the last event has ExitCode, or Error when the command could not
// be run to its end.
type ExecEvent struct {
	// Stream is "stdout" or "stderr" on output events.
	Stream string `json:"stream,omitempty"`
	// Data is the output as text; when DataBase64 is set, Data is a lossy
	// rendering and DataBase64 holds the exact bytes.
	Data       string `json:"data,omitempty"`
	DataBase64 string `json:"data_base64,omitempty"`
	// DroppedBytes, on an output event without data, is how much output of
	// Stream was dropped at this point because the client read too slowly;
	// on the last event, the total dropped.
	DroppedBytes int64 `json:"dropped_bytes,omitempty"`
	// ExitCode is set on the last event of a command that ran.
	ExitCode *int `json:"exit_code,omitempty"`
	// Reason says which limit ended the command: timeout, time_box, memory,
	// pids or deleted; empty for a normal exit.
	Reason string `json:"reason,omitempty"`
	// Error is set on the last event when the command could not be run.
	Error *Error `json:"error,omitempty"`
}

// toExecRequest validates req and converts it for the runtime.
func toExecRequest(req ExecRequest) (agentsandbox.ExecRequest, error) {
	var out agentsandbox.ExecRequest
	if len(req.Argv) == 0 || req.Argv[0] == "" {
		return out, badRequest("argv is required: give the command and its arguments, e.g. [\"sh\", \"-c\", \"make test\"]")
	}
	if slices.ContainsFunc(req.Argv, func(a string) bool { return strings.IndexByte(a, 0) >= 0 }) {
		return out, badRequest("argv must not contain NUL bytes")
	}
	if err := validateEnv("env", req.Env); err != nil {
		return out, err
	}
	cwd, err := cwdOf(req.Cwd)
	if err != nil {
		return out, err
	}
	if req.TimeoutSeconds < 0 || req.TimeoutSeconds > int(agentsandbox.MaxTimeBox/time.Second) {
		return out, badRequest("timeout_seconds is %d; give 0 (the time box) to %d", req.TimeoutSeconds, int(agentsandbox.MaxTimeBox/time.Second))
	}
	var stdin []byte
	switch {
	case req.Stdin != nil && req.StdinBase64 != nil:
		return out, badRequest("give stdin or stdin_base64, not both")
	case req.Stdin != nil:
		stdin = []byte(*req.Stdin)
	case req.StdinBase64 != nil:
		if stdin, err = base64.StdEncoding.DecodeString(*req.StdinBase64); err != nil {
			return out, badRequest("stdin_base64 is not standard base64: %v", err)
		}
	}
	return agentsandbox.ExecRequest{Argv: req.Argv, Env: req.Env, Cwd: cwd, Stdin: stdin,
		Timeout: time.Duration(req.TimeoutSeconds) * time.Second}, nil
}

// cwdOf turns a cwd into a path relative to /workspace, refusing one that
// leaves it.
func cwdOf(cwd string) (string, error) {
	if rest, ok := strings.CutPrefix(cwd, "/workspace"); ok && (rest == "" || rest[0] == '/') {
		cwd = strings.TrimPrefix(rest, "/")
	} else if strings.HasPrefix(cwd, "/") {
		return "", badRequest("cwd %q is outside the workspace; give a path relative to /workspace", cwd)
	}
	if cwd == "" {
		return "", nil
	}
	rel, err := workspacePath("cwd", cwd)
	if err != nil {
		return "", err
	}
	return rel, nil
}

// workspacePath checks a path relative to the workspace: not empty, not
// absolute, no `..`, no NUL; field names it in the message.
func workspacePath(field, p string) (string, error) {
	switch {
	case p == "":
		return "", badRequest("%s is empty; give a path relative to /workspace", field)
	case strings.IndexByte(p, 0) >= 0:
		return "", badRequest("%s contains a NUL byte", field)
	case strings.HasPrefix(p, "/"):
		return "", badRequest("%s %q is absolute; give a path relative to /workspace", field, p)
	case slices.Contains(strings.Split(p, "/"), ".."):
		return "", badRequest("%s %q contains `..`; paths must stay inside the workspace", field, p)
	}
	return path.Clean(p), nil
}

// exists reports whether the runtime has a sandbox id.
func (s *Server) exists(id string) bool {
	return slices.ContainsFunc(s.cfg.Runtime.List(), func(in sandbox.Info) bool { return in.ID == id })
}

// exec handles POST /v1/sandboxes/{id}/exec. After the checks it commits to
// 200 and streams NDJSON events. The command's output goes into a bounded
// queue (Config.StreamBuffer) that this goroutine drains to the client, one
// flushed event per chunk; the command never waits for the client. When the
// queue is full, output is dropped and an event says how much. When one
// write to the client takes longer than Config.WriteTimeout, the client is
// taken as gone and the command is cancelled.
func (s *Server) exec(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	var body ExecRequest
	if err := s.decodeJSON(w, r, &body); err != nil {
		return err
	}
	req, err := toExecRequest(body)
	if err != nil {
		return err
	}
	if !s.exists(id) {
		return errSandboxNotFound(id)
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	q := newOutQueue(s.cfg.StreamBuffer)
	type outcome struct {
		res agentsandbox.ExecResult
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := s.cfg.Runtime.Exec(ctx, id, req, streamWriter{q, stdout}, streamWriter{q, stderr})
		done <- outcome{res, err}
	}()

	ew := s.newEventWriter(w)
	ew.start()
	var end outcome
	for running := true; running; {
		select {
		case <-q.wake:
		case end = <-done:
			running = false
		}
		if !ew.send(q.take()) {
			cancel() // the client stopped reading: end the command
		}
	}
	ew.finish(finalEvent(id, end.res, end.err, q))
	addLog(r.Context(), execLog(q, ew, end.res, end.err)...)
	return nil
}

// execLog is what an exec adds to its request's log line (never stdin).
func execLog(q *outQueue, ew *eventWriter, res agentsandbox.ExecResult, err error) []slog.Attr {
	total, dropped := q.counts()
	attrs := []slog.Attr{slog.Int64("stdout_bytes", total[stdout]), slog.Int64("stderr_bytes", total[stderr]),
		slog.Int64("dropped_bytes", dropped[stdout]+dropped[stderr]), slog.Int("events", ew.events)}
	if err == nil {
		attrs = append(attrs, slog.Int("exit_code", res.ExitCode), slog.String("reason", res.Reason))
	} else {
		attrs = append(attrs, slog.String("exec_error", err.Error()))
	}
	if ew.err != nil {
		attrs = append(attrs, slog.String("client", "stalled or gone: "+ew.err.Error()))
	}
	return attrs
}

// finalEvent is the last event of an exec.
func finalEvent(id string, res agentsandbox.ExecResult, err error, q *outQueue) ExecEvent {
	_, dropped := q.counts()
	ev := ExecEvent{DroppedBytes: dropped[stdout] + dropped[stderr]}
	switch {
	case err == nil:
		ev.ExitCode, ev.Reason = &res.ExitCode, res.Reason
	case errors.Is(err, sandbox.ErrNotFound):
		ev.Error = errSandboxNotFound(id)
	default:
		ev.Error = toError(fmt.Errorf("exec: %w", err))
	}
	return ev
}

// eventWriter writes NDJSON events, each flushed and under a write deadline.
type eventWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	enc     *json.Encoder
	timeout time.Duration
	joiner  utf8Joiner
	events  int
	err     error // the first write error; nothing more is written after it
}

func (s *Server) newEventWriter(w http.ResponseWriter) *eventWriter {
	return &eventWriter{w: w, rc: http.NewResponseController(w), enc: json.NewEncoder(w),
		timeout: s.cfg.WriteTimeout}
}

// start sends the headers at once, so the client sees the answer begin
// before the command writes anything.
func (ew *eventWriter) start() {
	h := ew.w.Header()
	h.Set("Content-Type", "application/x-ndjson")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	ew.w.WriteHeader(http.StatusOK)
	ew.deadline()
	ew.flush()
}

// deadline gives the next write WriteTimeout from now (replacing the
// http.Server's own write timeout, which a long command would outlive).
func (ew *eventWriter) deadline() {
	if ew.err != nil {
		return
	}
	if err := ew.rc.SetWriteDeadline(time.Now().Add(ew.timeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		ew.err = err
	}
}

// send writes the events of chunks; it reports false once the client has
// failed a write.
func (ew *eventWriter) send(chunks []chunk) bool {
	for _, c := range chunks {
		if c.data == nil {
			for st, n := range c.dropped {
				if n > 0 {
					ew.write(ExecEvent{Stream: streamNames[st], DroppedBytes: n})
				}
			}
			continue
		}
		if b := ew.joiner.next(c.stream, c.data); len(b) > 0 {
			ew.write(dataEvent(c.stream, b))
		}
	}
	return ew.err == nil
}

// finish sends what the joiner held back, then the last event.
func (ew *eventWriter) finish(last ExecEvent) {
	for st := range streamNames {
		if b := ew.joiner.flush(st); len(b) > 0 {
			ew.write(dataEvent(st, b))
		}
	}
	ew.write(last)
}

// write sends one event and flushes it, under a fresh write deadline.
func (ew *eventWriter) write(ev ExecEvent) {
	ew.deadline()
	if ew.err != nil {
		return
	}
	if err := ew.enc.Encode(ev); err != nil {
		ew.err = err
		return
	}
	ew.events++
	ew.flush()
}

func (ew *eventWriter) flush() {
	if ew.err != nil {
		return
	}
	if err := ew.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		ew.err = err
	}
}
