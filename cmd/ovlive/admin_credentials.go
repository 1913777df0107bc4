package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	"openvibe.network/agentsandbox/live"
)

// issueFlags are the flags every credential issue command shares.
type issueFlags struct {
	service, person string
	ttl             time.Duration
}

func (f *issueFlags) register(fs *flag.FlagSet, withService bool) {
	if withService {
		fs.StringVar(&f.service, "service", "", "issue a service token to the service with this `ID`")
	}
	fs.StringVar(&f.person, "person", "", "issue it to the person with this `ID`")
	fs.DurationVar(&f.ttl, "ttl", 0, "how long the credential stays valid, e.g. 720h (`DURATION`; 0 = until revoked)")
}

func (f *issueFlags) check(withService bool) error {
	switch {
	case f.ttl < 0:
		return errors.New("--ttl must not be negative")
	case withService && (f.service == "") == (f.person == ""):
		return errors.New("give exactly one of --service ID (a service token) or --person ID (a person token)")
	case !withService && f.person == "":
		return errors.New("--person is required")
	}
	return nil
}

// issue creates a credential of kind for the holder in f and returns its id
// and secret (shown once; only its hash is stored).
func (f *issueFlags) issue(ctx context.Context, s live.Store, kind live.CredentialKind) (id, secret string, err error) {
	secret, hash, err := live.NewSecret(kind)
	if err != nil {
		return "", "", err
	}
	c := live.Credential{Kind: kind, ServiceID: f.service, PersonID: f.person, Hash: hash}
	if f.ttl > 0 {
		exp := time.Now().Add(f.ttl).UTC()
		c.ExpiresAt = &exp
	}
	c, err = s.CreateCredential(ctx, c)
	if err != nil {
		return "", "", err
	}
	return c.ID, secret, nil
}

func tokenIssue(fs *flag.FlagSet) (func([]string) error, adminDo) {
	var f issueFlags
	f.register(fs, true)
	return func([]string) error { return f.check(true) }, func(ctx context.Context, s live.Store, _ []string) (any, error) {
		kind := live.KindPersonToken
		if f.service != "" {
			kind = live.KindServiceToken
		}
		id, secret, err := f.issue(ctx, s, kind)
		return struct {
			ID    string `json:"id"`
			Token string `json:"token"`
		}{id, secret}, err
	}
}

func deskTicketIssue(fs *flag.FlagSet) (func([]string) error, adminDo) {
	var f issueFlags
	f.register(fs, false)
	return func([]string) error { return f.check(false) }, func(ctx context.Context, s live.Store, _ []string) (any, error) {
		id, secret, err := f.issue(ctx, s, live.KindDeskTicket)
		return struct {
			ID     string `json:"id"`
			Ticket string `json:"ticket"`
		}{id, secret}, err
	}
}

func sessionIssue(fs *flag.FlagSet) (func([]string) error, adminDo) {
	var f issueFlags
	f.register(fs, false)
	return func([]string) error { return f.check(false) }, func(ctx context.Context, s live.Store, _ []string) (any, error) {
		id, secret, err := f.issue(ctx, s, live.KindSession)
		return struct {
			ID      string `json:"id"`
			Session string `json:"session"`
		}{id, secret}, err
	}
}

func credentialRevoke(*flag.FlagSet) (func([]string) error, adminDo) {
	return nil, func(ctx context.Context, s live.Store, args []string) (any, error) {
		err := s.RevokeCredential(ctx, args[0])
		return struct {
			Revoked bool `json:"revoked"`
		}{err == nil}, err
	}
}

func credentialList(fs *flag.FlagSet) (func([]string) error, adminDo) {
	kind := fs.String("kind", "", "list only credentials of this `KIND`")
	check := func([]string) error {
		if *kind != "" && live.CredentialKind(*kind).Prefix() == "" {
			return fmt.Errorf("--kind %q is unknown: use service_token, person_token, desk_ticket or session", *kind)
		}
		return nil
	}
	return check, func(ctx context.Context, s live.Store, _ []string) (any, error) {
		return items(s.ListCredentials(ctx, live.CredentialKind(*kind)))
	}
}
