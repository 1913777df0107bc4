package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"strings"
	"time"

	"openvibe.network/agentsandbox/live"
	"openvibe.network/agentsandbox/live/httpapi"
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
	durationVar(fs, &f.ttl, "ttl", 0, "how long the credential stays valid, e.g. 720h (`DURATION`; 0 = until revoked)")
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
	id, secret, _, err = f.issueExpiring(ctx, s, kind)
	return id, secret, err
}

// issueExpiring is issue, returning the expiry too (zero for none).
func (f *issueFlags) issueExpiring(ctx context.Context, s live.Store, kind live.CredentialKind) (id, secret string, expires time.Time, err error) {
	secret, hash, err := live.NewSecret(kind)
	if err != nil {
		return "", "", expires, err
	}
	c := live.Credential{Kind: kind, ServiceID: f.service, PersonID: f.person, Hash: hash}
	if f.ttl > 0 {
		exp := time.Now().Add(f.ttl).UTC()
		c.ExpiresAt = &exp
	}
	c, err = s.CreateCredential(ctx, c)
	if err != nil {
		return "", "", expires, err
	}
	if c.ExpiresAt != nil {
		expires = *c.ExpiresAt
	}
	return c.ID, secret, expires, nil
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
	kind := fs.String("kind", "", "list only credentials of this `KIND`: service_token, person_token, desk_ticket, session or login_ticket")
	check := func([]string) error {
		if *kind != "" && live.CredentialKind(*kind).Prefix() == "" {
			return fmt.Errorf("--kind %q is unknown: use service_token, person_token, desk_ticket, session or login_ticket", *kind)
		}
		return nil
	}
	return check, func(ctx context.Context, s live.Store, _ []string) (any, error) {
		return items(s.ListCredentials(ctx, live.CredentialKind(*kind)))
	}
}

// Bounds of a sign-in link's lifetime: short, because it is a secret in a
// URL that may pass through chat or mail.
const (
	defaultLinkTTL = 15 * time.Minute
	maxLinkTTL     = 24 * time.Hour
)

func sessionLink(fs *flag.FlagSet) (func([]string) error, adminDo) {
	person := fs.String("person", "", "make the link for the person with this `ID` (required)")
	ttl := new(time.Duration)
	durationVar(fs, ttl, "ttl", defaultLinkTTL, "how long the link works (`DURATION`, at most 24h); it works once")
	base := fs.String("base-url", "http://127.0.0.1:8080", "Live's address as the person's browser reaches it (`URL`); also OVLIVE_BASE_URL")
	check := func([]string) error {
		u, err := url.Parse(*base)
		switch {
		case *person == "":
			return errors.New("--person is required")
		case *ttl <= 0 || *ttl > maxLinkTTL:
			return fmt.Errorf("--ttl %s: give a duration above 0 and at most %s", *ttl, maxLinkTTL)
		case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
			return fmt.Errorf("--base-url %q: give an http:// or https:// URL", *base)
		}
		return nil
	}
	return check, func(ctx context.Context, s live.Store, _ []string) (any, error) {
		f := issueFlags{person: *person, ttl: *ttl}
		id, secret, expires, err := f.issueExpiring(ctx, s, live.KindLoginTicket)
		link := strings.TrimRight(*base, "/") + "/login?" + url.Values{httpapi.LoginTicketParam: {secret}}.Encode()
		return struct {
			ID        string    `json:"id"`
			URL       string    `json:"url"`
			ExpiresAt time.Time `json:"expires_at"`
		}{id, link, expires}, err
	}
}

func sessionRevoke(fs *flag.FlagSet) (func([]string) error, adminDo) {
	person := fs.String("person", "", "revoke every session of the person with this `ID` (required)")
	check := func([]string) error {
		if *person == "" {
			return errors.New("--person is required")
		}
		return nil
	}
	return check, func(ctx context.Context, s live.Store, _ []string) (any, error) {
		ids, err := s.RevokeSessions(ctx, *person)
		if ids == nil {
			ids = []string{}
		}
		return struct {
			Revoked []string `json:"revoked"`
		}{ids}, err
	}
}
