package contract

import "openvibe.network/agentsandbox"

// Result is the verdict of Validate, shaped like the JS SDK's
// `{valid, errors: [{path, message}]}`.
type Result struct {
	// Valid is true when the value satisfies the contract.
	Valid bool `json:"valid"`
	// Errors lists every violation, sorted by (Path, Message); empty when Valid.
	Errors []agentsandbox.ValidationError `json:"errors"`
}
