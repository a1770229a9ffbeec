// Package fault defines kioku's typed errors.
//
// Domain packages (sessions, memorybank, model) return errors made here, each
// with a Kind that says what went wrong in terms a caller can act on: the
// input was invalid, a resource was not found, a precondition failed. Only
// package transport turns a Kind into a wire status code, so the domain never
// depends on a transport.
package fault

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Kind classifies an error.
type Kind int

// The kinds of error. Internal is the zero value: an error of unknown kind is
// a bug or an infrastructure failure, never the caller's fault.
const (
	Internal           Kind = iota // an unexpected failure inside kioku
	Invalid                        // the request is malformed; retrying it unchanged fails again
	NotFound                       // the named resource does not exist (or is not the caller's)
	AlreadyExists                  // the resource to create exists already
	FailedPrecondition             // the system is not in the state the request needs
	ResourceExhausted              // a size or count limit was exceeded
	PermissionDenied               // the caller may not do this
	Unavailable                    // a dependency is down; retrying later may succeed
	Canceled                       // the caller gave up
	DeadlineExceeded               // the deadline passed before the work finished
	Aborted                        // a concurrent change won; retrying may succeed
	Unimplemented                  // the operation is not supported here
)

var kindNames = [...]string{
	Internal:           "internal",
	Invalid:            "invalid argument",
	NotFound:           "not found",
	AlreadyExists:      "already exists",
	FailedPrecondition: "failed precondition",
	ResourceExhausted:  "resource exhausted",
	PermissionDenied:   "permission denied",
	Unavailable:        "unavailable",
	Canceled:           "canceled",
	DeadlineExceeded:   "deadline exceeded",
	Aborted:            "aborted",
	Unimplemented:      "unimplemented",
}

// String returns the kind's name in words.
func (k Kind) String() string {
	if k >= 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

// Error is an error with a Kind. Its message is meant for the caller: it
// names the field or limit at fault and, where it helps, what to do instead.
type Error struct {
	Kind Kind
	Msg  string
	Err  error // the underlying cause, if any
	// Field, when set, is the request field at fault (a path such as
	// "event.author"); the wire reports it as a field violation.
	Field string
}

// Error returns the message, followed by the cause's message when there is one.
func (e *Error) Error() string {
	if e.Err != nil {
		if e.Msg == "" {
			return e.Err.Error()
		}
		return e.Msg + ": " + e.Err.Error()
	}
	return e.Msg
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// New returns an error of the given kind with a formatted message.
func New(kind Kind, format string, args ...any) error {
	return &Error{Kind: kind, Msg: fmt.Sprintf(format, args...)}
}

// Wrap returns an error of the given kind with a message and a cause. The
// cause's own kind, if it has one, is hidden by the new kind.
func Wrap(kind Kind, err error, format string, args ...any) error {
	return &Error{Kind: kind, Msg: fmt.Sprintf(format, args...), Err: err}
}

// Invalidf returns an Invalid error.
func Invalidf(format string, args ...any) error { return New(Invalid, format, args...) }

// InvalidField returns an Invalid error about one request field (a path
// such as "event.author"), reported on the wire as a field violation.
func InvalidField(field, format string, args ...any) error {
	return &Error{Kind: Invalid, Msg: fmt.Sprintf(format, args...), Field: field}
}

// FieldOf returns the request field an error is about, or "".
func FieldOf(err error) string {
	var fe *Error
	if errors.As(err, &fe) {
		return fe.Field
	}
	return ""
}

// NotFoundf returns a NotFound error.
func NotFoundf(format string, args ...any) error { return New(NotFound, format, args...) }

// KindOf returns the kind of err: the Kind of the first *Error in its chain,
// Canceled or DeadlineExceeded for the context errors, and Internal for any
// other non-nil error.
func KindOf(err error) Kind {
	if err == nil {
		return Internal
	}
	var fe *Error
	if errors.As(err, &fe) {
		return fe.Kind
	}
	switch {
	case errors.Is(err, context.Canceled):
		return Canceled
	case errors.Is(err, context.DeadlineExceeded):
		return DeadlineExceeded
	}
	return Internal
}

// Is reports whether err has the given kind.
func Is(err error, kind Kind) bool { return err != nil && KindOf(err) == kind }

// retryDelay is an error that says how long to wait before trying again.
type retryDelay struct {
	err error
	d   time.Duration
}

func (r *retryDelay) Error() string { return r.err.Error() }
func (r *retryDelay) Unwrap() error { return r.err }

// WithRetryDelay returns err (its message and kind unchanged) carrying the
// wait its source asked for before a retry (an HTTP Retry-After), for
// whoever retries the work (package jobs). A nil err or a wait of zero or
// less returns err.
func WithRetryDelay(err error, d time.Duration) error {
	if err == nil || d <= 0 {
		return err
	}
	return &retryDelay{err: err, d: d}
}

// RetryDelayOf returns the wait before a retry that err carries
// (WithRetryDelay), or 0.
func RetryDelayOf(err error) time.Duration {
	var r *retryDelay
	if errors.As(err, &r) {
		return r.d
	}
	return 0
}
