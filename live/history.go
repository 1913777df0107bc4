package live

import (
	"time"
)

// History bounds: stores prune each stream's transitions to the last
// HistoryMaxAge, and to at most HistoryMaxRows of them.
const (
	HistoryMaxAge  = 30 * 24 * time.Hour
	HistoryMaxRows = 10000
)

// Transition is one change of a stream's state, as its history records it:
// from At on, the stream was in State.
type Transition struct {
	At    time.Time `json:"at"`
	State State     `json:"state"`
}

// AcceptTransitions returns the transitions that an accepted check-in at now
// makes, given the receive time of the registration it replaces (nil when
// the stream had none: it was absent or refused) and whether that one was
// degraded, and whether this one is: a new run, alive or degraded
// (preceded by the stale state the previous run fell into, when it had); a
// change between alive and degraded within a run; or nothing while the
// stream stays as it was. Both stores follow this rule.
func AcceptTransitions(previous *time.Time, wasDegraded bool, now time.Time, window time.Duration, degraded bool) []Transition {
	state := AcceptedState(degraded)
	switch {
	case previous == nil:
		return []Transition{{At: now, State: state}}
	case !now.Before(previous.Add(window)):
		return []Transition{{At: previous.Add(window), State: StateStale}, {At: now, State: state}}
	case wasDegraded != degraded:
		return []Transition{{At: now, State: state}}
	}
	return nil
}

// AcceptedState is the state a history records for an accepted check-in:
// StateDegraded when its report shows a problem, else StateAlive.
func AcceptedState(degraded bool) State {
	if degraded {
		return StateDegraded
	}
	return StateAlive
}

// ClearTransitions returns the transitions that clearing a stream's
// registration at now into state makes (a refusal: StateRefused; a deleted
// service: StateAbsent), given the cleared registration's receive time (nil
// when there was none) and the stream's last recorded state ("" when none):
// the stale state the registration had fallen into, if it had, then state,
// unless the stream was in state already.
func ClearTransitions(previous *time.Time, last State, now time.Time, window time.Duration, state State) []Transition {
	var ts []Transition
	if previous != nil && !now.Before(previous.Add(window)) {
		ts = append(ts, Transition{At: previous.Add(window), State: StateStale})
	}
	if previous != nil || last != state {
		ts = append(ts, Transition{At: now, State: state})
	}
	return ts
}

// Segment is a stretch of time in one state.
type Segment struct {
	From  time.Time `json:"from"`
	To    time.Time `json:"to"`
	State State     `json:"state"`
}

// Timeline returns the stream's states over [from, to) as consecutive
// segments, from its recorded transitions (as Store.History returns them
// for since = from) and its current record, which supplies what is not
// recorded yet: that the current registration has gone stale (and, for a
// history that starts after the registration or refusal, as one migrated from
// an older store, the state that record implies). Time before created, when
// the stream did not exist, is left out.
func Timeline(ts []Transition, rec WorkerRecord, created, from, to time.Time, window time.Duration) []Segment {
	ts = withRecord(ts, rec, window)
	start := from
	if created.After(start) {
		start = created
	}
	var segs []Segment
	state := StateAbsent
	at := start
	for _, t := range ts {
		if !t.At.After(start) {
			state = t.State
			continue
		}
		if !t.At.Before(to) {
			break
		}
		segs = appendSegment(segs, at, t.At, state)
		at, state = t.At, t.State
	}
	if at.Before(to) {
		segs = appendSegment(segs, at, to, state)
	}
	return segs
}

// withRecord returns ts completed with what rec says and ts does not yet:
// the stale state an alive registration has fallen into, and the current
// state when the last transition does not match it.
func withRecord(ts []Transition, rec WorkerRecord, window time.Duration) []Transition {
	var last State
	if len(ts) > 0 {
		last = ts[len(ts)-1].State
	}
	out := ts
	switch reg, ref := rec.Registration, rec.Refusal; {
	case reg != nil:
		if last != StateAlive && last != StateDegraded && last != StateStale {
			last = AcceptedState(reg.Degraded)
			out = append(out[:len(out):len(out)], Transition{At: reg.ReceivedAt, State: last})
		}
		if last == StateAlive || last == StateDegraded {
			out = append(out[:len(out):len(out)], Transition{At: reg.ReceivedAt.Add(window), State: StateStale})
		}
	case ref != nil && last != StateRefused:
		out = append(out[:len(out):len(out)], Transition{At: ref.At, State: StateRefused})
	}
	return out
}

// appendSegment appends [from, to) in state, merging it into the last
// segment when that has the same state; an empty stretch adds nothing.
func appendSegment(segs []Segment, from, to time.Time, state State) []Segment {
	if !to.After(from) {
		return segs
	}
	if n := len(segs); n > 0 && segs[n-1].State == state && segs[n-1].To.Equal(from) {
		segs[n-1].To = to
		return segs
	}
	return append(segs, Segment{From: from, To: to, State: state})
}

// Uptime returns the share of the segments' time spent alive, from 0 to 1
// (0 for no time at all). Time alive but degraded is not uptime.
func Uptime(segs []Segment) float64 { return Share(segs, StateAlive) }

// Share returns the share of the segments' time spent in state, from 0 to
// 1 (0 for no time at all).
func Share(segs []Segment, state State) float64 {
	var in, total time.Duration
	for _, s := range segs {
		d := s.To.Sub(s.From)
		total += d
		if s.State == state {
			in += d
		}
	}
	if total <= 0 {
		return 0
	}
	return float64(in) / float64(total)
}
