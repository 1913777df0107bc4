package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"openvibe.network/agentsandbox"
	"openvibe.network/agentsandbox/live"
)

// ownerView is the owner's view of a stream's worker, as JSON.
type ownerView struct {
	State      live.State `json:"state"`
	Reason     string     `json:"reason"`
	ReceivedAt *time.Time `json:"received_at"`
	AgeSeconds *float64   `json:"age_seconds"`
	AliveUntil *time.Time `json:"alive_until"`
	// Degraded says the accepted report shows a problem (Problems); the
	// state stays what the contract makes it.
	Degraded bool     `json:"degraded"`
	Problems []string `json:"problems"`
	// Checks are the self-test's checks as the report states them; a check
	// the report leaves out is not_run.
	Checks []live.Check `json:"checks"`
	// Service and Subject are the registration's parties.
	Service *party          `json:"service"`
	Subject *party          `json:"subject"`
	Report  json.RawMessage `json:"report"`
	Refusal *refusalView    `json:"refusal"`

	assessment live.Assessment // for the page
}

// party is a principal by id and name ("" when it is gone).
type party struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// refusalView is the last refusal as the owner sees it.
type refusalView struct {
	At          time.Time `json:"at"`
	ServiceID   string    `json:"service_id"`
	ServiceName string    `json:"service_name"`
	SubjectID   string    `json:"subject_id"`
	SubjectName string    `json:"subject_name"`
	// Errors are the contract's errors, at most live.MaxRefusalErrors;
	// ErrorsTotal counts them all.
	Errors      []agentsandbox.ValidationError `json:"errors"`
	ErrorsTotal int                            `json:"errors_total"`
	// Facts are the five facts the refused report stated (name to JSON).
	Facts map[string]string `json:"facts"`
	// Reasons are the refused report's own reasons, cleaned.
	Reasons []string `json:"reasons"`
}

// handleOwnerJSON answers GET /api/streams/agent/{id}/plays/worker for the
// stream's owner (person token or session cookie).
func (s *Server) handleOwnerJSON(w http.ResponseWriter, r *http.Request, rl *reqLog) {
	ctx := r.Context()
	st, err := s.authorizeOwner(ctx, readCredentials(r), r.PathValue("id"), rl)
	if err != nil {
		writeError(w, rl, err)
		return
	}
	v, err := s.ownerView(ctx, st.ID)
	if err != nil {
		writeError(w, rl, err)
		return
	}
	rl.outcome = "ok"
	writeJSON(w, http.StatusOK, v)
}

// authorizePerson authorizes p as a person (person token or session) and
// returns the person's id.
func (s *Server) authorizePerson(ctx context.Context, p presented, rl *reqLog) (string, error) {
	f, err := s.lookup(ctx, p.secret())
	if err != nil {
		return "", fmt.Errorf("owner view: %w", err)
	}
	d := decideOwnerCredential(p, f, s.now())
	rl.decided(d)
	if !d.ok() {
		return "", d.err()
	}
	s.touch(ctx, f.cred)
	return d.principal, nil
}

// authorizeOwner authorizes p as the owner of streamID and returns the
// stream. It returns the refusal as a *live.Error, or a store failure.
func (s *Server) authorizeOwner(ctx context.Context, p presented, streamID string, rl *reqLog) (live.Stream, error) {
	person, err := s.authorizePerson(ctx, p, rl)
	if err != nil {
		return live.Stream{}, err
	}
	var st *live.Stream
	if validID(streamID) {
		if st, err = s.stream(ctx, streamID); err != nil {
			return live.Stream{}, fmt.Errorf("owner view: %w", err)
		}
	}
	d := decideOwnership(person, streamID, st)
	rl.reason = d.reason
	if !d.ok() {
		return live.Stream{}, d.err()
	}
	return *st, nil
}

// ownerView reads the stream's worker record and shapes it for the owner,
// names of the parties included.
func (s *Server) ownerView(ctx context.Context, streamID string) (ownerView, error) {
	rec, err := s.store.Worker(ctx, streamID)
	if err != nil {
		return ownerView{}, fmt.Errorf("owner view: %w", err)
	}
	v := s.view(rec)
	names := nameCache{s: s, ctx: ctx}
	if reg := rec.Registration; reg != nil {
		v.Service = &party{reg.ServiceID, names.service(reg.ServiceID)}
		v.Subject = &party{reg.SubjectID, names.person(reg.SubjectID)}
	}
	if v.Refusal != nil {
		v.Refusal.ServiceName, v.Refusal.SubjectName = names.service(v.Refusal.ServiceID), names.person(v.Refusal.SubjectID)
	}
	if names.err != nil {
		return ownerView{}, fmt.Errorf("owner view: %w", names.err)
	}
	return v, nil
}

// nameCache looks up names once each; a missing principal has the name ""
// and a store failure is kept in err.
type nameCache struct {
	s     *Server
	ctx   context.Context
	cache map[string]string
	err   error
}

func (n *nameCache) name(id string, get func() (string, error)) string {
	if v, ok := n.cache[id]; ok {
		return v
	}
	if n.cache == nil {
		n.cache = map[string]string{}
	}
	v, err := get()
	if err != nil && !missing(err) && n.err == nil {
		n.err = err
	}
	n.cache[id] = v
	return v
}

func (n *nameCache) service(id string) string {
	return n.name("svc:"+id, func() (string, error) {
		sv, err := n.s.store.Service(n.ctx, id)
		return sv.Name, err
	})
}

func (n *nameCache) person(id string) string {
	return n.name("per:"+id, func() (string, error) {
		p, err := n.s.store.Person(n.ctx, id)
		return p.Name, err
	})
}

// view derives the health of rec at the server's clock and shapes it for
// the owner.
func (s *Server) view(rec live.WorkerRecord) ownerView {
	h := live.Derive(rec, s.now(), s.window)
	v := ownerView{State: h.State, Reason: h.Reason, AliveUntil: utcPtr(h.AliveUntil), Problems: []string{}, Checks: []live.Check{}}
	if reg := rec.Registration; reg != nil {
		at := reg.ReceivedAt.UTC()
		age := h.Age.Seconds()
		v.ReceivedAt, v.AgeSeconds, v.Report = &at, &age, json.RawMessage(reg.Report)
		if !json.Valid(v.Report) {
			// Only accepted (hence valid) reports are stored; never let a
			// damaged one break the view.
			v.Report = nil
		}
		v.assessment = live.Assess(reg.Report)
		v.Degraded = v.assessment.Degraded
		v.Problems = append(v.Problems, v.assessment.Problems...)
		if v.assessment.Checks != nil {
			v.Checks = v.assessment.Checks
		}
	}
	if ref := rec.Refusal; ref != nil {
		rv := refusalView{At: ref.At.UTC(), ServiceID: ref.ServiceID, SubjectID: ref.SubjectID, Errors: ref.Errors,
			ErrorsTotal: max(ref.ErrorsTotal, len(ref.Errors)), Facts: ref.Facts, Reasons: ref.Reasons}
		if rv.Errors == nil {
			rv.Errors = []agentsandbox.ValidationError{}
		}
		if rv.Reasons == nil {
			rv.Reasons = []string{}
		}
		if rv.Facts == nil {
			rv.Facts = map[string]string{}
		}
		v.Refusal = &rv
	}
	return v
}

// Bounds of the history a request may ask for, in hours.
const (
	defaultHistoryHours = 24
	maxHistoryHours     = int(live.HistoryMaxAge / time.Hour)
)

// historyView is GET …/plays/worker/history: the stream's states over the
// last hours, as segments, with the share of that time it was alive (and
// without a problem: degraded time is not uptime) and the share it was
// alive but degraded.
type historyView struct {
	Stream          string            `json:"stream"`
	From            time.Time         `json:"from"`
	To              time.Time         `json:"to"`
	UptimePercent   float64           `json:"uptime_percent"`
	DegradedPercent float64           `json:"degraded_percent"`
	Segments        []live.Segment    `json:"segments"`
	Transitions     []live.Transition `json:"transitions"`
}

// handleHistory answers GET /api/streams/agent/{id}/plays/worker/history
// (?hours=N, 1 to 720, default 24) for the stream's owner.
func (s *Server) handleHistory(w http.ResponseWriter, r *http.Request, rl *reqLog) {
	ctx := r.Context()
	st, err := s.authorizeOwner(ctx, readCredentials(r), r.PathValue("id"), rl)
	if err != nil {
		writeError(w, rl, err)
		return
	}
	hours := defaultHistoryHours
	if q := r.URL.Query().Get("hours"); q != "" {
		n, err := strconv.Atoi(q)
		if err != nil || n < 1 || n > maxHistoryHours {
			writeError(w, rl, live.Errorf(live.EINVALID, "hours=%s: give a whole number of hours from 1 to %d", describe(q), maxHistoryHours))
			return
		}
		hours = n
	}
	h, err := s.history(ctx, st, time.Duration(hours)*time.Hour)
	if err != nil {
		writeError(w, rl, err)
		return
	}
	rl.outcome = "ok"
	writeJSON(w, http.StatusOK, h)
}

// history reads the stream's history over the last span and draws its
// timeline.
func (s *Server) history(ctx context.Context, st live.Stream, span time.Duration) (historyView, error) {
	to := s.now().UTC()
	from := to.Add(-span)
	ts, err := s.store.History(ctx, st.ID, from)
	if err != nil {
		return historyView{}, fmt.Errorf("history: %w", err)
	}
	rec, err := s.store.Worker(ctx, st.ID)
	if err != nil {
		return historyView{}, fmt.Errorf("history: %w", err)
	}
	segs := live.Timeline(ts, rec, st.CreatedAt, from, to, s.window)
	if segs == nil {
		segs = []live.Segment{}
	}
	if ts == nil {
		ts = []live.Transition{}
	}
	return historyView{Stream: st.ID, From: from, To: to, UptimePercent: roundTo(100*live.Uptime(segs), 2),
		DegradedPercent: roundTo(100*live.Share(segs, live.StateDegraded), 2), Segments: segs, Transitions: ts}, nil
}

// roundTo rounds x to n decimals.
func roundTo(x float64, n int) float64 {
	v, _ := strconv.ParseFloat(strconv.FormatFloat(x, 'f', n, 64), 64)
	return v
}
