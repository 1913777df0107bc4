package live

import (
	"fmt"
	"regexp"
)

// The prefixes of the identifiers that stores give new entities.
const (
	PersonIDPrefix     = "per_"
	StreamIDPrefix     = "str_"
	ServiceIDPrefix    = "svc_"
	CredentialIDPrefix = "cred_"
)

// MaxIDLength is the longest identifier a store accepts.
const MaxIDLength = 128

// idPattern is what an identifier may look like: URL-safe (it appears in
// paths such as /api/streams/agent/:id/plays/worker) and readable.
var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._~-]*$`)

// CheckID returns an EINVALID *Error unless id is a usable identifier of
// what (e.g. "stream"): 1 to MaxIDLength characters from [A-Za-z0-9._~-],
// starting with a letter or digit.
func CheckID(what, id string) error {
	if len(id) > MaxIDLength || !idPattern.MatchString(id) {
		return Errorf(EINVALID, "%s id %q is not valid: use 1 to %d characters from A-Z a-z 0-9 . _ ~ -, starting with a letter or digit", what, id, MaxIDLength)
	}
	return nil
}

// fillID gives *id a fresh identifier with prefix when it is empty, then
// checks it.
func fillID(what, prefix string, id *string) error {
	if *id == "" {
		v, err := NewID(prefix)
		if err != nil {
			return fmt.Errorf("prepare %s: %w", what, err)
		}
		*id = v
	}
	return CheckID(what, *id)
}

// PreparePerson returns p ready to store: a fresh id when it has none. It
// returns an EINVALID *Error for a bad id or an empty name. Stores call it in
// CreatePerson; they set CreatedAt themselves.
func PreparePerson(p Person) (Person, error) {
	if err := fillID("person", PersonIDPrefix, &p.ID); err != nil {
		return p, err
	}
	if p.Name == "" {
		return p, Errorf(EINVALID, "person name is empty: give the person a name")
	}
	return p, nil
}

// PrepareStream returns s ready to store: a fresh id when it has none. It
// returns an EINVALID *Error for a bad id or a missing owner. Stores check
// that the owner exists.
func PrepareStream(s Stream) (Stream, error) {
	if err := fillID("stream", StreamIDPrefix, &s.ID); err != nil {
		return s, err
	}
	if s.OwnerID == "" {
		return s, Errorf(EINVALID, "stream has no owner: give the id of the person who owns it")
	}
	return s, nil
}

// PrepareService returns s ready to store: a fresh id when it has none and a
// non-nil capability list. It returns an EINVALID *Error for a bad id, an
// empty name or an empty capability.
func PrepareService(s Service) (Service, error) {
	if err := fillID("service", ServiceIDPrefix, &s.ID); err != nil {
		return s, err
	}
	if s.Name == "" {
		return s, Errorf(EINVALID, "service name is empty: give the service a name")
	}
	for _, c := range s.Capabilities {
		if c == "" {
			return s, Errorf(EINVALID, "service %q has an empty capability", s.ID)
		}
	}
	if s.Capabilities == nil {
		s.Capabilities = []string{}
	}
	return s, nil
}

// PrepareCredential returns c ready to store: a fresh id when it has none.
// It returns an EINVALID *Error for a bad id, an unknown kind, a holder that
// does not fit the kind (ServiceID for service tokens, PersonID for the
// others), or an all-zero hash. Stores check that the holder exists.
func PrepareCredential(c Credential) (Credential, error) {
	if err := fillID("credential", CredentialIDPrefix, &c.ID); err != nil {
		return c, err
	}
	switch {
	case c.Kind.Prefix() == "":
		return c, Errorf(EINVALID, "credential kind %q is unknown: use service_token, person_token, desk_ticket, session or login_ticket", c.Kind)
	case c.Kind == KindServiceToken && (c.ServiceID == "" || c.PersonID != ""):
		return c, Errorf(EINVALID, "a service token belongs to a service: set the service id and no person id")
	case c.Kind != KindServiceToken && (c.PersonID == "" || c.ServiceID != ""):
		return c, Errorf(EINVALID, "a %s belongs to a person: set the person id and no service id", c.Kind)
	case c.Hash == [32]byte{}:
		return c, Errorf(EINVALID, "credential has no hash: store the SHA-256 of its secret")
	}
	return c, nil
}

// CheckRegistration returns an EINVALID *Error unless r names a stream, a
// service and a subject and carries a report. Stores check that they exist.
func CheckRegistration(r Registration) error {
	if r.StreamID == "" || r.ServiceID == "" || r.SubjectID == "" {
		return Errorf(EINVALID, "registration needs a stream, a service and a subject")
	}
	if len(r.Report) == 0 {
		return Errorf(EINVALID, "registration has an empty report")
	}
	return nil
}

// CheckRefusal returns an EINVALID *Error unless r names a stream, a service
// and a subject. Stores check that they exist.
func CheckRefusal(r Refusal) error {
	if r.StreamID == "" || r.ServiceID == "" || r.SubjectID == "" {
		return Errorf(EINVALID, "refusal needs a stream, a service and a subject")
	}
	return nil
}
