package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
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

// appendJSON appends a's JSON encoding and a newline to b: what
// json.Marshal writes (times as RFC 3339 with nanoseconds, as
// time.Time.MarshalJSON), without its reflection on the path every accepted
// check-in takes. A time json.Marshal cannot encode (a year outside
// 0..9999) is left to it.
func (a accepted) appendJSON(b []byte) []byte {
	if !jsonTime(a.ReceivedAt) || (a.AliveUntil != nil && !jsonTime(*a.AliveUntil)) {
		m, err := json.Marshal(a)
		if err != nil {
			return append(b, `{"error":{"code":"internal","message":"internal error"}}`+"\n"...)
		}
		return append(append(b, m...), '\n')
	}
	b = append(b, `{"registered":`...)
	b = strconv.AppendBool(b, a.Registered)
	b = append(b, `,"state":"`...)
	b = append(b, a.State...) // one of live's states: letters only
	b = append(b, '"')
	b = append(b, `,"alive_until":`...)
	if a.AliveUntil == nil {
		b = append(b, "null"...)
	} else {
		b = append(a.AliveUntil.AppendFormat(append(b, '"'), time.RFC3339Nano), '"')
	}
	b = append(b, `,"received_at":"`...)
	b = a.ReceivedAt.AppendFormat(b, time.RFC3339Nano)
	return append(b, "\"}\n"...)
}

// jsonTime reports whether t is a time time.Time.MarshalJSON encodes as
// AppendFormat does: a year in 0..9999 and a zone offset in whole minutes
// (the server's times are UTC).
func jsonTime(t time.Time) bool {
	_, off := t.Zone()
	return t.Year() >= 0 && t.Year() <= 9999 && off%60 == 0
}

// handleCheckIn answers POST /api/streams/agent/{id}/plays/worker, checking
// the design's table in order; the first failure answers.
func (s *Server) handleCheckIn(w http.ResponseWriter, r *http.Request, rl *reqLog) {
	ctx := r.Context()
	streamID := r.PathValue("id")
	a, err := s.authorizeCheckIn(ctx, r, streamID, rl, true)
	if err != nil {
		writeError(w, rl, err)
		return
	}
	body, res, err := readReport(r)
	if err != nil {
		if a.cached { // the answer must be what the store says now
			if _, aerr := s.authorizeCheckIn(ctx, r, streamID, rl, false); aerr != nil {
				err = aerr
			}
		}
		writeError(w, rl, err)
		return
	}
	var reg live.Registration
	var errs []agentsandbox.ValidationError
	degraded := res.Valid && s.assessed.degraded(body)
	for attempt := 1; ; attempt++ {
		if res.Valid {
			reg, err = s.store.Accept(ctx, live.Registration{StreamID: streamID, Report: body, ServiceID: a.service, SubjectID: a.subject,
				Degraded: degraded, AuthEpoch: a.epoch})
		} else {
			errs, err = s.refuse(ctx, live.Refusal{StreamID: streamID, ServiceID: a.service, SubjectID: a.subject, AuthEpoch: a.epoch}, res.Errors, body)
		}
		if !errors.Is(err, live.ErrAuthChanged) || attempt == maxAuthAttempts {
			break
		}
		// Something that can withdraw the authorisation changed since it
		// was read: decide again on what the store says now.
		s.lookups.drop(a.key)
		if a, err = s.authorizeCheckIn(ctx, r, streamID, rl, false); err != nil {
			writeError(w, rl, err)
			return
		}
	}
	switch {
	case errors.Is(err, live.ErrAuthChanged):
		writeError(w, rl, live.Errorf(live.EUNAVAILABLE, "the worker's authorisation kept changing while it checked in: check in again"))
	case err != nil && !res.Valid:
		writeError(w, rl, fmt.Errorf("record refusal: %w", err))
	case err != nil:
		writeError(w, rl, fmt.Errorf("accept check-in: %w", err))
	case !res.Valid:
		s.metrics.refused(errs)
		writeContractRefusal(w, rl, errs)
	default:
		h := live.Derive(live.WorkerRecord{Registration: &reg}, s.now(), s.window)
		rl.outcome = outcomeAccepted
		a := accepted{Registered: true, State: h.State, AliveUntil: utcPtr(h.AliveUntil), ReceivedAt: reg.ReceivedAt.UTC()}
		writeJSONBytes(w, http.StatusOK, a.appendJSON(make([]byte, 0, 160)))
	}
}

// maxAuthAttempts bounds how often a check-in is authorised again when its
// authorisation changes under it.
const maxAuthAttempts = 3

// refuse records a contract refusal with its errors (bounded and cleaned:
// live.RefusalErrors), the refused report's five facts and own reasons
// (never as a registration), and returns the errors to answer: all of
// them, as the contract gives them, with anything secret-like redacted.
func (s *Server) refuse(ctx context.Context, ref live.Refusal, errs []agentsandbox.ValidationError, body []byte) ([]agentsandbox.ValidationError, error) {
	if v, err := contract.DecodeStrict(body); err == nil { // Check decoded it already
		ref.Reasons, ref.Facts = live.RefusedReasons(v), live.RefusedFacts(v)
	}
	ref.Errors, ref.ErrorsTotal = live.RefusalErrors(errs)
	_, err := s.store.Refuse(ctx, ref)
	return redactErrors(errs), err
}

// authorized is an authorised check-in: its service and subject, the auth
// epoch it was authorised at, whether the lookup came from the cache, and
// its key there.
type authorized struct {
	service, subject string
	epoch            int64
	cached           bool
	key              lookupKey
}

// authorizeCheckIn checks rows 1 to 6 of the table: the credential, the
// principal, the subject and the stream, from one read of the store (or,
// when cached is true, from the answer kept for the same presented
// credential, stream and subject, which the write then checks). It returns
// the authorised check-in, or the refusal as a *live.Error (or a store
// failure).
func (s *Server) authorizeCheckIn(ctx context.Context, r *http.Request, streamID string, rl *reqLog, cached bool) (authorized, error) {
	p := readCredentials(r)
	g := delegation{subjects: r.Header.Values(SubjectHeader)}
	var a authorized
	var l live.CheckInLookup
	if secret := p.secret(); secret != "" {
		a.key = lookupKey{hash: live.HashSecret(secret), stream: streamID}
		if len(g.subjects) > 0 {
			a.key.subject = g.subjects[0]
		}
		var hit bool
		if cached {
			l, hit = s.lookups.get(a.key, s.now())
		}
		if !hit {
			// An id no store could hold names nothing: it is not asked
			// for (a database may refuse it as text it cannot hold).
			stream, subject := streamID, a.key.subject
			if !validID(stream) {
				stream = ""
			}
			if !validID(subject) {
				subject = ""
			}
			var err error
			if l, err = s.store.LookupCheckIn(ctx, a.key.hash, stream, subject); err != nil {
				return a, fmt.Errorf("check in: %w", err)
			}
		}
		a.cached = hit
	}
	f := found{cred: l.Credential, service: l.Service}
	d := decideCheckIn(p, f, s.now())
	rl.decided(d)
	if !d.ok() {
		return a, d.err()
	}
	if now := s.now(); f.cred.NeedsTouch(now) {
		s.touch(ctx, f.cred)
		c := *f.cred
		c.LastUsedAt = &now
		l.Credential = &c
		s.lookups.used(a.key, now)
	}
	a.service = d.principal
	g.stream, g.subjectKnown = l.Stream, l.SubjectKnown
	d = decideDelegation(streamID, g)
	rl.reason = d.reason
	if !d.ok() {
		return a, d.err()
	}
	a.subject, a.epoch = d.principal, l.Epoch
	if !a.cached {
		s.lookups.put(a.key, l, s.now())
	}
	return a, nil
}

// readReport checks rows 7 to 10 of the table: the body's size (reading at
// most MaxBody+1 bytes), its Content-Type, that it is strict JSON and the
// contract's verdict. It returns the body as sent and the verdict.
func readReport(r *http.Request) ([]byte, contract.Result, error) {
	var none contract.Result
	if r.ContentLength > MaxBody {
		return nil, none, tooLarge()
	}
	body, err := readBody(io.LimitReader(r.Body, MaxBody+1), r.ContentLength)
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

// readBody reads r to its end, as io.ReadAll does, into a buffer sized for
// the declared length n (-1 when unknown) and one byte more, so that a body
// of the length it declared is read without growing the buffer.
func readBody(r io.Reader, n int64) ([]byte, error) {
	size := int64(512)
	if n >= 0 && n < MaxBody {
		size = n + 1
	}
	b := make([]byte, 0, size)
	for {
		m, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+m]
		switch {
		case err == io.EOF:
			return b, nil
		case err != nil:
			return b, err
		case len(b) == cap(b):
			b = append(b, 0)[:len(b)]
		}
	}
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

// validID reports whether id could name something in a store
// (live.CheckID): anything else, such as text with a NUL or invalid UTF-8,
// names nothing and is never sent to the store.
func validID(id string) bool { return live.CheckID("", id) == nil }

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
