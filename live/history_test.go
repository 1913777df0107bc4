package live

import (
	"reflect"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 7, 12, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

func ptrTime(t time.Time) *time.Time { return &t }

func TestAcceptTransitions(t *testing.T) {
	for _, tc := range []struct {
		name                  string
		previous              *time.Time
		wasDegraded, degraded bool
		now                   time.Time
		want                  []Transition
	}{
		{"FirstCheckIn", nil, false, false, at(0), []Transition{{at(0), StateAlive}}},
		{"FirstCheckInDegraded", nil, false, true, at(0), []Transition{{at(0), StateDegraded}}},
		{"StillAlive", ptrTime(at(0)), false, false, at(59 * time.Second), nil},
		{"StillDegraded", ptrTime(at(0)), true, true, at(59 * time.Second), nil},
		{"Degrades", ptrTime(at(0)), false, true, at(20 * time.Second), []Transition{{at(20 * time.Second), StateDegraded}}},
		{"Recovers", ptrTime(at(0)), true, false, at(20 * time.Second), []Transition{{at(20 * time.Second), StateAlive}}},
		{"AfterStale", ptrTime(at(0)), false, false, at(90 * time.Second), []Transition{{at(60 * time.Second), StateStale}, {at(90 * time.Second), StateAlive}}},
		{"AfterStaleDegraded", ptrTime(at(0)), false, true, at(90 * time.Second), []Transition{{at(60 * time.Second), StateStale}, {at(90 * time.Second), StateDegraded}}},
		{"ExactlyAtWindow", ptrTime(at(0)), false, false, at(60 * time.Second), []Transition{{at(60 * time.Second), StateStale}, {at(60 * time.Second), StateAlive}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := AcceptTransitions(tc.previous, tc.wasDegraded, tc.now, AliveWindow, tc.degraded); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("AcceptTransitions = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestClearTransitions(t *testing.T) {
	for _, tc := range []struct {
		name     string
		previous *time.Time
		last     State
		state    State
		want     []Transition
	}{
		{"RefusedWhileAlive", ptrTime(at(100 * time.Second)), StateAlive, StateRefused, []Transition{{at(120 * time.Second), StateRefused}}},
		{"RefusedWhileStale", ptrTime(at(0)), StateAlive, StateRefused, []Transition{{at(60 * time.Second), StateStale}, {at(120 * time.Second), StateRefused}}},
		{"RefusedAgain", nil, StateRefused, StateRefused, nil},
		{"RefusedFirst", nil, "", StateRefused, []Transition{{at(120 * time.Second), StateRefused}}},
		{"RefusedAfterAbsent", nil, StateAbsent, StateRefused, []Transition{{at(120 * time.Second), StateRefused}}},
		{"ServiceDeletedWhileAlive", ptrTime(at(100 * time.Second)), StateAlive, StateAbsent, []Transition{{at(120 * time.Second), StateAbsent}}},
		{"ServiceDeletedWhenRefused", nil, StateRefused, StateAbsent, []Transition{{at(120 * time.Second), StateAbsent}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ClearTransitions(tc.previous, tc.last, at(120*time.Second), AliveWindow, tc.state); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("ClearTransitions = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestTimeline(t *testing.T) {
	h := time.Hour
	reg := func(d time.Duration) WorkerRecord {
		return WorkerRecord{Registration: &Registration{ReceivedAt: at(d)}}
	}
	for _, tc := range []struct {
		name     string
		ts       []Transition
		rec      WorkerRecord
		created  time.Time
		from, to time.Time
		want     []Segment
		uptime   float64
	}{
		{"Absent", nil, WorkerRecord{}, at(0), at(0), at(4 * h), []Segment{{at(0), at(4 * h), StateAbsent}}, 0},
		{"AliveThroughout", []Transition{{at(-h), StateAlive}}, reg(4*h - time.Second), at(-2 * h), at(0), at(4 * h),
			[]Segment{{at(0), at(4 * h), StateAlive}}, 1},
		{"AliveThenStaleNow", []Transition{{at(h), StateAlive}}, reg(2 * h), at(0), at(0), at(4 * h),
			[]Segment{{at(0), at(h), StateAbsent}, {at(h), at(2*h + time.Minute), StateAlive}, {at(2*h + time.Minute), at(4 * h), StateStale}}, (h + time.Minute).Hours() / 4},
		{"RecordedRun", []Transition{{at(0), StateAlive}, {at(h), StateStale}, {at(2 * h), StateAlive}, {at(3 * h), StateRefused}},
			WorkerRecord{Refusal: &Refusal{At: at(3 * h)}}, at(-h), at(0), at(4 * h),
			[]Segment{{at(0), at(h), StateAlive}, {at(h), at(2 * h), StateStale}, {at(2 * h), at(3 * h), StateAlive}, {at(3 * h), at(4 * h), StateRefused}}, 0.5},
		{"StartsBeforeWindow", []Transition{{at(-3 * h), StateAlive}, {at(-h), StateStale}, {at(h), StateAlive}}, reg(4*h - time.Second), at(-5 * h), at(0), at(4 * h),
			[]Segment{{at(0), at(h), StateStale}, {at(h), at(4 * h), StateAlive}}, 0.75},
		{"CreatedInWindow", nil, reg(3 * h), at(2 * h), at(0), at(4 * h),
			[]Segment{{at(2 * h), at(3 * h), StateAbsent}, {at(3 * h), at(3*h + time.Minute), StateAlive}, {at(3*h + time.Minute), at(4 * h), StateStale}}, time.Minute.Hours() / 2},
		{"MigratedRefusal", nil, WorkerRecord{Refusal: &Refusal{At: at(h)}}, at(-h), at(0), at(4 * h),
			[]Segment{{at(0), at(h), StateAbsent}, {at(h), at(4 * h), StateRefused}}, 0},
		{"DegradedIsNotUptime", []Transition{{at(0), StateAlive}, {at(h), StateDegraded}, {at(3 * h), StateAlive}},
			WorkerRecord{Registration: &Registration{ReceivedAt: at(4*h - time.Second)}}, at(-h), at(0), at(4 * h),
			[]Segment{{at(0), at(h), StateAlive}, {at(h), at(3 * h), StateDegraded}, {at(3 * h), at(4 * h), StateAlive}}, 0.5},
		{"MigratedDegradedRegistration", nil, WorkerRecord{Registration: &Registration{ReceivedAt: at(3 * h), Degraded: true}}, at(-h), at(0), at(4 * h),
			[]Segment{{at(0), at(3 * h), StateAbsent}, {at(3 * h), at(3*h + time.Minute), StateDegraded}, {at(3*h + time.Minute), at(4 * h), StateStale}}, 0},
		{"SameStatesMerge", []Transition{{at(h), StateRefused}, {at(2 * h), StateRefused}}, WorkerRecord{Refusal: &Refusal{At: at(2 * h)}}, at(0), at(0), at(4 * h),
			[]Segment{{at(0), at(h), StateAbsent}, {at(h), at(4 * h), StateRefused}}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Timeline(tc.ts, tc.rec, tc.created, tc.from, tc.to, AliveWindow)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Timeline =\n%+v\nwant\n%+v", got, tc.want)
			}
			if u := Uptime(got); u < tc.uptime-1e-9 || u > tc.uptime+1e-9 {
				t.Fatalf("Uptime = %v, want %v", u, tc.uptime)
			}
		})
	}
}

func TestUptimeEmpty(t *testing.T) {
	if u := Uptime(nil); u != 0 {
		t.Fatalf("Uptime(nil) = %v", u)
	}
}
