package live

import (
	"testing"
	"time"
)

func TestDerive(t *testing.T) {
	t0 := time.Date(2026, 11, 7, 12, 0, 0, 0, time.UTC)
	reg := &Registration{StreamID: "s", ReceivedAt: t0}
	ref := &Refusal{StreamID: "s", At: t0}
	for _, tc := range []struct {
		name string
		rec  WorkerRecord
		now  time.Time
		want State
	}{
		{"AliveAt59.9s", WorkerRecord{Registration: reg}, t0.Add(59900 * time.Millisecond), StateAlive},
		{"StaleAt60.1s", WorkerRecord{Registration: reg}, t0.Add(60100 * time.Millisecond), StateStale},
		{"StaleAtExactly60s", WorkerRecord{Registration: reg}, t0.Add(60 * time.Second), StateStale},
		{"AcceptedAfterOldRefusal", WorkerRecord{Registration: reg, Refusal: ref}, t0.Add(time.Second), StateAlive},
		{"Refused", WorkerRecord{Refusal: ref}, t0.Add(time.Second), StateRefused},
		{"Absent", WorkerRecord{}, t0, StateAbsent},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Derive(tc.rec, tc.now, AliveWindow); got.State != tc.want {
				t.Fatalf("state %q (%s), want %q", got.State, got.Reason, tc.want)
			}
		})
	}
}
