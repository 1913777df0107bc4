package httpapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
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
	// Browser asks for a sandbox in which a headless browser works.
	Browser bool `json:"browser,omitempty"`
	// Egress is what the sandbox may reach (default: the worker's default,
	// public unless configured otherwise).
	Egress *agentsandbox.EgressPolicy `json:"egress,omitempty"`
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

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

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
		Egress: egressView(in),
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
		if !envName.MatchString(k) {
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
	if req.Browser && !s.cfg.Browser {
		return &Error{Status: http.StatusBadRequest, Code: "no_browser",
			Message: "no browser on this worker; create the sandbox without `browser` or use a worker that reports browser: true"}
	}
	opts, err := s.egressOptions(req.Egress)
	if err != nil {
		return err
	}
	opts.TimeBox, opts.Limits, opts.Env = time.Duration(minutes)*time.Minute, s.cfg.Limits, req.Env
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

// delete handles DELETE /v1/sandboxes/{id}: the sandbox is wiped, and a
// wipe that could not verify itself is a 500 listing what is left.
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
		return &Error{Status: http.StatusInternalServerError, Code: "wipe_unverified", Leftovers: rep.Leftovers,
			Message: fmt.Sprintf("the sandbox was deleted but its wipe could not be verified (%d leftovers); the worker should not be trusted until its self-test passes", len(rep.Leftovers))}
	}
	addLog(r.Context(), slog.Float64("wipe_ms", float64(rep.Duration.Microseconds())/1000))
	w.WriteHeader(http.StatusNoContent)
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
		return &Error{Status: http.StatusNotImplemented, Code: "no_selftest",
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
