package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"strings"

	"openvibe.network/agentsandbox/sandbox"
	"openvibe.network/agentsandbox/workerapi"
)

// statusOf is the status of each code: the one table that maps them.
func statusOf(code string) int {
	switch code {
	case CodeInvalidRequest, CodeIsDirectory, CodeNotDirectory, CodeNoBrowser, CodeInvalidArchive, CodeImageNotAllowed, CodeInvalidImage:
		return http.StatusBadRequest
	case CodeUnauthorized:
		return http.StatusUnauthorized
	case CodePreviewForbidden, CodeImageUnauthorized:
		return http.StatusForbidden
	case CodeNoRoute, CodeSandboxNotFound, CodeNotFound, CodeFileNotFound, CodeProcessNotFound, CodeImageNotFound:
		return http.StatusNotFound
	case CodeMethod:
		return http.StatusMethodNotAllowed
	case CodeExists, CodeNotEmpty, CodeBrowserBusy, CodeProcessExited, CodeImageInUse, CodeSandboxBroken:
		return http.StatusConflict
	case CodeBodyTooLarge:
		return http.StatusRequestEntityTooLarge
	case CodeUnsupportedType:
		return http.StatusUnsupportedMediaType
	case CodeAtCapacity, CodeTooManyConns:
		return http.StatusTooManyRequests
	case CodeNoSelfTest, CodeNoPreview:
		return http.StatusNotImplemented
	case CodeLimits, CodeHostUnsupported, CodeImagesUnavailable:
		return http.StatusServiceUnavailable
	case CodeWorkspaceFull, CodeImageCacheFull:
		return http.StatusInsufficientStorage
	case CodePortClosed, CodePortFailed, CodeRegistryUnavailable:
		return http.StatusBadGateway
	case CodePortTimeout:
		return http.StatusGatewayTimeout
	}
	return http.StatusInternalServerError
}

// newError is the Error of code with a message saying what to fix.
func newError(code, format string, args ...any) *Error {
	return &Error{Status: statusOf(code), Code: code, Message: fmt.Sprintf(format, args...)}
}

// Error is an error that crosses HTTP: a status (from its code, see
// statusOf), a stable code and a message for a person saying what to fix.
// Its wire form is workerapi.Error (see wire).
type Error struct {
	Status  int
	Code    string
	Message string
	// Leftovers lists what a wipe could not remove (code wipe_unverified).
	Leftovers []string
	// RetryAfter, in seconds, is sent as the Retry-After header when set.
	RetryAfter int
}

// wire is e as the answer's or the event's error object.
func (e *Error) wire() *workerapi.Error {
	return &workerapi.Error{Code: e.Code, Message: e.Message, Leftovers: e.Leftovers}
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
	if e := imageError(err); e != nil && !errors.As(err, &apiErr) {
		return e
	}
	switch {
	case errors.As(err, &apiErr):
		return apiErr
	case errors.As(err, &tooBig):
		return &Error{Status: statusOf(CodeBodyTooLarge), Code: CodeBodyTooLarge,
			Message: fmt.Sprintf("the request body is larger than this worker's limit of %d bytes", tooBig.Limit)}
	case errors.Is(err, sandbox.ErrCapacity):
		return &Error{Status: statusOf(CodeAtCapacity), Code: CodeAtCapacity, RetryAfter: 5,
			Message: "every sandbox slot of this worker is in use; delete a sandbox or retry later"}
	case errors.Is(err, sandbox.ErrHost):
		return newError(CodeHostUnsupported, "this host cannot run sandboxes, so the worker starts none: %s", after(err, sandbox.ErrHost))
	case errors.Is(err, sandbox.ErrLimits):
		return newError(CodeLimits, "this worker cannot enforce sandbox limits, so it starts no sandbox: %s", after(err, sandbox.ErrLimits))
	case errors.Is(err, sandbox.ErrBroken):
		return newError(CodeSandboxBroken, "the sandbox's init stopped answering (a command in it may have stalled it), so it takes no more calls; delete it (DELETE /v1/sandboxes/{id}: the wipe does not need the init) and create another")
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
	writeJSON(w, e.Status, workerapi.ErrorBody{Error: *e.wire()})
}

// writeJSON sends v with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
