// Package agentsandbox is the vocabulary both sides of the sandbox worker
// check-in share, and that every other package of this module speaks: the
// contract's name and its five isolation facts, the self-test's check names,
// the egress ports, the time-box bounds and sandbox limits, the command types
// of the worker API, and the typed check-in (WorkerCheckIn) with its
// validation errors.
//
// It imports only the standard library, so a program that needs the words
// (the Go client, Live's domain, the in-sandbox init) does not link the JSON
// Schema engine, the stores or the proxy. The contract package validates;
// this package only names and encodes.
package agentsandbox

// WorkerCheckInContract is the name of the sandbox worker's check-in
// contract, the body of POST /api/streams/agent/:id/plays/worker on Live.
const WorkerCheckInContract = "live.agent-sandbox-worker-request@1"

// ServiceCodesSandbox is the worker implementation's name in its check-ins.
const ServiceCodesSandbox = "codes-sandbox"

// ValidationError is one violation of a contract, shaped like the JS SDK's
// `{path, message}`: Path is ajv's instancePath (a JSON Pointer, "" for the
// root; a missing property is reported at its parent), Message is ajv's
// wording.
type ValidationError struct {
	Path    string `json:"path"`
	Message string `json:"message"`
}
