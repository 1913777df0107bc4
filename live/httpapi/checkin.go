package httpapi

import (
	"context"
	"errors"
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
	body, res, err := readReport(r)
	if err != nil {
		writeError(w, rl, err)
		return
	}
	if !res.Valid {
		s.refuse(ctx, w, rl, live.Refusal{StreamID: streamID, ServiceID: service, SubjectID: subject, Errors: redactErrors(res.Errors)}, body)
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

// refuse records a contract refusal, with the refused report's own reasons
// (never as a registration), and answers it 422.
func (s *Server) refuse(ctx context.Context, w http.ResponseWriter, rl *reqLog, ref live.Refusal, body []byte) {
	if v, err := contract.DecodeStrict(body); err == nil { // Check decoded it already
		ref.Reasons = live.RefusedReasons(v)
	}
	if _, err := s.store.Refuse(ctx, ref); err != nil {
		writeError(w, rl, fmt.Errorf("record refusal: %w", err))
		return
	}
	s.metrics.refused(ref.Errors)
	writeContractRefusal(w, rl, ref.Errors)
}

// authorizeCheckIn checks rows 1 to 6 of the table: the credential, the
// principal, the subject and the stream, from one read of the store. It
// returns the service and subject ids, or the refusal as a *live.Error (or a
// store failure).
func (s *Server) authorizeCheckIn(ctx context.Context, r *http.Request, streamID string, rl *reqLog) (service, subject string, err error) {
	p := readCredentials(r)
	g := delegation{subjects: r.Header.Values(SubjectHeader)}
	var l live.CheckInLookup
	if secret := p.secret(); secret != "" {
		subj := ""
		if len(g.subjects) > 0 {
			subj = g.subjects[0]
		}
		if l, err = s.store.LookupCheckIn(ctx, live.HashSecret(secret), streamID, subj); err != nil {
			return "", "", fmt.Errorf("check in: %w", err)
		}
	}
	f := found{cred: l.Credential, service: l.Service}
	d := decideCheckIn(p, f, s.now())
	rl.decided(d)
	if !d.ok() {
		return "", "", d.err()
	}
	s.touch(ctx, f.cred)
	service = d.principal
	g.stream, g.subjectKnown = l.Stream, l.SubjectKnown
	d = decideDelegation(streamID, g)
	rl.reason = d.reason
	if !d.ok() {
		return "", "", d.err()
	}
	return service, d.principal, nil
}

// readReport checks rows 7 to 10 of the table: the body's size (reading at
// most MaxBody+1 bytes), its Content-Type, that it is strict JSON and the
// contract's verdict. It returns the body as sent and the verdict.
func readReport(r *http.Request) ([]byte, contract.Result, error) {
	var none contract.Result
	if r.ContentLength > MaxBody {
		return nil, none, tooLarge()
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxBody+1))
	if err != nil {
		return nil, none, live.Errorf(live.EINVALID, "the body could not be read: send the whole report")
	}
	if len(body) > MaxBody {
		return nil, none, tooLarge()
	}
	if err := checkMediaType(r.Header.Values("Content-Type")); err != nil {
		return nil, none, err
	}
	res, err := contract.Check(agentsandbox.WorkerCheckInContract, body)
	var de *contract.DecodeError
	switch {
	case errors.As(err, &de):
		return nil, none, live.Errorf(EMALFORMED, "the body is not strict JSON (%s): send one well-formed UTF-8 JSON object with no duplicate keys and nothing after it", clip(live.RedactSecrets(de.Error()), 300))
	case err != nil:
		return nil, none, fmt.Errorf("validate report: %w", err)
	}
	return body, res, nil
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
		out[i] = agentsandbox.ValidationError{Path: live.RedactSecrets(e.Path), Message: live.RedactSecrets(e.Message)}
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
