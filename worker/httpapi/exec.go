package httpapi

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"path"
	"slices"
	"strings"
	"time"

	"openvibe.network/agentsandbox"
	"openvibe.network/agentsandbox/sandbox"
)

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
	if err := checkCommandSize(req.Argv); err != nil {
		return out, err
	}
	cwd, err := cwdOf(req.Cwd)
	if err != nil {
		return out, err
	}
	if req.TimeoutSeconds < 0 || req.TimeoutSeconds > int(agentsandbox.MaxTimeBox/time.Second) {
		return out, badRequest("timeout_seconds is %d; give 0 (the time box) to %d", req.TimeoutSeconds, int(agentsandbox.MaxTimeBox/time.Second))
	}
	if req.Rows < 0 || req.Rows > maxTermSize || req.Cols < 0 || req.Cols > maxTermSize {
		return out, badRequest("rows and cols are %d×%d; give 1 to %d each (0: 24×80)", req.Rows, req.Cols, maxTermSize)
	}
	if (req.Rows != 0 || req.Cols != 0) && !req.TTY {
		return out, badRequest("rows and cols are for a terminal; add \"tty\": true or leave them out")
	}
	if req.Background && (req.Stdin != nil || req.StdinBase64 != nil || req.TimeoutSeconds != 0) {
		return out, badRequest("a background command takes no stdin or timeout_seconds; write to POST …/processes/{pid}/stdin and signal it instead")
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
		Timeout: time.Duration(req.TimeoutSeconds) * time.Second,
		TTY:     req.TTY, Rows: uint16(req.Rows), Cols: uint16(req.Cols)}, nil
}

// Bounds of a command, as Linux's execve has them: each string at most
// 128 KiB, and argv with the env (this request's and the sandbox's) well
// inside its total.
const (
	maxArgBytes  = 128 << 10
	maxArgvBytes = 256 << 10
	maxTermSize  = 1000
)

// checkCommandSize refuses an argv the sandbox could not execute (env is
// bounded by validateEnv).
func checkCommandSize(argv []string) error {
	total := 0
	for i, a := range argv {
		if len(a) > maxArgBytes {
			return badRequest("argv[%d] is %d bytes; at most %d are allowed per argument (put large input in a file or stdin)", i, len(a), maxArgBytes)
		}
		total += len(a) + 1
	}
	if total > maxArgvBytes {
		return badRequest("argv is %d bytes; at most %d are allowed (put large input in a file or stdin)", total, maxArgvBytes)
	}
	return nil
}

// cwdOf turns a cwd into a path relative to /workspace, refusing one that
// leaves it.
func cwdOf(cwd string) (string, error) {
	if rest, ok := strings.CutPrefix(cwd, "/workspace"); ok && (rest == "" || rest[0] == '/') {
		cwd = strings.TrimPrefix(rest, "/")
	} else if strings.HasPrefix(cwd, "/") {
		return "", badRequest("cwd %q is not under /workspace: a command starts in the workspace or one of its directories; give a path relative to /workspace "+
			"(to work in /tmp, which the sandbox may write too, run e.g. sh -c 'cd /tmp && …')", cwd)
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

// Bounds of a workspace path: Linux's for one name (NAME_MAX), the init's
// for a whole path.
const (
	maxNameBytes = 255
	maxPathBytes = 4000
)

// workspacePath checks a path relative to the workspace: not empty, not
// absolute, no `..`, no NUL, no name over maxNameBytes, at most
// maxPathBytes; field names it in the message.
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
	case len(p) > maxPathBytes:
		return "", badRequest("%s is %d bytes long; a path may have at most %d", field, len(p), maxPathBytes)
	}
	for _, name := range strings.Split(p, "/") {
		if len(name) > maxNameBytes {
			return "", badRequest("%s holds a name of %d bytes (%.24q…); a file or directory name may have at most %d", field, len(name), name, maxNameBytes)
		}
	}
	return path.Clean(p), nil
}

// exists reports whether the runtime has a sandbox id.
func (s *Server) exists(id string) bool {
	_, ok := s.info(id)
	return ok
}

// info returns sandbox id's Info, or false.
func (s *Server) info(id string) (sandbox.Info, bool) {
	for _, in := range s.cfg.Runtime.List() {
		if in.ID == id {
			return in, true
		}
	}
	return sandbox.Info{}, false
}

// exec handles POST /v1/sandboxes/{id}/exec. A background command is
// started and answered with 201 and its process. A foreground one is
// answered once it started (a request refused before, such as a missing
// cwd, is a plain error answer) with 200 and NDJSON events. Its output goes
// into a bounded queue (Config.StreamBuffer) that this goroutine drains to
// the client, one flushed event per chunk; the command never waits for the
// client. When the queue is full, output is dropped and an event says how
// much. When one write to the client takes longer than Config.WriteTimeout,
// or the client closes the request, the command is killed.
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
	if body.Background {
		p, err := s.cfg.Runtime.Start(r.Context(), id, req)
		if err != nil {
			return execError(id, body.Cwd, err)
		}
		addLog(r.Context(), slog.Int("pid", p.Pid))
		writeJSON(w, http.StatusCreated, processOf(p))
		return nil
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

	var end outcome
	finished := false
	select { // the start, or output of a command that could not start, or the end
	case <-q.started:
	case <-q.wake:
	case end = <-done:
		finished = true
		select {
		case <-q.started: // it started, then failed: that is the stream's to say
		default:
			if total, _ := q.counts(); end.err != nil && total == [2]int64{} {
				return execError(id, body.Cwd, end.err)
			}
		}
	}
	ew := s.newEventWriter(w)
	ew.start()
	if !ew.send(q.take()) { // the output whose wake the select above took
		cancel()
	}
	for !finished {
		select {
		case <-q.wake:
		case end = <-done:
			finished = true
		}
		if !ew.send(q.take()) {
			cancel() // the client stopped reading: end the command
		}
	}
	ew.send(q.take())
	ew.finish(finalEvent(id, end.res, end.err, q))
	addLog(r.Context(), execLog(q, ew, end.res, end.err)...)
	return nil
}

// execError maps an error of a command that did not start.
func execError(id, cwd string, err error) error {
	switch {
	case errors.Is(err, sandbox.ErrNotFound):
		return errSandboxNotFound(id)
	case errors.Is(err, fs.ErrNotExist):
		return badRequest("cwd %q does not exist in the workspace; make it first (PUT …/files/DIR/ with X-File-Type: directory) or give another", cwd)
	case errors.Is(err, sandbox.ErrNotDir):
		return badRequest("cwd %q is not a directory", cwd)
	case errors.Is(err, sandbox.ErrTooLarge):
		return badRequest("argv and env together are too large to run; put large input in a file or stdin")
	case errors.Is(err, sandbox.ErrPath):
		return badRequest("cwd %q leaves the workspace; give a path inside /workspace without `..`", cwd)
	case errors.Is(err, sandbox.ErrInvalid), errors.Is(err, sandbox.ErrCapacity):
		return badRequest("%s", strings.TrimPrefix(err.Error(), "start: "))
	}
	return fmt.Errorf("exec: %w", err)
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
		ev.Error = errSandboxNotFound(id).wire()
	default:
		ev.Error = toError(fmt.Errorf("exec: %w", err)).wire()
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
