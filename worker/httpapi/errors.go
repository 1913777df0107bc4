package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"strings"

	"openvibe.network/agentsandbox/sandbox"
)

// The API's error codes, each with the one status it is answered with (see
// statusOf). Clients match codes, never messages.
const (
	CodeInvalidRequest  = "invalid_request"
	CodeUnsupportedType = "unsupported_media_type"
	CodeBodyTooLarge    = "body_too_large"
	CodeUnauthorized    = "unauthorized"
	CodeNoRoute         = "no_route"
	CodeMethod          = "method_not_allowed"
	CodeSandboxNotFound = "sandbox_not_found"
	CodeNotFound        = "not_found"
	CodeFileNotFound    = "file_not_found"
	CodeProcessNotFound = "process_not_found"
	CodeIsDirectory     = "is_directory"
	CodeNotDirectory    = "not_directory"
	CodeExists          = "exists"
	CodeNotEmpty        = "not_empty"
	CodeInvalidArchive  = "invalid_archive"
	CodeAtCapacity      = "at_capacity"
	CodeNoBrowser       = "no_browser"
	CodeBrowserBusy     = "browser_busy"
	CodeWorkspaceFull   = "workspace_full"
	CodeWipeUnverified  = "wipe_unverified"
	CodeNoSelfTest      = "no_selftest"
	CodeLimits          = "limits_unavailable"
	CodeInternal        = "internal"
)

// statusOf is the status of each code: the one table that maps them.
func statusOf(code string) int {
	switch code {
	case CodeInvalidRequest, CodeIsDirectory, CodeNotDirectory, CodeNoBrowser, CodeInvalidArchive:
		return http.StatusBadRequest
	case CodeUnauthorized:
		return http.StatusUnauthorized
	case CodeNoRoute, CodeSandboxNotFound, CodeNotFound, CodeFileNotFound, CodeProcessNotFound:
		return http.StatusNotFound
	case CodeMethod:
		return http.StatusMethodNotAllowed
	case CodeExists, CodeNotEmpty, CodeBrowserBusy:
		return http.StatusConflict
	case CodeBodyTooLarge:
		return http.StatusRequestEntityTooLarge
	case CodeUnsupportedType:
		return http.StatusUnsupportedMediaType
	case CodeAtCapacity:
		return http.StatusTooManyRequests
	case CodeNoSelfTest:
		return http.StatusNotImplemented
	case CodeLimits:
		return http.StatusServiceUnavailable
	case CodeWorkspaceFull:
		return http.StatusInsufficientStorage
	}
	return http.StatusInternalServerError
}

// newError is the Error of code with a message saying what to fix.
func newError(code, format string, args ...any) *Error {
	return &Error{Status: statusOf(code), Code: code, Message: fmt.Sprintf(format, args...)}
}

// Error is an error that crosses HTTP: a status (from its code, see
// statusOf), a stable code and a message for a person saying what to fix.
type Error struct {
	Status  int    `json:"-"`
	Code    string `json:"code"`
	Message string `json:"message"`
	// Leftovers lists what a wipe could not remove (code wipe_unverified).
	Leftovers []string `json:"leftovers,omitempty"`
	// RetryAfter, in seconds, is sent as the Retry-After header when set.
	RetryAfter int `json:"-"`
}

// Error implements error.
func (e *Error) Error() string { return e.Code + ": " + e.Message }

// badRequest is a 400 with code invalid_request.
func badRequest(format string, args ...any) *Error {
	return newError(CodeInvalidRequest, format, args...)
}

// errSandboxNotFound is the 404 of an unknown sandbox id.
func errSandboxNotFound(id string) *Error {
	return &Error{Status: statusOf(CodeSandboxNotFound), Code: CodeSandboxNotFound,
		Message: fmt.Sprintf("no sandbox %q on this worker (it may have been deleted or its time box ended)", id)}
}

// toError maps any error to the Error sent to the client; runtime errors
// other than the sandbox sentinels become a 500 whose details stay in the log.
func toError(err error) *Error {
	var apiErr *Error
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &apiErr):
		return apiErr
	case errors.As(err, &tooBig):
		return &Error{Status: statusOf(CodeBodyTooLarge), Code: CodeBodyTooLarge,
			Message: fmt.Sprintf("the request body is larger than this worker's limit of %d bytes", tooBig.Limit)}
	case errors.Is(err, sandbox.ErrCapacity):
		return &Error{Status: statusOf(CodeAtCapacity), Code: CodeAtCapacity, RetryAfter: 5,
			Message: "every sandbox slot of this worker is in use; delete a sandbox or retry later"}
	case errors.Is(err, sandbox.ErrLimits):
		return newError(CodeLimits, "this worker cannot enforce sandbox limits, so it starts no sandbox: %s", after(err, sandbox.ErrLimits))
	case errors.Is(err, sandbox.ErrPath):
		return badRequest("the path leaves the workspace; give a path inside /workspace without `..`")
	case errors.Is(err, sandbox.ErrNotFound):
		return &Error{Status: statusOf(CodeNotFound), Code: CodeNotFound, Message: "no such sandbox or file"}
	case errors.Is(err, fs.ErrNotExist):
		return &Error{Status: statusOf(CodeFileNotFound), Code: CodeFileNotFound, Message: "no such file in the workspace"}
	default:
		return &Error{Status: statusOf(CodeInternal), Code: CodeInternal,
			Message: "the worker failed; its log says why"}
	}
}

// after returns what err's message says after sentinel's own words (the
// runtime's explanation), or its whole message.
func after(err, sentinel error) string {
	msg, word := err.Error(), sentinel.Error()+": "
	if i := strings.Index(msg, word); i >= 0 {
		return msg[i+len(word):]
	}
	return msg
}

// writeError sends e as `{"error":{...}}`.
func writeError(w http.ResponseWriter, e *Error) {
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", fmt.Sprint(e.RetryAfter))
	}
	writeJSON(w, e.Status, struct {
		Error *Error `json:"error"`
	}{e})
}

// writeJSON sends v with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// decodeJSON reads exactly one JSON object into v, refusing unknown fields,
// and says what is wrong with a body it cannot take.
func (s *Server) decodeJSON(w http.ResponseWriter, r *http.Request, v any) error {
	if ct := r.Header.Get("Content-Type"); ct != "" && !strings.HasPrefix(ct, "application/json") {
		return &Error{Status: statusOf(CodeUnsupportedType), Code: CodeUnsupportedType,
			Message: "send the body as application/json"}
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, s.cfg.MaxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return badRequest("the body must hold one JSON object and nothing after it")
	}
	return nil
}

// jsonError explains a JSON decoding error.
func jsonError(err error) error {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return err
	case errors.Is(err, io.EOF):
		return badRequest("the body is empty; send a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return badRequest("the body ends in the middle of the JSON")
	case errors.As(err, &syntax):
		return badRequest("the body is not valid JSON at byte %d: %v", syntax.Offset, err)
	case errors.As(err, &typ):
		return badRequest("field %q must be %s, not %s", typ.Field, typ.Type, typ.Value)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return badRequest("unknown field %s; see docs/openapi.yaml", strings.TrimPrefix(err.Error(), "json: unknown field "))
	default:
		return badRequest("the body is not the expected JSON: %v", err)
	}
}
