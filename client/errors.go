package client

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Sentinels matched by errors.Is on an *APIError, by the answer's error
// code (never its message; see APIError.Is).
var (
	// ErrCapacity: every sandbox slot of the worker is in use (at_capacity).
	ErrCapacity = errors.New("worker api: at capacity")
	// ErrNotFound: no such sandbox, process or file (any of the *not_found
	// codes).
	ErrNotFound = errors.New("worker api: not found")
	// ErrSandboxNotFound: no such sandbox (it was deleted or its time box
	// ended).
	ErrSandboxNotFound = errors.New("worker api: sandbox not found")
	// ErrProcessNotFound: no such process in the sandbox, or it has exited
	// (for signal and stdin).
	ErrProcessNotFound = errors.New("worker api: process not found")
	// ErrUnauthorized: the token was refused.
	ErrUnauthorized = errors.New("worker api: unauthorized")
	// ErrInvalidRequest: the worker refused the request as it was given;
	// the message says what to fix.
	ErrInvalidRequest = errors.New("worker api: invalid request")
)

// The worker's error codes the sentinels match (worker/httpapi's Code*
// constants).
const (
	codeAtCapacity      = "at_capacity"
	codeInvalidRequest  = "invalid_request"
	codeUnauthorized    = "unauthorized"
	codeNotFound        = "not_found"
	codeSandboxNotFound = "sandbox_not_found"
	codeFileNotFound    = "file_not_found"
	codeProcessNotFound = "process_not_found"
)

// sentinelCodes returns the codes target matches, and the status it
// matches in an answer that carries no code (one not from the worker, such
// as a proxy's); nil for an error that is no sentinel.
func sentinelCodes(target error) (codes []string, status int) {
	switch target {
	case ErrCapacity:
		return []string{codeAtCapacity}, http.StatusTooManyRequests
	case ErrNotFound:
		return []string{codeNotFound, codeSandboxNotFound, codeFileNotFound, codeProcessNotFound}, http.StatusNotFound
	case ErrSandboxNotFound:
		return []string{codeSandboxNotFound}, 0
	case ErrProcessNotFound:
		return []string{codeProcessNotFound}, 0
	case ErrUnauthorized:
		return []string{codeUnauthorized}, http.StatusUnauthorized
	case ErrInvalidRequest:
		return []string{codeInvalidRequest}, 0
	}
	return nil, 0
}

// APIError is an error answer of the worker: its HTTP status and the
// `{"error":{code,message}}` of its body (or of the last event of a stream).
type APIError struct {
	StatusCode int
	Code       string
	Message    string
	// Leftovers lists what an unverified wipe left (code wipe_unverified).
	Leftovers []string
	// RetryAfter is the worker's Retry-After (on 429), zero when absent.
	RetryAfter time.Duration
}

// Error implements error.
func (e *APIError) Error() string {
	return fmt.Sprintf("worker api: %d %s: %s", e.StatusCode, e.Code, e.Message)
}

// Is matches the sentinels by the error's code; an answer without one (not
// the worker's) matches ErrCapacity, ErrNotFound and ErrUnauthorized by
// its status.
func (e *APIError) Is(target error) bool {
	codes, status := sentinelCodes(target)
	if e.Code == "" {
		return status != 0 && e.StatusCode == status
	}
	return slices.Contains(codes, e.Code) || (target != nil && codeSentinel(e.Code) == target)
}

// apiErrorBody is the JSON of an error answer.
type apiErrorBody struct {
	Error wireError `json:"error"`
}

// wireError is the error object of an answer or of a stream's last event.
type wireError struct {
	Code      string   `json:"code"`
	Message   string   `json:"message"`
	Leftovers []string `json:"leftovers"`
}

// readAPIError makes the *APIError of a non-2xx answer.
func readAPIError(resp *http.Response) error {
	e := &APIError{StatusCode: resp.StatusCode}
	var body apiErrorBody
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes))
	if err := json.Unmarshal(raw, &body); err == nil && body.Error.Code != "" {
		e.Code, e.Message, e.Leftovers = body.Error.Code, body.Error.Message, body.Error.Leftovers
	} else {
		e.Message = strings.TrimSpace(http.StatusText(resp.StatusCode) + " " + string(bytes.TrimSpace(raw)))
	}
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
		e.RetryAfter = time.Duration(s) * time.Second
	}
	return e
}
