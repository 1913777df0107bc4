package storetest

import (
	"errors"
	"testing"

	"openvibe.network/agentsandbox/live"
)

// testAuthEpoch: the epoch moves with every change that can withdraw a
// check-in's authorisation and with nothing else, and a write made at an old
// epoch stores nothing.
func testAuthEpoch(t *testing.T, e *env) {
	f := e.fixture()
	_, secret := e.credential(live.KindServiceToken, f.service.ID, nil)
	epoch := func() int64 {
		t.Helper()
		l, err := e.store.LookupCheckIn(e.ctx, live.HashSecret(secret), f.stream.ID, f.owner.ID)
		if err != nil {
			t.Fatal(err)
		}
		return l.Epoch
	}
	start := epoch()
	if start == 0 {
		t.Fatal("LookupCheckIn gave epoch 0")
	}
	reg := f.registration(`{"epoch":1}`)
	reg.AuthEpoch = start
	if _, err := e.store.Accept(e.ctx, reg); err != nil {
		t.Fatalf("Accept at the current epoch: %v", err)
	}
	other := e.fixture()
	tok, _ := e.credential(live.KindServiceToken, other.service.ID, nil)
	per, _ := e.credential(live.KindPersonToken, f.owner.ID, nil)
	ticketExp := e.clock.Now().Add(1 << 40)
	_, ticket := e.credential(live.KindLoginTicket, f.owner.ID, &ticketExp)
	for _, tc := range []struct {
		name  string
		do    func() error
		moves bool
	}{
		{"Accept", func() error { _, err := e.store.Accept(e.ctx, f.registration(`{}`)); return err }, false},
		{"Refuse", func() error { _, err := e.store.Refuse(e.ctx, other.refusal()); return err }, false},
		{"TouchCredential", func() error { return e.store.TouchCredential(e.ctx, tok.ID) }, false},
		{"CreatePerson", func() error { _, err := e.store.CreatePerson(e.ctx, live.Person{Name: "x"}); return err }, false},
		{"RevokePersonToken", func() error { return e.store.RevokeCredential(e.ctx, per.ID) }, false},
		{"ConsumeLoginTicket", func() error { _, err := e.store.ConsumeLoginTicket(e.ctx, live.HashSecret(ticket)); return err }, false},
		{"Probe", func() error { return e.store.Probe(e.ctx) }, false},
		{"RevokeServiceToken", func() error { return e.store.RevokeCredential(e.ctx, tok.ID) }, true},
		{"SetCapability", func() error { _, err := e.store.SetCapability(e.ctx, other.service.ID, "x.y", true); return err }, true},
		{"DeleteStream", func() error { _, err := e.store.DeleteStream(e.ctx, other.stream.ID); return err }, true},
		{"DeleteService", func() error { _, err := e.store.DeleteService(e.ctx, other.service.ID); return err }, true},
		{"DeletePerson", func() error { _, err := e.store.DeletePerson(e.ctx, other.owner.ID); return err }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := epoch()
			if err := tc.do(); err != nil {
				t.Fatal(err)
			}
			if moved := epoch() != before; moved != tc.moves {
				t.Fatalf("the epoch moved: %v, want %v", moved, tc.moves)
			}
		})
	}
	t.Run("ErrAuthChanged", func(t *testing.T) {
		stored := e.worker(f.stream.ID)
		old := f.registration(`{"late":true}`)
		old.AuthEpoch = start
		if _, err := e.store.Accept(e.ctx, old); !errors.Is(err, live.ErrAuthChanged) {
			t.Fatalf("Accept at an old epoch: %v, want ErrAuthChanged", err)
		}
		ref := f.refusal()
		ref.AuthEpoch = start
		if _, err := e.store.Refuse(e.ctx, ref); !errors.Is(err, live.ErrAuthChanged) {
			t.Fatalf("Refuse at an old epoch: %v, want ErrAuthChanged", err)
		}
		if after := e.worker(f.stream.ID); !sameRecord(stored, after) {
			t.Fatalf("a write at an old epoch changed the record: %+v -> %+v", stored, after)
		}
		now := f.registration(`{"now":true}`)
		now.AuthEpoch = epoch()
		if _, err := e.store.Accept(e.ctx, now); err != nil {
			t.Fatalf("Accept at the new epoch: %v", err)
		}
	})
}
