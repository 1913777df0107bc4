package httpapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"openvibe.network/agentsandbox"
	"openvibe.network/agentsandbox/sandbox"
)

// Limits of request fields.
const (
	minTimeBoxMinutes = int(agentsandbox.DefaultTimeBox / time.Minute)
	maxTimeBoxMinutes = int(agentsandbox.MaxTimeBox / time.Minute)
	maxEnvVars        = 256
	maxEnvBytes       = 128 << 10
)

// sandboxOf converts a runtime Info.
func sandboxOf(in sandbox.Info) Sandbox {
	return Sandbox{
		ID:        in.ID,
		CreatedAt: in.CreatedAt.UTC(),
		ExpiresAt: in.ExpiresAt.UTC(),
		Limits: SandboxLimits{
			MemoryMB: in.Limits.MemoryMB, DiskMB: in.Limits.DiskMB, Pids: in.Limits.Pids,
			CPUPercent:     in.Limits.CPUPercent,
			TimeBoxMinutes: int(in.ExpiresAt.Sub(in.CreatedAt).Round(time.Minute) / time.Minute),
		},
		Egress:  egressView(in),
		Secrets: secretsView(in.Secrets),
		Browser: in.Browser,
		Image:   in.Image, ImageDigest: in.ImageDigest,
		State: stateOf(in),
	}
}

// stateOf is a sandbox's state as the API names it.
func stateOf(in sandbox.Info) string {
	if in.Broken {
		return "broken"
	}
	return "running"
}

// validateEnv checks the names and values of an env object; field names the
// field in the message.
func validateEnv(field string, env map[string]string) error {
	if len(env) > maxEnvVars {
		return badRequest("%s has %d variables; at most %d are allowed", field, len(env), maxEnvVars)
	}
	size := 0
	for k, v := range env {
		if !agentsandbox.ValidEnvName(k) {
			return badRequest("%s name %q is not a valid variable name (letters, digits and _, not starting with a digit)", field, k)
		}
		if strings.IndexByte(v, 0) >= 0 {
			return badRequest("%s value of %q contains a NUL byte", field, k)
		}
		size += len(k) + len(v)
	}
	if size > maxEnvBytes {
		return badRequest("%s is %d bytes; at most %d are allowed", field, size, maxEnvBytes)
	}
	return nil
}

// create handles POST /v1/sandboxes.
func (s *Server) create(w http.ResponseWriter, r *http.Request) error {
	var req CreateRequest // an empty body: every default
	if err := s.decodeOptionalJSON(w, r, &req); err != nil {
		return err
	}
	minutes := minTimeBoxMinutes
	if req.TimeBoxMinutes != nil {
		minutes = *req.TimeBoxMinutes
	}
	if minutes < minTimeBoxMinutes || minutes > maxTimeBoxMinutes {
		return badRequest("time_box_minutes is %d; give %d to %d", minutes, minTimeBoxMinutes, maxTimeBoxMinutes)
	}
	if err := validateEnv("env", req.Env); err != nil {
		return err
	}
	limits := s.cfg.Limits
	if req.Limits != nil {
		if err := req.Limits.Within(s.cfg.Limits); err != nil {
			return badRequest("limits.%v (this worker's bounds)", err)
		}
		limits = req.Limits.Or(s.cfg.Limits)
	}
	if req.Browser.Set && !s.cfg.Browser {
		return &Error{Status: statusOf(CodeNoBrowser), Code: CodeNoBrowser,
			Message: "no browser on this worker; create the sandbox without `browser` or use a worker that reports browser: true"}
	}
	if req.Browser.Set {
		if err := limits.CheckBrowser(); err != nil {
			return badRequest("limits.%v (Chromium does not fit in less)", err)
		}
	}
	opts, err := s.egressOptions(req.Egress)
	if err != nil {
		return err
	}
	if err := checkSecrets(req.Secrets, req.Env, opts); err != nil {
		return err
	}
	opts.TimeBox, opts.Limits, opts.Env, opts.Browser = time.Duration(minutes)*time.Minute, limits, req.Env, req.Browser.Set
	opts.Secrets = req.Secrets
	if req.Image != "" {
		if req.Browser.Set {
			return badRequest("a browser sandbox runs on the host's view: give `browser` or `image`, not both")
		}
		if opts.Image, err = s.acquireImage(r.Context(), req.Image); err != nil {
			return err
		}
	}
	info, err := s.cfg.Runtime.Create(r.Context(), opts) // it releases opts.Image, whatever happens
	if err != nil {
		return fmt.Errorf("create sandbox: %w", err)
	}
	if err := r.Context().Err(); err != nil {
		// The client left and will never learn the id: do not keep the
		// slot busy until the time box ends.
		rep, derr := s.cfg.Runtime.Delete(context.WithoutCancel(r.Context()), info.ID)
		addLog(r.Context(), slog.String("abandoned", info.ID), slog.Bool("wiped", derr == nil && rep.Verified))
		return fmt.Errorf("create sandbox: client gone: %w", err)
	}
	if req.Browser.Start {
		if _, err := s.cfg.Runtime.StartBrowser(r.Context(), info.ID); err != nil {
			rep, derr := s.cfg.Runtime.Delete(context.WithoutCancel(r.Context()), info.ID)
			addLog(r.Context(), slog.String("abandoned", info.ID), slog.Bool("wiped", derr == nil && rep.Verified))
			return fmt.Errorf("create sandbox: start its browser: %w", err)
		}
	}
	addLog(r.Context(), slog.String("created", info.ID), slog.String("egress", egressView(info).Mode))
	if len(info.Secrets) > 0 {
		addLog(r.Context(), slog.Any("secrets", slices.Sorted(maps.Keys(info.Secrets))))
	}
	if info.ImageDigest != "" {
		addLog(r.Context(), slog.String("image", info.Image), slog.String("image_digest", info.ImageDigest))
	}
	writeJSON(w, http.StatusCreated, sandboxOf(info))
	return nil
}

// list handles GET /v1/sandboxes.
func (s *Server) list(w http.ResponseWriter, _ *http.Request) error {
	infos := s.cfg.Runtime.List()
	out := SandboxList{Items: make([]Sandbox, 0, len(infos))}
	for _, in := range infos {
		out.Items = append(out.Items, sandboxOf(in))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// get handles GET /v1/sandboxes/{id}.
func (s *Server) get(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	info, ok := s.info(id)
	if !ok {
		return errSandboxNotFound(id)
	}
	u, err := s.cfg.Runtime.Usage(id)
	if errors.Is(err, sandbox.ErrNotFound) {
		return errSandboxNotFound(id)
	}
	if err != nil {
		return fmt.Errorf("usage: %w", err)
	}
	writeJSON(w, http.StatusOK, SandboxState{Sandbox: sandboxOf(info), Usage: u})
	return nil
}

// patch handles PATCH /v1/sandboxes/{id}: a new time box, secrets added
// or rotated, or both (the secrets first: a refused secret changes
// nothing).
func (s *Server) patch(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	var req PatchRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		return err
	}
	if req.TimeBoxMinutes == nil && len(req.Secrets) == 0 {
		return badRequest("give time_box_minutes, the sandbox's new time box from its start (%d to %d), or secrets to add or rotate", minTimeBoxMinutes, maxTimeBoxMinutes)
	}
	minutes := 0
	if req.TimeBoxMinutes != nil {
		minutes = *req.TimeBoxMinutes
		if minutes < minTimeBoxMinutes || minutes > maxTimeBoxMinutes {
			return badRequest("time_box_minutes is %d; give %d to %d (counted from the sandbox's start)", minutes, minTimeBoxMinutes, maxTimeBoxMinutes)
		}
	}
	info, ok := s.info(id)
	if !ok {
		return errSandboxNotFound(id)
	}
	var placeholders map[string]string
	if len(req.Secrets) > 0 {
		var err error
		if info, placeholders, err = s.patchSecrets(info, req.Secrets); err != nil {
			return err
		}
		addLog(r.Context(), slog.Any("secrets", slices.Sorted(maps.Keys(req.Secrets))))
	}
	if req.TimeBoxMinutes != nil {
		var err error
		info, err = s.cfg.Runtime.Extend(id, time.Duration(minutes)*time.Minute)
		switch {
		case errors.Is(err, sandbox.ErrNotFound):
			return errSandboxNotFound(id)
		case errors.Is(err, sandbox.ErrInvalid):
			return badRequest("time_box_minutes is %d, but the sandbox has run longer than that; give a longer time box", minutes)
		case err != nil:
			return fmt.Errorf("extend: %w", err)
		}
		addLog(r.Context(), slog.Int("time_box_minutes", minutes))
	}
	out := sandboxOf(info)
	out.SecretPlaceholders = placeholders
	writeJSON(w, http.StatusOK, out)
	return nil
}

// delete handles DELETE /v1/sandboxes/{id}: the sandbox is wiped and the
// answer is its WipeReport; a wipe that could not verify itself is a 500
// listing what is left.
func (s *Server) delete(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	rep, err := s.cfg.Runtime.Delete(r.Context(), id)
	if errors.Is(err, sandbox.ErrNotFound) {
		return errSandboxNotFound(id)
	}
	if err == nil && !rep.Verified {
		err = errors.New("wipe not verified")
	}
	if err != nil {
		addLog(r.Context(), slog.Any("leftovers", rep.Leftovers))
		return &Error{Status: statusOf(CodeWipeUnverified), Code: CodeWipeUnverified, Leftovers: rep.Leftovers,
			Message: fmt.Sprintf("the sandbox was deleted but its wipe could not be verified (%d leftovers); the worker should not be trusted until its self-test passes", len(rep.Leftovers))}
	}
	ms := float64(rep.Duration.Microseconds()) / 1000
	addLog(r.Context(), slog.Float64("wipe_ms", ms))
	writeJSON(w, http.StatusOK, WipeReport{Verified: true, DurationMS: ms})
	return nil
}

// status handles GET /v1/status.
func (s *Server) status(w http.ResponseWriter, _ *http.Request) error {
	var st Status
	if s.cfg.Status != nil {
		st = s.cfg.Status()
	}
	if st.SelfTest != nil && st.SelfTest.NotRun == nil {
		sum := *st.SelfTest
		sum.NotRun = []string{}
		st.SelfTest = &sum
	}
	st.Capacity, st.Active = s.cfg.Runtime.Capacity(), s.cfg.Runtime.Active()
	writeJSON(w, http.StatusOK, st)
	return nil
}

// selfTest handles POST /v1/selftest.
func (s *Server) selfTest(w http.ResponseWriter, r *http.Request) error {
	if s.cfg.RunSelfTest == nil {
		return &Error{Status: statusOf(CodeNoSelfTest), Code: CodeNoSelfTest,
			Message: "this worker does not run a self-test on demand"}
	}
	sum, err := s.cfg.RunSelfTest(r.Context())
	if err != nil {
		return fmt.Errorf("run self-test: %w", err)
	}
	if sum.NotRun == nil {
		sum.NotRun = []string{}
	}
	addLog(r.Context(), slog.Bool("passed", sum.Passed))
	writeJSON(w, http.StatusOK, sum)
	return nil
}
