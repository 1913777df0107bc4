package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"openvibe.network/agentsandbox"
	"openvibe.network/agentsandbox/live"
)

// ownerView is the owner's view of a stream's worker, as JSON.
type ownerView struct {
	State      live.State      `json:"state"`
	Reason     string          `json:"reason"`
	ReceivedAt *time.Time      `json:"received_at"`
	AgeSeconds *float64        `json:"age_seconds"`
	AliveUntil *time.Time      `json:"alive_until"`
	Report     json.RawMessage `json:"report"`
	Refusal    *refusalView    `json:"refusal"`
}

// refusalView is the last refusal as the owner sees it.
type refusalView struct {
	At        time.Time                      `json:"at"`
	ServiceID string                         `json:"service_id"`
	SubjectID string                         `json:"subject_id"`
	Errors    []agentsandbox.ValidationError `json:"errors"`
}

// handleOwnerJSON answers GET /api/streams/agent/{id}/plays/worker for the
// stream's owner (person token or session cookie).
func (s *Server) handleOwnerJSON(w http.ResponseWriter, r *http.Request, rl *reqLog) {
	v, err := s.ownerRead(r.Context(), readCredentials(r), r.PathValue("id"), rl)
	if err != nil {
		writeError(w, rl, err)
		return
	}
	rl.outcome = "ok"
	writeJSON(w, http.StatusOK, v)
}

// ownerRead authorizes p as the owner of streamID and returns the view. It
// returns the refusal as a *live.Error, or a store failure.
func (s *Server) ownerRead(ctx context.Context, p presented, streamID string, rl *reqLog) (ownerView, error) {
	f, err := s.lookup(ctx, p.secret())
	if err != nil {
		return ownerView{}, fmt.Errorf("owner view: %w", err)
	}
	d := decideOwnerCredential(p, f, s.now())
	rl.decided(d)
	if !d.ok() {
		return ownerView{}, d.err()
	}
	st, err := s.stream(ctx, streamID)
	if err != nil {
		return ownerView{}, fmt.Errorf("owner view: %w", err)
	}
	d = decideOwnership(d.principal, streamID, st)
	rl.reason = d.reason
	if !d.ok() {
		return ownerView{}, d.err()
	}
	rec, err := s.store.Worker(ctx, streamID)
	if err != nil {
		return ownerView{}, fmt.Errorf("owner view: %w", err)
	}
	return s.view(rec), nil
}

// view derives the health of rec at the server's clock and shapes it for
// the owner.
func (s *Server) view(rec live.WorkerRecord) ownerView {
	h := live.Derive(rec, s.now(), s.window)
	v := ownerView{State: h.State, Reason: h.Reason, AliveUntil: utcPtr(h.AliveUntil)}
	if reg := rec.Registration; reg != nil {
		at := reg.ReceivedAt.UTC()
		age := h.Age.Seconds()
		v.ReceivedAt, v.AgeSeconds, v.Report = &at, &age, json.RawMessage(reg.Report)
		if !json.Valid(v.Report) {
			// Only accepted (hence valid) reports are stored; never let a
			// damaged one break the view.
			v.Report = nil
		}
	}
	if ref := rec.Refusal; ref != nil {
		errs := ref.Errors
		if errs == nil {
			errs = []agentsandbox.ValidationError{}
		}
		v.Refusal = &refusalView{At: ref.At.UTC(), ServiceID: ref.ServiceID, SubjectID: ref.SubjectID, Errors: errs}
	}
	return v
}
