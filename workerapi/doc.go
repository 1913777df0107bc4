// Package workerapi is the worker API's wire format, stated once: the
// request and answer bodies, the NDJSON events of a command's output, the
// attach protocol's messages and the error codes, as JSON carries them.
// The server (worker/httpapi) and the Go client (client) both import it,
// as Kubernetes keeps its API types apart from both; docs/openapi.yaml
// describes the same types, and worker/httpapi's tests keep the document
// equal to them, field by field. It imports the standard library, the root
// package's vocabulary and the JSON library the server decodes requests
// with (a create's `browser` decodes itself with it).
package workerapi
