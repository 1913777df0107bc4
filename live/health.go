package live

import "time"

// AliveWindow is how long an accepted check-in keeps a stream alive.
const AliveWindow = 60 * time.Second

// State is a stream's worker health as the owner sees it.
type State string

// The health states.
const (
	StateAlive   State = "alive"   // accepted check-in within AliveWindow
	StateStale   State = "stale"   // last accepted check-in is older
	StateRefused State = "refused" // the last check-in was refused
	StateAbsent  State = "absent"  // never checked in
	// StateDegraded is alive while the accepted report shows a problem
	// (Assessment.Degraded). Only histories record it: Derive says alive,
	// as the contract does.
	StateDegraded State = "degraded"
)

// Health is the state derived from a WorkerRecord at a given time.
type Health struct {
	State State `json:"state"`
	// Reason says, for a person, why the state is what it is.
	Reason string `json:"reason"`
	// AliveUntil is when an alive registration turns stale (nil without one).
	AliveUntil *time.Time `json:"alive_until"`
	// Age is how long ago the registration was received (0 without one).
	Age time.Duration `json:"-"`
}

// Derive computes the health of rec at now (the server's clock), with
// window as the alive window. The worker's own `at` and `ready` play no part.
func Derive(rec WorkerRecord, now time.Time, window time.Duration) Health {
	switch {
	case rec.Registration != nil:
		until := rec.Registration.ReceivedAt.Add(window)
		age := now.Sub(rec.Registration.ReceivedAt)
		if now.Before(until) {
			return Health{State: StateAlive, Reason: "accepted check-in received within the alive window", AliveUntil: &until, Age: age}
		}
		return Health{State: StateStale, Reason: "no accepted check-in within the alive window", AliveUntil: &until, Age: age}
	case rec.Refusal != nil:
		return Health{State: StateRefused, Reason: "the last check-in was refused by the contract"}
	default:
		return Health{State: StateAbsent, Reason: "the worker has never checked in"}
	}
}
