package httpapi

import (
	"bytes"
	"encoding/base64"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"openvibe.network/agentsandbox/sandbox"
)

// processOf converts a runtime Process.
func processOf(p sandbox.Process) Process {
	out := Process{Pid: p.Pid, Argv: p.Argv, StartedAt: time.Unix(0, p.Started).UTC(), TTY: p.TTY,
		Background: p.Background, State: "running"}
	if !p.Running {
		code := p.ExitCode
		out.State, out.ExitCode, out.Reason = "exited", &code, p.Reason
	}
	return out
}

// processTarget checks the sandbox and pid of a process route.
func (s *Server) processTarget(r *http.Request) (id string, pid int, err error) {
	id = r.PathValue("id")
	pid, err = strconv.Atoi(r.PathValue("pid"))
	if err != nil || pid <= 0 {
		return "", 0, badRequest("pid %q is not a process id; list them with GET /v1/sandboxes/%s/processes", r.PathValue("pid"), id)
	}
	if !s.exists(id) {
		return "", 0, errSandboxNotFound(id)
	}
	return id, pid, nil
}

// processError maps an error of a process route.
func processError(id string, pid int, err error) error {
	switch {
	case errors.Is(err, sandbox.ErrNotFound):
		return errSandboxNotFound(id)
	case errors.Is(err, sandbox.ErrNoProcess):
		return newError(CodeProcessNotFound, "no process %d in sandbox %s; list them with GET /v1/sandboxes/%s/processes", pid, id, id)
	case errors.Is(err, sandbox.ErrExited):
		return newError(CodeProcessExited, "process %d of sandbox %s has exited, so it takes no more signals or stdin (nothing was sent); its record, with its exit code: GET /v1/sandboxes/%s/processes/%d", pid, id, id, pid)
	case errors.Is(err, sandbox.ErrInvalid):
		return badRequest("%s", err.Error())
	}
	return err
}

// processes handles GET …/processes: every command, oldest first.
func (s *Server) processes(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if !s.exists(id) {
		return errSandboxNotFound(id)
	}
	ps, err := s.cfg.Runtime.Processes(r.Context(), id)
	if err != nil {
		return processError(id, 0, err)
	}
	out := ProcessList{Items: make([]Process, 0, len(ps))}
	for _, p := range ps {
		out.Items = append(out.Items, processOf(p))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// process handles GET …/processes/{pid}.
func (s *Server) process(w http.ResponseWriter, r *http.Request) error {
	id, pid, err := s.processTarget(r)
	if err != nil {
		return err
	}
	p, err := s.cfg.Runtime.Process(r.Context(), id, pid)
	if err != nil {
		return processError(id, pid, err)
	}
	writeJSON(w, http.StatusOK, processOf(p))
	return nil
}

// output handles GET …/processes/{pid}/output[?follow=1]: NDJSON events of
// what its buffer holds (an event with dropped_bytes first when the buffer
// has lost older output) and, with follow, everything it writes until it
// exits; the last event holds its record. The init keeps the buffer and
// drops for a follower that reads too slowly, so this never slows the
// process; a client that stalls a write for Config.WriteTimeout is cut off.
func (s *Server) output(w http.ResponseWriter, r *http.Request) error {
	id, pid, err := s.processTarget(r)
	if err != nil {
		return err
	}
	follow, err := boolQuery(r, "follow")
	if err != nil {
		return err
	}
	// The answer begins with the first event, so a missing process is
	// still a plain 404.
	ew := s.newEventWriter(w)
	started := false
	p, err := s.cfg.Runtime.Output(r.Context(), id, pid, follow, func(o sandbox.Output) error {
		if !started {
			ew.start()
			started = true
		}
		st := stdout
		if o.Stream == "stderr" {
			st = stderr
		}
		if o.Dropped > 0 {
			ew.write(ExecEvent{Stream: streamNames[st], DroppedBytes: o.Dropped})
		} else if b := ew.joiner.next(st, o.Data); len(b) > 0 {
			ew.write(dataEvent(st, b))
		}
		return ew.err
	})
	if err != nil && !started {
		return processError(id, pid, err)
	}
	if !started {
		ew.start()
	}
	if err != nil {
		ew.finish(ExecEvent{Error: toError(processError(id, pid, err)).wire()})
		addLog(r.Context(), slog.String("output_error", err.Error()))
		return nil
	}
	rec := processOf(p)
	ew.finish(ExecEvent{Process: &rec, ExitCode: rec.ExitCode, Reason: rec.Reason})
	return nil
}

// signal handles POST …/processes/{pid}/signal: to its process group.
func (s *Server) signal(w http.ResponseWriter, r *http.Request) error {
	id, pid, err := s.processTarget(r)
	if err != nil {
		return err
	}
	var req SignalRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		return err
	}
	sig := strings.TrimPrefix(strings.ToUpper(req.Signal), "SIG")
	if sig == "" {
		return badRequest(`give signal, e.g. {"signal":"TERM"}`)
	}
	if err := s.cfg.Runtime.Signal(r.Context(), id, pid, sig); err != nil {
		if errors.Is(err, sandbox.ErrInvalid) {
			return badRequest("signal %q is not one a process may be sent; give TERM, KILL, INT, HUP, QUIT, USR1, USR2, STOP, CONT or WINCH", req.Signal)
		}
		return processError(id, pid, err)
	}
	addLog(r.Context(), slog.Int("pid", pid), slog.String("signal", sig))
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// stdin handles POST …/processes/{pid}/stdin: the body's bytes (or a JSON
// StdinRequest) to the process's stdin, streamed as they arrive.
func (s *Server) stdin(w http.ResponseWriter, r *http.Request) error {
	id, pid, err := s.processTarget(r)
	if err != nil {
		return err
	}
	var src io.Reader
	var closeAfter bool
	switch ct := r.Header.Get("Content-Type"); {
	case strings.HasPrefix(ct, "application/json"):
		var req StdinRequest
		if err := s.decodeJSON(w, r, &req); err != nil {
			return err
		}
		var data []byte
		switch {
		case req.Data != nil && req.DataBase64 != nil:
			return badRequest("give data or data_base64, not both")
		case req.Data != nil:
			data = []byte(*req.Data)
		case req.DataBase64 != nil:
			if data, err = base64.StdEncoding.DecodeString(*req.DataBase64); err != nil {
				return badRequest("data_base64 is not standard base64: %v", err)
			}
		}
		src, closeAfter = bytes.NewReader(data), req.Close
	case ct == "" || strings.HasPrefix(ct, "application/octet-stream"):
		if closeAfter, err = boolQuery(r, "close"); err != nil {
			return err
		}
		src = &limitedBody{r: http.MaxBytesReader(w, r.Body, s.cfg.MaxBody)}
	default:
		return newError(CodeUnsupportedType, "send stdin as application/octet-stream (the bytes) or application/json (a StdinRequest)")
	}
	if err := s.cfg.Runtime.Stdin(r.Context(), id, pid, src, closeAfter); err != nil {
		var tooBig *http.MaxBytesError
		if lb, ok := src.(*limitedBody); ok && errors.As(lb.err, &tooBig) {
			return tooBig
		}
		return processError(id, pid, err)
	}
	addLog(r.Context(), slog.Int("pid", pid), slog.Bool("closed", closeAfter))
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// boolQuery reads a query parameter that is 1/true or 0/false (absent:
// false).
func boolQuery(r *http.Request, name string) (bool, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, badRequest("?%s=%s is not a boolean; give 1 or 0", name, v)
	}
	return b, nil
}
