package client

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"openvibe.network/agentsandbox/workerapi"
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
	// ErrProcessNotFound: no such process in the sandbox.
	ErrProcessNotFound = errors.New("worker api: process not found")
	// ErrProcessExited: the process has exited, so it takes no more signals
	// or stdin (process_exited, 409); its record stays.
	ErrProcessExited = errors.New("worker api: process exited")
	// ErrSandboxBroken: the sandbox's init stopped answering, so it takes
	// no more calls (sandbox_broken, 409); delete it.
	ErrSandboxBroken = errors.New("worker api: sandbox broken")
	// ErrUnauthorized: the token was refused.
	ErrUnauthorized = errors.New("worker api: unauthorized")
	// ErrInvalidRequest: the worker refused the request as it was given;
	// the message says what to fix.
	ErrInvalidRequest = errors.New("worker api: invalid request")

	// ErrImageNotAllowed: the image is not from a registry the worker
	// allows, or images are off on the worker (image_not_allowed).
	ErrImageNotAllowed = errors.New("worker api: image not allowed")
	// ErrImageNotFound: the registry has no such image (image_not_found).
	ErrImageNotFound = errors.New("worker api: image not found")
	// ErrImageUnavailable: the image could not be pulled now: the registry
	// refused the worker's credentials, did not answer, or the worker's
	// image cache is full (image_unauthorized, registry_unavailable,
	// image_cache_full, images_unavailable); the message says which.
	ErrImageUnavailable = errors.New("worker api: image unavailable")
)

// sentinelCodes returns the codes target matches, and the status it
// matches in an answer that carries no code (one not from the worker, such
// as a proxy's); nil for an error that is no sentinel.
func sentinelCodes(target error) (codes []string, status int) {
	switch target {
	case ErrCapacity:
		return []string{workerapi.CodeAtCapacity}, http.StatusTooManyRequests
	case ErrNotFound:
		return []string{workerapi.CodeNotFound, workerapi.CodeSandboxNotFound, workerapi.CodeFileNotFound, workerapi.CodeProcessNotFound}, http.StatusNotFound
	case ErrSandboxNotFound:
		return []string{workerapi.CodeSandboxNotFound}, 0
	case ErrProcessNotFound:
		return []string{workerapi.CodeProcessNotFound}, 0
	case ErrProcessExited:
		return []string{workerapi.CodeProcessExited}, 0
	case ErrSandboxBroken:
		return []string{workerapi.CodeSandboxBroken}, 0
	case ErrUnauthorized:
		return []string{workerapi.CodeUnauthorized}, http.StatusUnauthorized
	case ErrInvalidRequest:
		return []string{workerapi.CodeInvalidRequest, workerapi.CodeInvalidImage}, 0
	case ErrImageNotAllowed:
		return []string{workerapi.CodeImageNotAllowed}, 0
	case ErrImageNotFound:
		return []string{workerapi.CodeImageNotFound}, 0
	case ErrImageUnavailable:
		return []string{workerapi.CodeImageUnauthorized, workerapi.CodeRegistryUnavailable, workerapi.CodeImageCacheFull, workerapi.CodeImagesUnavailable}, 0
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

// readAPIError makes the *APIError of a non-2xx answer.
func readAPIError(resp *http.Response) error {
	e := &APIError{StatusCode: resp.StatusCode}
	var body workerapi.ErrorBody
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
