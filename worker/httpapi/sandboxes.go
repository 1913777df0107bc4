package httpapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"openvibe.network/agentsandbox"
	"openvibe.network/agentsandbox/sandbox"
)

// CreateRequest is the body of POST /v1/sandboxes.
type CreateRequest struct {
	// TimeBoxMinutes is how long the sandbox lives, 5..30 (default 5).
	TimeBoxMinutes *int `json:"time_box_minutes,omitempty"`
	// Env is added to the environment of every command in the sandbox.
	Env map[string]string `json:"env,omitempty"`
	// Browser asks for a sandbox with a headless browser: true, or
	// {"start": true} to start it at once rather than at the first
	// connection.
	Browser BrowserOption `json:"browser,omitzero"`
	// Egress is what the sandbox may reach (default: the worker's default,
	// public unless configured otherwise).
	Egress *agentsandbox.EgressPolicy `json:"egress,omitempty"`
	// Limits are the sandbox's own, within the worker's (which its zero or
	// absent fields take).
	Limits *agentsandbox.Limits `json:"limits,omitempty"`
}

// PatchRequest is the body of PATCH /v1/sandboxes/{id}.
type PatchRequest struct {
	// TimeBoxMinutes sets the sandbox's time box anew, counted from when it
	// started as every time box is: 5..30, and not an end already past.
	TimeBoxMinutes *int `json:"time_box_minutes"`
}

// SandboxLimits are the limits of a sandbox as the API shows them.
type SandboxLimits struct {
	MemoryMB       int `json:"memory_mb"`
	DiskMB         int `json:"disk_mb"`
	Pids           int `json:"pids"`
	CPUPercent     int `json:"cpu_percent"`
	TimeBoxMinutes int `json:"time_box_minutes"`
}

// Sandbox describes a sandbox: the answer to a create and an item of a list.
type Sandbox struct {
	ID        string        `json:"id"`
	CreatedAt time.Time     `json:"created_at"`
	ExpiresAt time.Time     `json:"expires_at"`
	Limits    SandboxLimits `json:"limits"`
	// Egress is the policy the sandbox runs under, in canonical form.
	Egress agentsandbox.EgressPolicy `json:"egress"`
	// Browser says whether the sandbox has a headless browser (GET
	// …/browser).
	Browser bool `json:"browser"`
}

// SandboxState is the answer to GET /v1/sandboxes/{id}: the sandbox, its
// state and what it uses now.
type SandboxState struct {
	Sandbox
	// State is "running" (an ended sandbox is gone: 404).
	State string             `json:"state"`
	Usage agentsandbox.Usage `json:"usage"`
}

// WipeReport is the answer to DELETE /v1/sandboxes/{id}: the wipe removed
// everything of the sandbox and verified it (a wipe that could not is a 500
// wipe_unverified listing what is left).
type WipeReport struct {
	Verified   bool    `json:"verified"`
	DurationMS float64 `json:"duration_ms"`
}

// SandboxList is the answer to GET /v1/sandboxes.
type SandboxList struct {
	Items []Sandbox `json:"items"`
}

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
		Browser: in.Browser,
	}
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
	var req CreateRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
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
	opts.TimeBox, opts.Limits, opts.Env, opts.Browser = time.Duration(minutes)*time.Minute, limits, req.Env, req.Browser.Set
	info, err := s.cfg.Runtime.Create(r.Context(), opts)
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
	writeJSON(w, http.StatusOK, SandboxState{Sandbox: sandboxOf(info), State: "running", Usage: u})
	return nil
}

// patch handles PATCH /v1/sandboxes/{id}: a new time box.
func (s *Server) patch(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	var req PatchRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		return err
	}
	if req.TimeBoxMinutes == nil {
		return badRequest("give time_box_minutes, the sandbox's new time box from its start (%d to %d)", minTimeBoxMinutes, maxTimeBoxMinutes)
	}
	minutes := *req.TimeBoxMinutes
	if minutes < minTimeBoxMinutes || minutes > maxTimeBoxMinutes {
		return badRequest("time_box_minutes is %d; give %d to %d (counted from the sandbox's start)", minutes, minTimeBoxMinutes, maxTimeBoxMinutes)
	}
	info, err := s.cfg.Runtime.Extend(id, time.Duration(minutes)*time.Minute)
	switch {
	case errors.Is(err, sandbox.ErrNotFound):
		return errSandboxNotFound(id)
	case errors.Is(err, sandbox.ErrInvalid):
		return badRequest("time_box_minutes is %d, but the sandbox has run longer than that; give a longer time box", minutes)
	case err != nil:
		return fmt.Errorf("extend: %w", err)
	}
	addLog(r.Context(), slog.Int("time_box_minutes", minutes))
	writeJSON(w, http.StatusOK, sandboxOf(info))
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
	addLog(r.Context(), slog.Bool("passed", sum.Passed))
	writeJSON(w, http.StatusOK, sum)
	return nil
}
