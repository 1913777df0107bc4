package workerapi

import "time"

// SelfTestSummary is the outcome of one self-test run as the API shows it.
type SelfTestSummary struct {
	// Passed is true only when every check passed.
	Passed bool `json:"passed"`
	// Checks maps each check that ran to whether it passed; a check that
	// could not run is absent, and listed in NotRun.
	Checks map[string]bool `json:"checks"`
	// NotRun lists the checks that could not run (empty when every one
	// ran).
	NotRun []string `json:"not_run"`
	// Reasons say, for a person, why each failing check failed.
	Reasons   []string  `json:"reasons"`
	CheckedAt time.Time `json:"checked_at"`
}

// Status is what GET /v1/status answers.
type Status struct {
	// Capacity is the worker's number of sandbox slots.
	Capacity int `json:"capacity"`
	// Active is the number of slots in use (running sandboxes, sandboxes
	// being wiped, and slots kept out of use by an unverified wipe).
	Active int `json:"active"`
	// SelfTest is the last self-test, nil before the first one finished.
	SelfTest *SelfTestSummary `json:"self_test"`
	// Pooled is how many free slots hold a sandbox started ahead, ready for
	// the next create.
	Pooled int `json:"pooled"`
	// SlotsOutOfUse says, per slot kept out of use because its wipe could
	// not be verified, why; the worker is not ready while any is.
	SlotsOutOfUse []string `json:"slots_out_of_use,omitempty"`
}
