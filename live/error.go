package live

import (
	"errors"
	"fmt"
)

// Error codes. live/httpapi maps each to one HTTP status in a single table.
const (
	ECONFLICT     = "conflict"
	EINTERNAL     = "internal"
	EINVALID      = "invalid"
	ENOTFOUND     = "not_found"
	EUNAUTHORIZED = "unauthorized"
	EFORBIDDEN    = "forbidden"
	EUNAVAILABLE  = "unavailable" // the store cannot do it now (read-only, not writable)
)

// Error is an error meant for a person: Code selects the HTTP status, Message
// says what to fix. It never carries a secret.
type Error struct {
	Code    string
	Message string
}

// Error implements error.
func (e *Error) Error() string { return fmt.Sprintf("%s: %s", e.Code, e.Message) }

// Errorf returns an *Error with code and a formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the code of the first *Error in err's chain, EINTERNAL for
// any other error, and "" for nil.
func ErrorCode(err error) string {
	var e *Error
	switch {
	case err == nil:
		return ""
	case errors.As(err, &e):
		return e.Code
	default:
		return EINTERNAL
	}
}

// ErrorMessage returns the message of the first *Error in err's chain, or a
// generic message for any other error (internal details are logged, never
// returned).
func ErrorMessage(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Message
	}
	return "internal error"
}

// StorageUnavailable is the error of a store whose storage cannot serve a
// request now (its disk full, its database server out of reach…):
// EUNAVAILABLE, so that a client is answered 503 and a worker checks in
// again, with why (what the operator must fix) in its message, and cause
// kept in its chain for the log.
func StorageUnavailable(why string, cause error) error {
	return fmt.Errorf("%w (%w)", Errorf(EUNAVAILABLE,
		"Live's database cannot be used now: %s. This request changed nothing; try again later", why), cause)
}
