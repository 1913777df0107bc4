package httpapi

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"openvibe.network/agentsandbox/live"
)

// presented is what a request shows of its credentials, read without the
// store. It holds secrets: never log or answer it.
type presented struct {
	bearer     string // the Bearer secret ("" when none or malformed)
	authHeader bool   // an Authorization header was sent
	badScheme  bool   // it is not exactly one "Bearer <secret>"
	session    string // the first ov_session cookie's value
	hasSession bool   // an ov_session cookie was sent
}

// readCredentials reads the Authorization header and the ov_session cookie.
func readCredentials(r *http.Request) presented {
	var p presented
	if vs := r.Header.Values("Authorization"); len(vs) > 0 {
		p.authHeader = true
		scheme, secret, ok := strings.Cut(vs[0], " ")
		secret = strings.TrimSpace(secret)
		if len(vs) > 1 || !ok || !strings.EqualFold(scheme, "Bearer") || secret == "" || strings.ContainsAny(secret, " \t") {
			p.badScheme = true
		} else {
			p.bearer = secret
		}
	}
	for _, c := range r.Cookies() {
		if c.Name == SessionCookie {
			if !p.hasSession {
				p.session = c.Value
			}
			p.hasSession = true
		}
	}
	return p
}

// secret returns the credential that identifies the caller: the Bearer
// secret when an Authorization header was sent, else the session cookie.
func (p presented) secret() string {
	if p.authHeader {
		return p.bearer
	}
	return p.session
}

// found is what the store answered about the presented credential.
type found struct {
	cred    *live.Credential // nil when no credential has that hash
	service *live.Service    // a service token's holder (nil otherwise, or if unknown)
}

// lookup asks the store about secret ("" finds nothing). It fails only when
// the store fails.
func (s *Server) lookup(ctx context.Context, secret string) (found, error) {
	if secret == "" {
		return found{}, nil
	}
	c, err := s.store.CredentialByHash(ctx, live.HashSecret(secret))
	switch {
	case live.ErrorCode(err) == live.ENOTFOUND:
		return found{}, nil
	case err != nil:
		return found{}, fmt.Errorf("look up credential: %w", err)
	}
	return found{cred: &c}, nil
}

// touch records a use of c now, when its recorded use is old enough (see
// live.Credential.NeedsTouch). A failure is logged, not answered: the
// request's own work decides its answer.
func (s *Server) touch(ctx context.Context, c *live.Credential) {
	if c == nil || !c.NeedsTouch(s.now()) {
		return
	}
	if err := s.store.TouchCredential(ctx, c.ID); err != nil {
		s.log.LogAttrs(ctx, slog.LevelWarn, "record credential use", slog.String("credential", c.ID), slog.String("err", err.Error()))
	}
}

// decision is the verdict of an auth or delegation check: allowed when code
// is "", else refused with code (whose status comes from the codes table),
// a stable reason for logs and tests, and a message that says what to fix.
type decision struct {
	code      string
	reason    string
	message   string
	principal string // the credential's holder when known, for the log
}

func allow(reason, principal string) decision {
	return decision{reason: reason, principal: principal}
}

func refuse(code, reason, message string, args ...any) decision {
	return decision{code: code, reason: reason, message: fmt.Sprintf(message, args...)}
}

func (d decision) ok() bool   { return d.code == "" }
func (d decision) err() error { return &live.Error{Code: d.code, Message: d.message} }

// holder returns the id of whoever holds c.
func holder(c *live.Credential) string {
	if c.Kind == live.KindServiceToken {
		return c.ServiceID
	}
	return c.PersonID
}

// notValid is the one message of a 401 for a credential that is not
// usable: it never tells whether the credential once existed (unknown,
// revoked and expired read the same; only the log's reason differs).
const notValid = "the credential is not valid (unknown, revoked or expired): "

// decideCredential gives the 401 answers shared by every route: no
// credential, a malformed Authorization header, an unknown, revoked or
// expired credential. want names what the caller should send.
func decideCredential(p presented, f found, now time.Time, want string) decision {
	var d decision
	switch {
	case !p.authHeader && !p.hasSession:
		return refuse(live.EUNAUTHORIZED, "no_credential", "no credential: send %s", want)
	case p.badScheme:
		return refuse(live.EUNAUTHORIZED, "bad_authorization", "the Authorization header must be exactly one \"Bearer <secret>\": send %s", want)
	case f.cred == nil:
		return refuse(live.EUNAUTHORIZED, "unknown_credential", notValid+"send %s", want)
	case f.cred.RevokedAt != nil:
		d = refuse(live.EUNAUTHORIZED, "revoked_credential", notValid+"send %s", want)
	case !f.cred.Usable(now):
		d = refuse(live.EUNAUTHORIZED, "expired_credential", notValid+"send %s", want)
	default:
		d = allow("credential_usable", "")
	}
	d.principal = holder(f.cred)
	return d
}

const wantService = "a first-party service token (ovs_…) as Authorization: Bearer, and no ov_session cookie"

// decideCheckIn decides rows 1 to 3 of the check-in table: who may check a
// worker in at all.
func decideCheckIn(p presented, f found, now time.Time) decision {
	d := decideCredential(p, f, now, wantService)
	if !d.ok() {
		return d
	}
	who := holder(f.cred)
	switch {
	case p.hasSession:
		d = refuse(live.EFORBIDDEN, "session_cookie", "a check-in must not carry the ov_session cookie, not even beside a service token: send only the worker's service token")
	case f.cred.Kind == live.KindPersonToken:
		d = refuse(live.EFORBIDDEN, "person_token", "a person token cannot check a worker in: send the worker's first-party service token")
	case f.cred.Kind == live.KindDeskTicket:
		d = refuse(live.EFORBIDDEN, "desk_ticket", "a desk ticket cannot check a worker in: send the worker's first-party service token")
	case f.cred.Kind != live.KindServiceToken:
		d = refuse(live.EFORBIDDEN, "not_service_token", "only a service token can check a worker in: send the worker's first-party service token")
	case f.service == nil:
		d = refuse(live.EFORBIDDEN, "unknown_service", "the service holding this token is not known: issue a token for a registered first-party service")
	case !f.service.FirstParty:
		d = refuse(live.EFORBIDDEN, "not_first_party", "service %s is not first-party: only a first-party service may check a worker in", describe(who))
	case !f.service.Has(live.CapabilityRegister):
		d = refuse(live.EFORBIDDEN, "lacks_capability", "service %s lacks the capability %s: grant it to the service", describe(who), live.CapabilityRegister)
	default:
		d = allow("service_token", who)
	}
	d.principal = who
	return d
}

// delegation is what the store answered about a check-in's stream and
// subject.
type delegation struct {
	subjects     []string     // the X-OV-Subject header's values
	stream       *live.Stream // nil when there is no such stream
	subjectKnown bool         // the subject is a known person
}

// decideDelegation decides rows 4 to 6 of the check-in table: the subject
// names a known person who owns the stream.
func decideDelegation(streamID string, g delegation) decision {
	switch {
	case len(g.subjects) == 0 || strings.TrimSpace(g.subjects[0]) == "":
		return refuse(live.EINVALID, "missing_subject", "%s is missing or empty: set it to the id of the person who owns the stream", SubjectHeader)
	case len(g.subjects) > 1:
		return refuse(live.EINVALID, "several_subjects", "send exactly one %s header: the id of the person who owns the stream", SubjectHeader)
	case g.stream == nil:
		return refuse(live.ENOTFOUND, "no_stream", "there is no agent stream %s: check the stream id in the URL", describe(streamID))
	case !g.subjectKnown:
		return refuse(live.EFORBIDDEN, "unknown_subject", "%s %s is not a known person: name the person who owns the stream", SubjectHeader, describe(g.subjects[0]))
	case g.stream.OwnerID != g.subjects[0]:
		return refuse(live.EFORBIDDEN, "subject_not_owner", "person %s does not own stream %s: name the stream's owner in %s", describe(g.subjects[0]), describe(streamID), SubjectHeader)
	}
	return allow("subject_owns_stream", g.subjects[0])
}

const wantOwner = "your person token (ovp_…) as Authorization: Bearer, or sign in with the one-time link an operator makes (ovlive admin session link) for the ov_session cookie"

// decideOwnerCredential decides who may read an owner's view at all: a
// person, by person token or session.
func decideOwnerCredential(p presented, f found, now time.Time) decision {
	d := decideCredential(p, f, now, wantOwner)
	if !d.ok() {
		return d
	}
	who := holder(f.cred)
	switch f.cred.Kind {
	case live.KindPersonToken, live.KindSession:
		d.principal = who
		return d
	case live.KindServiceToken:
		d = refuse(live.EFORBIDDEN, "service_token", "a service token cannot read the owner's view: the stream's owner signs in, or sends a person token")
	default:
		d = refuse(live.EFORBIDDEN, "not_owner_credential", "a %s cannot read the owner's view: send a person token or sign in", f.cred.Kind)
	}
	d.principal = who
	return d
}

// decideOwnership decides whether person may see stream (nil when
// unknown). Someone else's stream is answered as an unknown one is, so that
// a person cannot learn which streams exist; only the log's reason differs.
func decideOwnership(person, streamID string, stream *live.Stream) decision {
	const msg = "you have no agent stream %s: check the stream id in the URL (only a stream's owner sees it)"
	switch {
	case stream == nil:
		return refuse(live.ENOTFOUND, "no_stream", msg, describe(streamID))
	case stream.OwnerID != person:
		return refuse(live.ENOTFOUND, "not_owner", msg, describe(streamID))
	}
	return allow("owner", person)
}

// describe quotes a caller's value for a message: clipped, and never a
// value that looks like a secret.
func describe(v string) string {
	if _, ok := live.KindOfSecret(v); ok {
		return "(a value that looks like a secret)"
	}
	return fmt.Sprintf("%q", clip(v, 80))
}
