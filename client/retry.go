package client

import (
	"cmp"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"syscall"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"

	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/gen/kioku/v1/kiokuv1connect"
)

// RetryPolicy says how the client retries a call that failed for a
// transient reason: the server was unavailable (UNAVAILABLE, as while it
// restarts or sheds load, or its store cannot be reached or did not
// confirm a write), a concurrent change or a store transaction closed
// under it won (ABORTED), or the connection broke (reset, or closed before
// the whole response came). Only calls that are safe to repeat are retried:
// those the API marks as having no side effects (every Get, List, Search,
// Retrieve and Wait method) or as idempotent (DeleteUser), and AppendEvent, which is idempotent by event id (the
// client gives every event without an id a fresh one before sending, so a
// retry that reaches a server which already stored the event gets the
// stored event back, and nothing is appended twice). Other calls, whose
// repetition could create or change something twice (CreateSession without
// an id, GenerateMemories, DeleteMemory, ...), fail with the first error.
// Streams (WatchSession) are not retried.
type RetryPolicy struct {
	// MaxAttempts is how many times a call is made in all; 1 turns retries
	// off. Zero means the default, 5.
	MaxAttempts int
	// InitialBackoff is the wait before the first retry (zero: 100ms); each
	// further wait doubles, up to MaxBackoff (zero: 2s). Each wait is
	// jittered to between half and all of its length. A call never waits
	// past its context's deadline.
	InitialBackoff, MaxBackoff time.Duration
}

// DefaultRetryPolicy is the policy of a client without WithRetry: up to 5
// attempts over about 1.5 seconds at most.
var DefaultRetryPolicy = RetryPolicy{MaxAttempts: 5, InitialBackoff: 100 * time.Millisecond, MaxBackoff: 2 * time.Second}

// WithRetry sets how transient failures are retried (see RetryPolicy);
// WithRetry(RetryPolicy{MaxAttempts: 1}) turns retries off.
func WithRetry(p RetryPolicy) Option {
	return optionFunc(func(o *options) { o.retry = p })
}

func (p RetryPolicy) withDefaults() RetryPolicy {
	// max(v, 0) turns a negative setting into zero, which cmp.Or passes over.
	p.MaxAttempts = cmp.Or(max(p.MaxAttempts, 0), DefaultRetryPolicy.MaxAttempts)
	p.InitialBackoff = cmp.Or(max(p.InitialBackoff, 0), DefaultRetryPolicy.InitialBackoff)
	p.MaxBackoff = cmp.Or(max(p.MaxBackoff, 0), DefaultRetryPolicy.MaxBackoff)
	return p
}

// retryInterceptor gives events fresh ids and retries safe unary calls.
type retryInterceptor struct{ policy RetryPolicy }

func (r retryInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		safe := req.Spec().IdempotencyLevel != connect.IdempotencyUnknown
		if a, ok := req.Any().(*kiokuv1.AppendEventRequest); ok && req.Spec().Procedure == kiokuv1connect.SessionServiceAppendEventProcedure {
			if ev := a.GetEvent(); ev != nil && ev.GetId() == "" {
				ev.Id = NewEventID()
			}
			safe = a.GetEvent().GetId() != ""
		}
		backoff := r.policy.InitialBackoff
		for attempt := 1; ; attempt++ {
			res, err := next(ctx, req)
			// A refused connection never reached the server: any call may be
			// made again.
			retry := (safe && transient(err)) || errors.Is(err, syscall.ECONNREFUSED)
			if err == nil || !retry || attempt >= r.policy.MaxAttempts || ctx.Err() != nil {
				return res, err
			}
			wait := backoff/2 + rand.N(backoff/2+1)
			if d, ok := ctx.Deadline(); ok && time.Until(d) < wait {
				return res, err
			}
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return res, err
			case <-t.C:
			}
			backoff = min(2*backoff, r.policy.MaxBackoff)
		}
	}
}

func (retryInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (retryInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}

// transient reports whether a failed call may succeed when made again: the
// server said it is unavailable or the call aborted, or the connection
// broke.
func transient(err error) bool {
	return connect.CodeOf(err) == connect.CodeUnavailable || connect.CodeOf(err) == connect.CodeAborted ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || errors.Is(err, io.ErrUnexpectedEOF)
}

// NewEventID returns a fresh event id (a random UUID), as the client gives
// to every appended event that has none.
func NewEventID() string { return uuid.NewString() }
