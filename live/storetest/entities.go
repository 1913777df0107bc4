package storetest

import (
	"slices"
	"testing"
	"time"

	"openvibe.network/agentsandbox/live"
)

func testPerson(t *testing.T, e *env) {
	t.Run("OK", func(t *testing.T) {
		p, err := e.store.CreatePerson(e.ctx, live.Person{Name: "Grace Hopper ✓"})
		if err != nil {
			t.Fatal(err)
		}
		if err := live.CheckID("person", p.ID); err != nil || len(p.ID) < len(live.PersonIDPrefix)+8 {
			t.Fatalf("generated id %q: %v", p.ID, err)
		}
		checkTime(t, "CreatedAt", p.CreatedAt, e.clock.Now())
		got, err := e.store.Person(e.ctx, p.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.ID != p.ID || got.Name != p.Name || !got.CreatedAt.Equal(p.CreatedAt) {
			t.Fatalf("Person = %+v, want %+v", got, p)
		}
		q, err := e.store.CreatePerson(e.ctx, live.Person{ID: "per_given", Name: "Alan"})
		if err != nil || q.ID != "per_given" {
			t.Fatalf("create with id: %+v, %v", q, err)
		}
		list, err := e.store.ListPersons(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if ids := personIDs(list); !slices.Contains(ids, p.ID) || !slices.Contains(ids, q.ID) || len(ids) != 2 {
			t.Fatalf("ListPersons ids = %v, want %s and %s", ids, p.ID, q.ID)
		}
	})
	t.Run("ErrNotFound", func(t *testing.T) {
		_, err := e.store.Person(e.ctx, "per_missing")
		wantCode(t, err, live.ENOTFOUND)
		wantMessageContains(t, err, "per_missing")
	})
	t.Run("ErrConflict", func(t *testing.T) {
		p := e.person("Twice")
		_, err := e.store.CreatePerson(e.ctx, live.Person{ID: p.ID, Name: "Again"})
		wantCode(t, err, live.ECONFLICT)
		wantMessageContains(t, err, p.ID)
	})
	for _, tc := range []struct {
		name string
		p    live.Person
	}{
		{"ErrInvalidEmptyName", live.Person{}},
		{"ErrInvalidID", live.Person{ID: "a b", Name: "x"}},
		{"ErrInvalidIDSlash", live.Person{ID: "../x", Name: "x"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.store.CreatePerson(e.ctx, tc.p)
			wantCode(t, err, live.EINVALID)
		})
	}
}

func personIDs(ps []live.Person) []string {
	var ids []string
	for _, p := range ps {
		ids = append(ids, p.ID)
	}
	return ids
}

func testStream(t *testing.T, e *env) {
	owner := e.person("Owner")
	t.Run("OK", func(t *testing.T) {
		s, err := e.store.CreateStream(e.ctx, live.Stream{ID: "demo-stream.1", OwnerID: owner.ID})
		if err != nil {
			t.Fatal(err)
		}
		checkTime(t, "CreatedAt", s.CreatedAt, e.clock.Now())
		got, err := e.store.Stream(e.ctx, "demo-stream.1")
		if err != nil {
			t.Fatal(err)
		}
		if got.ID != s.ID || got.OwnerID != owner.ID || !got.CreatedAt.Equal(s.CreatedAt) {
			t.Fatalf("Stream = %+v, want %+v", got, s)
		}
		gen := e.stream("", owner.ID)
		if err := live.CheckID("stream", gen.ID); err != nil {
			t.Fatalf("generated id %q: %v", gen.ID, err)
		}
		list, err := e.store.ListStreams(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(list) != 2 || !slices.ContainsFunc(list, func(x live.Stream) bool { return x.ID == gen.ID && x.OwnerID == owner.ID }) {
			t.Fatalf("ListStreams = %+v, want 2 streams incl. %s", list, gen.ID)
		}
	})
	t.Run("ErrNotFound", func(t *testing.T) {
		_, err := e.store.Stream(e.ctx, "x")
		wantCode(t, err, live.ENOTFOUND)
		wantMessageContains(t, err, `stream "x" not found`)
	})
	t.Run("ErrConflict", func(t *testing.T) {
		e.stream("dup", owner.ID)
		_, err := e.store.CreateStream(e.ctx, live.Stream{ID: "dup", OwnerID: owner.ID})
		wantCode(t, err, live.ECONFLICT)
	})
	for _, tc := range []struct {
		name string
		s    live.Stream
	}{
		{"ErrInvalidUnknownOwner", live.Stream{OwnerID: "per_nobody"}},
		{"ErrInvalidNoOwner", live.Stream{}},
		{"ErrInvalidID", live.Stream{ID: "with space", OwnerID: owner.ID}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.store.CreateStream(e.ctx, tc.s)
			wantCode(t, err, live.EINVALID)
		})
	}
}

func testService(t *testing.T, e *env) {
	t.Run("OK", func(t *testing.T) {
		in := live.Service{Name: "codes-sandbox", FirstParty: true, Capabilities: []string{live.CapabilityRegister, "other.cap"}}
		s, err := e.store.CreateService(e.ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		checkTime(t, "CreatedAt", s.CreatedAt, e.clock.Now())
		got, err := e.store.Service(e.ctx, s.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Name != in.Name || !got.FirstParty || !slices.Equal(got.Capabilities, in.Capabilities) || !got.Has(live.CapabilityRegister) {
			t.Fatalf("Service = %+v, want %+v", got, in)
		}
		third, err := e.store.CreateService(e.ctx, live.Service{ID: "svc_third", Name: "third party"})
		if err != nil {
			t.Fatal(err)
		}
		got, err = e.store.Service(e.ctx, third.ID)
		if err != nil || got.FirstParty || got.Capabilities == nil || len(got.Capabilities) != 0 {
			t.Fatalf("third-party Service = %+v, %v; want not first-party, empty non-nil capabilities", got, err)
		}
		list, err := e.store.ListServices(e.ctx)
		if err != nil || len(list) != 2 {
			t.Fatalf("ListServices = %+v, %v; want 2", list, err)
		}
	})
	t.Run("ErrNotFound", func(t *testing.T) {
		_, err := e.store.Service(e.ctx, "svc_missing")
		wantCode(t, err, live.ENOTFOUND)
	})
	t.Run("ErrConflict", func(t *testing.T) {
		e.service("first")
		_, err := e.store.CreateService(e.ctx, live.Service{ID: "svc_third", Name: "again"})
		wantCode(t, err, live.ECONFLICT)
	})
	for _, tc := range []struct {
		name string
		s    live.Service
	}{
		{"ErrInvalidEmptyName", live.Service{}},
		{"ErrInvalidEmptyCapability", live.Service{Name: "x", Capabilities: []string{""}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.store.CreateService(e.ctx, tc.s)
			wantCode(t, err, live.EINVALID)
		})
	}
}

// credential issues a credential of kind for holder, expiring at expires
// (nil for never), and returns it with its secret.
func (e *env) credential(kind live.CredentialKind, holder string, expires *time.Time) (live.Credential, string) {
	e.t.Helper()
	secret, hash, err := live.NewSecret(kind)
	if err != nil {
		e.t.Fatal(err)
	}
	c := live.Credential{Kind: kind, Hash: hash, ExpiresAt: expires}
	if kind == live.KindServiceToken {
		c.ServiceID = holder
	} else {
		c.PersonID = holder
	}
	c, err = e.store.CreateCredential(e.ctx, c)
	if err != nil {
		e.t.Fatalf("create %s: %v", kind, err)
	}
	return c, secret
}

func testCredential(t *testing.T, e *env) {
	f := e.fixture()
	t.Run("OK", func(t *testing.T) {
		for _, kind := range []live.CredentialKind{live.KindServiceToken, live.KindPersonToken, live.KindDeskTicket, live.KindSession} {
			holder := f.owner.ID
			if kind == live.KindServiceToken {
				holder = f.service.ID
			}
			c, secret := e.credential(kind, holder, nil)
			checkTime(t, "CreatedAt", c.CreatedAt, e.clock.Now())
			got, err := e.store.CredentialByHash(e.ctx, live.HashSecret(secret))
			if err != nil {
				t.Fatalf("%s: %v", kind, err)
			}
			if got.ID != c.ID || got.Kind != kind || got.ServiceID != c.ServiceID || got.PersonID != c.PersonID ||
				got.Hash != c.Hash || got.ExpiresAt != nil || got.RevokedAt != nil || !got.Usable(e.clock.Now()) {
				t.Fatalf("%s: CredentialByHash = %+v, want %+v", kind, got, c)
			}
		}
	})
	t.Run("ErrConflict", func(t *testing.T) {
		c, _ := e.credential(live.KindPersonToken, f.owner.ID, nil)
		_, hash, _ := live.NewSecret(live.KindPersonToken)
		_, err := e.store.CreateCredential(e.ctx, live.Credential{ID: c.ID, Kind: live.KindPersonToken, PersonID: f.owner.ID, Hash: hash})
		wantCode(t, err, live.ECONFLICT)
	})
	for _, tc := range []struct {
		name string
		c    live.Credential
	}{
		{"ErrInvalidUnknownService", live.Credential{Kind: live.KindServiceToken, ServiceID: "svc_missing"}},
		{"ErrInvalidUnknownPerson", live.Credential{Kind: live.KindDeskTicket, PersonID: "per_missing"}},
		{"ErrInvalidKind", live.Credential{Kind: "cookie", PersonID: f.owner.ID}},
		{"ErrInvalidServiceHoldsPersonKind", live.Credential{Kind: live.KindPersonToken, ServiceID: f.service.ID}},
		{"ErrInvalidNoHash", live.Credential{Kind: live.KindPersonToken, PersonID: f.owner.ID, Hash: [32]byte{}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name != "ErrInvalidNoHash" {
				_, tc.c.Hash, _ = live.NewSecret(live.KindPersonToken)
			}
			_, err := e.store.CreateCredential(e.ctx, tc.c)
			wantCode(t, err, live.EINVALID)
		})
	}
}

func testCredentialByHash(t *testing.T, e *env) {
	f := e.fixture()
	expired := e.clock.Now().Add(-time.Second)
	future := e.clock.Now().Add(time.Hour)
	t.Run("OK", func(t *testing.T) {
		c, secret := e.credential(live.KindServiceToken, f.service.ID, &future)
		got, err := e.store.CredentialByHash(e.ctx, live.HashSecret(secret))
		if err != nil || got.ID != c.ID || got.ExpiresAt == nil || !got.ExpiresAt.Equal(*c.ExpiresAt) {
			t.Fatalf("CredentialByHash = %+v, %v; want %+v", got, err, c)
		}
		if got.ExpiresAt.Sub(future).Abs() > time.Microsecond {
			t.Fatalf("ExpiresAt %v, want %v", got.ExpiresAt, future)
		}
	})
	t.Run("Expired", func(t *testing.T) {
		c, secret := e.credential(live.KindPersonToken, f.owner.ID, &expired)
		got, err := e.store.CredentialByHash(e.ctx, live.HashSecret(secret))
		if err != nil || got.ID != c.ID {
			t.Fatalf("CredentialByHash = %+v, %v; want the expired credential %s", got, err, c.ID)
		}
		if got.Usable(e.clock.Now()) {
			t.Fatalf("expired credential %+v is usable", got)
		}
	})
	t.Run("Revoked", func(t *testing.T) {
		c, secret := e.credential(live.KindDeskTicket, f.owner.ID, nil)
		if err := e.store.RevokeCredential(e.ctx, c.ID); err != nil {
			t.Fatal(err)
		}
		got, err := e.store.CredentialByHash(e.ctx, live.HashSecret(secret))
		if err != nil || got.ID != c.ID || got.RevokedAt == nil || got.Usable(e.clock.Now()) {
			t.Fatalf("CredentialByHash = %+v, %v; want revoked %s", got, err, c.ID)
		}
	})
	t.Run("ErrNotFound", func(t *testing.T) {
		_, err := e.store.CredentialByHash(e.ctx, live.HashSecret("ovs_unknown"))
		wantCode(t, err, live.ENOTFOUND)
	})
}

func testRevokeCredential(t *testing.T, e *env) {
	f := e.fixture()
	t.Run("OK", func(t *testing.T) {
		c, secret := e.credential(live.KindSession, f.owner.ID, nil)
		other, otherSecret := e.credential(live.KindSession, f.owner.ID, nil)
		if err := e.store.RevokeCredential(e.ctx, c.ID); err != nil {
			t.Fatal(err)
		}
		got, err := e.store.CredentialByHash(e.ctx, live.HashSecret(secret))
		if err != nil || got.RevokedAt == nil {
			t.Fatalf("after revoke: %+v, %v", got, err)
		}
		checkTime(t, "RevokedAt", *got.RevokedAt, e.clock.Now())
		first := *got.RevokedAt
		e.clock.Advance(time.Minute)
		if err := e.store.RevokeCredential(e.ctx, c.ID); err != nil {
			t.Fatalf("revoke twice: %v", err)
		}
		got, _ = e.store.CredentialByHash(e.ctx, live.HashSecret(secret))
		if got.RevokedAt == nil || !got.RevokedAt.Equal(first) {
			t.Fatalf("second revoke moved RevokedAt from %v to %v", first, got.RevokedAt)
		}
		if o, err := e.store.CredentialByHash(e.ctx, live.HashSecret(otherSecret)); err != nil || o.ID != other.ID || o.RevokedAt != nil {
			t.Fatalf("other credential %+v, %v: revoked too", o, err)
		}
	})
	t.Run("ErrNotFound", func(t *testing.T) {
		err := e.store.RevokeCredential(e.ctx, "cred_missing")
		wantCode(t, err, live.ENOTFOUND)
		wantMessageContains(t, err, "cred_missing")
	})
}

func testListCredentials(t *testing.T, e *env) {
	f := e.fixture()
	svc, _ := e.credential(live.KindServiceToken, f.service.ID, nil)
	per, _ := e.credential(live.KindPersonToken, f.owner.ID, nil)
	desk, _ := e.credential(live.KindDeskTicket, f.owner.ID, nil)
	for _, tc := range []struct {
		name string
		kind live.CredentialKind
		want []string
	}{
		{"All", "", []string{svc.ID, per.ID, desk.ID}},
		{"ServiceTokens", live.KindServiceToken, []string{svc.ID}},
		{"DeskTickets", live.KindDeskTicket, []string{desk.ID}},
		{"Sessions", live.KindSession, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			list, err := e.store.ListCredentials(e.ctx, tc.kind)
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, c := range list {
				if c.Hash != [32]byte{} {
					t.Fatalf("ListCredentials returned the hash of %s", c.ID)
				}
				if tc.kind != "" && c.Kind != tc.kind {
					t.Fatalf("ListCredentials(%q) returned a %s", tc.kind, c.Kind)
				}
				ids = append(ids, c.ID)
			}
			slices.Sort(ids)
			want := slices.Clone(tc.want)
			slices.Sort(want)
			if !slices.Equal(ids, want) {
				t.Fatalf("ids = %v, want %v", ids, want)
			}
		})
	}
}

// testTextNoStoreCanHold: an id with a NUL or invalid UTF-8 (which
// PostgreSQL cannot hold as text) names nothing: a lookup is ENOTFOUND or
// EINVALID, never an internal error.
func testTextNoStoreCanHold(t *testing.T, e *env) {
	for _, id := range []string{"a\x00b", "a\xffb"} {
		for name, call := range map[string]func() error{
			"Person":  func() error { _, err := e.store.Person(e.ctx, id); return err },
			"Stream":  func() error { _, err := e.store.Stream(e.ctx, id); return err },
			"Service": func() error { _, err := e.store.Service(e.ctx, id); return err },
			"Worker":  func() error { _, err := e.store.Worker(e.ctx, id); return err },
		} {
			if c := live.ErrorCode(call()); c != live.ENOTFOUND && c != live.EINVALID {
				t.Errorf("%s(%q): code %q, want not_found or invalid", name, id, c)
			}
		}
	}
}
