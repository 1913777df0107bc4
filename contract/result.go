package contract

// Result is the verdict of Validate, shaped like the JS SDK's
// `{valid, errors: [{path, message}]}`.
type Result struct {
	// Valid is true when the value satisfies the contract.
	Valid bool `json:"valid"`
	// Errors lists every violation, sorted by (Path, Message); empty when Valid.
	Errors []Error `json:"errors"`
}

// Error is one violation: Path is ajv's instancePath (a JSON Pointer, "" for
// the root), Message is ajv's wording.
type Error struct {
	Path    string `json:"path"`
	Message string `json:"message"`
}
