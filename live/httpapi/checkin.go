package httpapi

import (
	"context"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"

	"openvibe.network/agentsandbox"
	"openvibe.network/agentsandbox/contract"
	"openvibe.network/agentsandbox/live"
)

// accepted is the body of a 200 answer to a check-in.
type accepted struct {
	Registered bool       `json:"registered"`
	State      live.State `json:"state"`
	AliveUntil *time.Time `json:"alive_until"`
	ReceivedAt time.Time  `json:"received_at"`
}

// handleCheckIn answers POST /api/streams/agent/{id}/plays/worker, checking
// the design's table in order; the first failure answers.
func (s *Server) handleCheckIn(w http.ResponseWriter, r *http.Request, rl *reqLog) {
	ctx := r.Context()
	streamID := r.PathValue("id")
	service, subject, err := s.authorizeCheckIn(ctx, r, streamID, rl)
	if err != nil {
		writeError(w, rl, err)
		return
	}
	body, value, err := readReport(r)
	if err != nil {
		writeError(w, rl, err)
		return
	}
	res, err := contract.Validate(agentsandbox.WorkerCheckInContract, value)
	if err != nil {
		writeError(w, rl, fmt.Errorf("validate report: %w", err))
		return
	}
	if !res.Valid {
		errs := redactErrors(res.Errors)
		_, err := s.store.Refuse(ctx, live.Refusal{StreamID: streamID, ServiceID: service, SubjectID: subject, Errors: errs})
		if err != nil {
			writeError(w, rl, fmt.Errorf("record refusal: %w", err))
			return
		}
		writeContractRefusal(w, rl, errs)
		return
	}
	reg, err := s.store.Accept(ctx, live.Registration{StreamID: streamID, Report: body, ServiceID: service, SubjectID: subject})
	if err != nil {
		writeError(w, rl, fmt.Errorf("accept check-in: %w", err))
		return
	}
	h := live.Derive(live.WorkerRecord{Registration: &reg}, s.now(), s.window)
	rl.outcome = outcomeAccepted
	writeJSON(w, http.StatusOK, accepted{Registered: true, State: h.State, AliveUntil: utcPtr(h.AliveUntil), ReceivedAt: reg.ReceivedAt.UTC()})
}

// authorizeCheckIn checks rows 1 to 6 of the table: the credential, the
// principal, the subject and the stream. It returns the service and subject
// ids, or the refusal as a *live.Error (or a store failure).
func (s *Server) authorizeCheckIn(ctx context.Context, r *http.Request, streamID string, rl *reqLog) (service, subject string, err error) {
	p := readCredentials(r)
	f, err := s.lookup(ctx, p.secret())
	if err != nil {
		return "", "", fmt.Errorf("check in: %w", err)
	}
	d := decideCheckIn(p, f, s.now())
	rl.decided(d)
	if !d.ok() {
		return "", "", d.err()
	}
	service = d.principal
	g := delegation{subjects: r.Header.Values(SubjectHeader)}
	if len(g.subjects) == 1 && strings.TrimSpace(g.subjects[0]) != "" {
		if g.subjectKnown, g.stream, err = s.delegation(ctx, streamID, g.subjects[0]); err != nil {
			return "", "", fmt.Errorf("check in: %w", err)
		}
	}
	d = decideDelegation(streamID, g)
	rl.reason = d.reason
	if !d.ok() {
		return "", "", d.err()
	}
	return service, d.principal, nil
}

// readReport checks rows 7 to 9 of the table: the body's size (reading at
// most MaxBody+1 bytes), its Content-Type and that it is strict JSON. It
// returns the body as sent and its decoded value.
func readReport(r *http.Request) ([]byte, any, error) {
	if r.ContentLength > MaxBody {
		return nil, nil, tooLarge()
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxBody+1))
	if err != nil {
		return nil, nil, live.Errorf(live.EINVALID, "the body could not be read: send the whole report")
	}
	if len(body) > MaxBody {
		return nil, nil, tooLarge()
	}
	if err := checkMediaType(r.Header.Values("Content-Type")); err != nil {
		return nil, nil, err
	}
	value, err := contract.DecodeStrict(body)
	if err != nil {
		return nil, nil, live.Errorf(EMALFORMED, "the body is not strict JSON (%s): send one well-formed UTF-8 JSON object with no duplicate keys and nothing after it", clip(redact(err.Error()), 300))
	}
	return body, value, nil
}

func tooLarge() error {
	return live.Errorf(ETOOLARGE, "the body is over %d bytes (64 KiB): send a smaller report", MaxBody)
}

// checkMediaType refuses anything but one application/json Content-Type;
// a charset parameter, if any, must be utf-8.
func checkMediaType(values []string) error {
	const fix = "send Content-Type: application/json"
	switch len(values) {
	case 0:
		return live.Errorf(EMEDIATYPE, "the Content-Type header is missing: %s", fix)
	case 1:
	default:
		return live.Errorf(EMEDIATYPE, "send exactly one Content-Type header: %s", fix)
	}
	mt, params, err := mime.ParseMediaType(values[0])
	if err != nil {
		return live.Errorf(EMEDIATYPE, "the Content-Type cannot be parsed: %s", fix)
	}
	if mt != "application/json" {
		return live.Errorf(EMEDIATYPE, "the Content-Type is %s: %s", describe(mt), fix)
	}
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") {
		return live.Errorf(EMEDIATYPE, "the charset is %s, but JSON is UTF-8: %s (charset=utf-8 is allowed)", describe(cs), fix)
	}
	return nil
}

// redactErrors returns errs with anything secret-like removed from paths
// and messages.
func redactErrors(errs []agentsandbox.ValidationError) []agentsandbox.ValidationError {
	out := make([]agentsandbox.ValidationError, len(errs))
	for i, e := range errs {
		out[i] = agentsandbox.ValidationError{Path: redact(e.Path), Message: redact(e.Message)}
	}
	return out
}

// clip shortens s to at most n bytes of valid UTF-8.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}

// stream returns the stream id, or nil when there is none.
func (s *Server) stream(ctx context.Context, id string) (*live.Stream, error) {
	st, err := s.store.Stream(ctx, id)
	switch {
	case missing(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("look up stream: %w", err)
	}
	return &st, nil
}

// delegation looks up the stream (nil when there is none) and whether
// subject is a known person. A stream's owner is a known person (the stores
// hold streams only for existing owners), so the common case, the owner
// checking in, costs no second lookup.
func (s *Server) delegation(ctx context.Context, streamID, subject string) (known bool, st *live.Stream, err error) {
	if st, err = s.stream(ctx, streamID); err != nil {
		return false, nil, err
	}
	if st != nil && st.OwnerID == subject {
		return true, st, nil
	}
	_, err = s.store.Person(ctx, subject)
	switch {
	case missing(err):
		return false, st, nil
	case err != nil:
		return false, nil, fmt.Errorf("look up person: %w", err)
	}
	return true, st, nil
}

// missing reports whether a lookup found nothing: not found, or an id the
// store cannot even hold (which then names nothing).
func missing(err error) bool {
	c := live.ErrorCode(err)
	return c == live.ENOTFOUND || c == live.EINVALID
}

// utcPtr returns t in UTC (nil stays nil).
func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}
