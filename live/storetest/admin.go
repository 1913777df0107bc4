package storetest

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"openvibe.network/agentsandbox/live"
)

func testListStreamsOwnedBy(t *testing.T, e *env) {
	ada, bob := e.person("Ada"), e.person("Bob")
	a1 := e.stream("a1", ada.ID)
	e.stream("b1", bob.ID)
	e.clock.Advance(time.Second)
	a2 := e.stream("a2", ada.ID)
	for _, tc := range []struct {
		name, owner string
		want        []string
	}{
		{"Ada", ada.ID, []string{a1.ID, a2.ID}},
		{"Bob", bob.ID, []string{"b1"}},
		{"Nobody", "per_nobody", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			list, err := e.store.ListStreamsOwnedBy(e.ctx, tc.owner)
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, s := range list {
				if s.OwnerID != tc.owner {
					t.Fatalf("stream %s of %s listed for %s", s.ID, s.OwnerID, tc.owner)
				}
				ids = append(ids, s.ID)
			}
			if !slices.Equal(ids, tc.want) {
				t.Fatalf("ListStreamsOwnedBy(%s) = %v, want %v", tc.owner, ids, tc.want)
			}
		})
	}
}

func testSetCapability(t *testing.T, e *env) {
	sv := e.service("w", "a.b", live.CapabilityRegister)
	for _, tc := range []struct {
		name string
		c    string
		held bool
		want []string
	}{
		{"GrantNew", "x.y", true, []string{"a.b", live.CapabilityRegister, "x.y"}},
		{"GrantHeld", "a.b", true, []string{"a.b", live.CapabilityRegister, "x.y"}},
		{"Withdraw", live.CapabilityRegister, false, []string{"a.b", "x.y"}},
		{"WithdrawMissing", "nope", false, []string{"a.b", "x.y"}},
		{"WithdrawAll", "a.b", false, []string{"x.y"}},
		{"WithdrawLast", "x.y", false, []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := e.store.SetCapability(e.ctx, sv.ID, tc.c, tc.held)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got.Capabilities, tc.want) || got.Capabilities == nil || got.ID != sv.ID || got.Name != sv.Name {
				t.Fatalf("SetCapability = %+v, want capabilities %q", got, tc.want)
			}
			if stored, err := e.store.Service(e.ctx, sv.ID); err != nil || !slices.Equal(stored.Capabilities, tc.want) {
				t.Fatalf("stored service %+v, %v; want capabilities %q", stored, err, tc.want)
			}
		})
	}
	t.Run("ErrNotFound", func(t *testing.T) {
		_, err := e.store.SetCapability(e.ctx, "svc_missing", "x", true)
		wantCode(t, err, live.ENOTFOUND)
	})
	t.Run("ErrInvalidEmpty", func(t *testing.T) {
		_, err := e.store.SetCapability(e.ctx, sv.ID, "", true)
		wantCode(t, err, live.EINVALID)
	})
}

// secretGone fails unless no credential has secret any more.
func (e *env) secretGone(tb testing.TB, secret string) {
	tb.Helper()
	if c, err := e.store.CredentialByHash(e.ctx, live.HashSecret(secret)); live.ErrorCode(err) != live.ENOTFOUND {
		tb.Fatalf("credential %+v (%v) still found", c, err)
	}
}

func testDeletePerson(t *testing.T, e *env) {
	f := e.fixture() // Ada owns f.stream; f.service checks it in
	other := e.person("Bob")
	bobs := e.stream("bobs", other.ID)
	// A registration naming Ada on Bob's stream (as its subject) and a
	// refusal naming her on another of Bob's streams.
	bobs2 := e.stream("bobs2", other.ID)
	if _, err := e.store.Accept(e.ctx, live.Registration{StreamID: bobs.ID, Report: []byte(`{}`), ServiceID: f.service.ID, SubjectID: f.owner.ID}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.Refuse(e.ctx, live.Refusal{StreamID: bobs2.ID, ServiceID: f.service.ID, SubjectID: f.owner.ID}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.Accept(e.ctx, f.registration(`{}`)); err != nil {
		t.Fatal(err)
	}
	tok, secret := e.credential(live.KindPersonToken, f.owner.ID, nil)
	sess, sessSecret := e.credential(live.KindSession, f.owner.ID, nil)
	_, bobSecret := e.credential(live.KindPersonToken, other.ID, nil)
	got, err := e.store.DeletePerson(e.ctx, f.owner.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := live.Deletion{Kind: "person", ID: f.owner.ID, Credentials: sorted(tok.ID, sess.ID), Streams: []string{f.stream.ID},
		Registrations: sorted(bobs.ID, bobs2.ID)}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("DeletePerson = %+v, want %+v", got, want)
	}
	e.secretGone(t, secret)
	e.secretGone(t, sessSecret)
	if _, err := e.store.CredentialByHash(e.ctx, live.HashSecret(bobSecret)); err != nil {
		t.Fatalf("Bob's token went with Ada: %v", err)
	}
	_, err = e.store.Person(e.ctx, f.owner.ID)
	wantCode(t, err, live.ENOTFOUND)
	_, err = e.store.Stream(e.ctx, f.stream.ID)
	wantCode(t, err, live.ENOTFOUND)
	for _, id := range []string{bobs.ID, bobs2.ID} {
		if rec := e.worker(id); rec.Registration != nil || rec.Refusal != nil {
			t.Fatalf("stream %s still has %+v naming the deleted person", id, rec)
		}
	}
	t.Run("ErrNotFound", func(t *testing.T) {
		_, err := e.store.DeletePerson(e.ctx, f.owner.ID)
		wantCode(t, err, live.ENOTFOUND)
	})
}

func sorted(ids ...string) []string {
	slices.Sort(ids)
	return ids
}

func testDeleteStream(t *testing.T, e *env) {
	f := e.fixture()
	if _, err := e.store.Accept(e.ctx, f.registration(`{}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.Refuse(e.ctx, f.refusal()); err != nil {
		t.Fatal(err)
	}
	got, err := e.store.DeleteStream(e.ctx, f.stream.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := live.Deletion{Kind: "stream", ID: f.stream.ID, Credentials: []string{}, Streams: []string{}, Registrations: []string{}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("DeleteStream = %+v, want %+v", got, want)
	}
	_, err = e.store.Stream(e.ctx, f.stream.ID)
	wantCode(t, err, live.ENOTFOUND)
	_, err = e.store.History(e.ctx, f.stream.ID, fakeEpoch)
	wantCode(t, err, live.ENOTFOUND)
	// The id can be used again, with nothing of the old stream.
	e.stream(f.stream.ID, f.owner.ID)
	if rec := e.worker(f.stream.ID); rec.Registration != nil || rec.Refusal != nil {
		t.Fatalf("a new stream with the old id has %+v", rec)
	}
	if h, err := e.store.History(e.ctx, f.stream.ID, fakeEpoch.Add(-time.Hour)); err != nil || len(h) != 0 {
		t.Fatalf("a new stream with the old id has history %+v, %v", h, err)
	}
	t.Run("ErrNotFound", func(t *testing.T) {
		_, err := e.store.DeleteStream(e.ctx, "missing")
		wantCode(t, err, live.ENOTFOUND)
	})
}

func testDeleteService(t *testing.T, e *env) {
	f := e.fixture()
	keep := e.service("other", live.CapabilityRegister)
	second := e.stream("", f.owner.ID)
	third := e.stream("", f.owner.ID)
	if _, err := e.store.Accept(e.ctx, f.registration(`{}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.Refuse(e.ctx, live.Refusal{StreamID: second.ID, ServiceID: f.service.ID, SubjectID: f.owner.ID}); err != nil {
		t.Fatal(err)
	}
	kept := live.Registration{StreamID: third.ID, Report: []byte(`{"kept":1}`), ServiceID: keep.ID, SubjectID: f.owner.ID}
	if _, err := e.store.Accept(e.ctx, kept); err != nil {
		t.Fatal(err)
	}
	tok, secret := e.credential(live.KindServiceToken, f.service.ID, nil)
	_, keepSecret := e.credential(live.KindServiceToken, keep.ID, nil)
	got, err := e.store.DeleteService(e.ctx, f.service.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := live.Deletion{Kind: "service", ID: f.service.ID, Credentials: []string{tok.ID}, Streams: []string{},
		Registrations: sorted(f.stream.ID, second.ID)}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("DeleteService = %+v, want %+v", got, want)
	}
	e.secretGone(t, secret)
	if _, err := e.store.CredentialByHash(e.ctx, live.HashSecret(keepSecret)); err != nil {
		t.Fatalf("the other service's token went too: %v", err)
	}
	for _, id := range []string{f.stream.ID, second.ID} {
		rec := e.worker(id)
		if rec.Registration != nil || rec.Refusal != nil {
			t.Fatalf("stream %s still has %+v by the deleted service", id, rec)
		}
		if h := e.history(id); len(h) == 0 || h[len(h)-1].State != live.StateAbsent {
			t.Fatalf("stream %s history %+v does not end absent", id, h)
		}
	}
	if rec := e.worker(third.ID); rec.Registration == nil || string(rec.Registration.Report) != `{"kept":1}` {
		t.Fatalf("the other service's registration went too: %+v", rec)
	}
	t.Run("ErrNotFound", func(t *testing.T) {
		_, err := e.store.DeleteService(e.ctx, f.service.ID)
		wantCode(t, err, live.ENOTFOUND)
	})
}

func testRevokeSessions(t *testing.T, e *env) {
	f := e.fixture()
	other := e.person("Bob")
	s1, s1Secret := e.credential(live.KindSession, f.owner.ID, nil)
	s2, _ := e.credential(live.KindSession, f.owner.ID, nil)
	revoked, _ := e.credential(live.KindSession, f.owner.ID, nil)
	if err := e.store.RevokeCredential(e.ctx, revoked.ID); err != nil {
		t.Fatal(err)
	}
	_, tokSecret := e.credential(live.KindPersonToken, f.owner.ID, nil)
	_, bobSecret := e.credential(live.KindSession, other.ID, nil)
	ids, err := e.store.RevokeSessions(e.ctx, f.owner.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := sorted(ids...), sorted(s1.ID, s2.ID); !slices.Equal(got, want) {
		t.Fatalf("RevokeSessions = %v, want %v", got, want)
	}
	if c, err := e.store.CredentialByHash(e.ctx, live.HashSecret(s1Secret)); err != nil || c.RevokedAt == nil {
		t.Fatalf("session %+v (%v) not revoked", c, err)
	}
	for name, secret := range map[string]string{"person token": tokSecret, "Bob's session": bobSecret} {
		if c, err := e.store.CredentialByHash(e.ctx, live.HashSecret(secret)); err != nil || c.RevokedAt != nil {
			t.Fatalf("%s %+v (%v) revoked too", name, c, err)
		}
	}
	if ids, err := e.store.RevokeSessions(e.ctx, f.owner.ID); err != nil || len(ids) != 0 || ids == nil {
		t.Fatalf("second RevokeSessions = %#v, %v; want an empty list", ids, err)
	}
	t.Run("ErrNotFound", func(t *testing.T) {
		_, err := e.store.RevokeSessions(e.ctx, "per_missing")
		wantCode(t, err, live.ENOTFOUND)
	})
}

func testConsumeLoginTicket(t *testing.T, e *env) {
	f := e.fixture()
	future, past := e.clock.Now().Add(time.Hour), e.clock.Now().Add(-time.Second)
	if e.traits.DatabaseClock {
		future, past = time.Now().Add(time.Hour), time.Now().Add(-time.Second)
	}
	ticket, secret := e.credential(live.KindLoginTicket, f.owner.ID, &future)
	t.Run("OK", func(t *testing.T) {
		got, err := e.store.ConsumeLoginTicket(e.ctx, live.HashSecret(secret))
		if err != nil {
			t.Fatal(err)
		}
		if got.ID != ticket.ID || got.PersonID != f.owner.ID || got.Kind != live.KindLoginTicket || got.RevokedAt == nil {
			t.Fatalf("ConsumeLoginTicket = %+v, want ticket %s used up", got, ticket.ID)
		}
	})
	_, expired := e.credential(live.KindLoginTicket, f.owner.ID, &past)
	_, session := e.credential(live.KindSession, f.owner.ID, nil)
	for _, tc := range []struct{ name, secret string }{
		{"ErrUsedTwice", secret},
		{"ErrExpired", expired},
		{"ErrNotATicket", session},
		{"ErrUnknown", "ovl_unknown"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.store.ConsumeLoginTicket(e.ctx, live.HashSecret(tc.secret))
			wantCode(t, err, live.ENOTFOUND)
		})
	}
	if c, err := e.store.CredentialByHash(e.ctx, live.HashSecret(session)); err != nil || c.RevokedAt != nil {
		t.Fatalf("a session was used up as a ticket: %+v, %v", c, err)
	}
}

func testTouchCredential(t *testing.T, e *env) {
	f := e.fixture()
	tok, secret := e.credential(live.KindServiceToken, f.service.ID, nil)
	e.clock.Advance(time.Second) // listings are oldest first
	per, _ := e.credential(live.KindPersonToken, f.owner.ID, nil)
	if err := e.store.TouchCredential(e.ctx, tok.ID); err != nil {
		t.Fatal(err)
	}
	got, err := e.store.CredentialByHash(e.ctx, live.HashSecret(secret))
	if err != nil || got.LastUsedAt == nil {
		t.Fatalf("after TouchCredential: %+v, %v", got, err)
	}
	want := e.clock.Now().Truncate(live.LastUseGrain)
	if e.traits.DatabaseClock {
		want = time.Now().Truncate(live.LastUseGrain)
	}
	if d := got.LastUsedAt.Sub(want).Abs(); d > live.LastUseGrain {
		t.Fatalf("LastUsedAt %v, want about %v", got.LastUsedAt, want)
	}
	if !got.LastUsedAt.Equal(got.LastUsedAt.Truncate(live.LastUseGrain)) {
		t.Fatalf("LastUsedAt %v is not kept to the minute", got.LastUsedAt)
	}
	list, err := e.store.ListCredentials(e.ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		ID, Holder string
		Used       bool
	}
	var rows []row
	for _, c := range list {
		rows = append(rows, row{c.ID, c.HolderName, c.LastUsedAt != nil})
	}
	if wantRows := []row{{tok.ID, f.service.Name, true}, {per.ID, f.owner.Name, false}}; !reflect.DeepEqual(rows, wantRows) {
		t.Fatalf("ListCredentials = %+v, want %+v", rows, wantRows)
	}
	t.Run("ErrNotFound", func(t *testing.T) {
		wantCode(t, e.store.TouchCredential(e.ctx, "cred_missing"), live.ENOTFOUND)
	})
}
