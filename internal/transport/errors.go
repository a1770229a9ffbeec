package transport

import (
	"context"
	"errors"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/kioku-ai/kioku/fault"
)

// codes maps the domain's error kinds to Connect codes. This table is the
// only place where a domain error becomes a wire status.
var codes = map[fault.Kind]connect.Code{
	fault.Internal:           connect.CodeInternal,
	fault.Invalid:            connect.CodeInvalidArgument,
	fault.NotFound:           connect.CodeNotFound,
	fault.AlreadyExists:      connect.CodeAlreadyExists,
	fault.FailedPrecondition: connect.CodeFailedPrecondition,
	fault.ResourceExhausted:  connect.CodeResourceExhausted,
	fault.PermissionDenied:   connect.CodePermissionDenied,
	fault.Unavailable:        connect.CodeUnavailable,
	fault.Canceled:           connect.CodeCanceled,
	fault.DeadlineExceeded:   connect.CodeDeadlineExceeded,
	fault.Aborted:            connect.CodeAborted,
	fault.Unimplemented:      connect.CodeUnimplemented,
}

// CodeOf returns the Connect code for a domain error.
func CodeOf(err error) connect.Code {
	if c, ok := codes[fault.KindOf(err)]; ok {
		return c
	}
	return connect.CodeInternal
}

// wireCode is the code a call's error goes out with, for logs and
// metrics: a Connect error's own, and for the context's errors the code
// connect-go sends them with (a plain context error is not "unknown").
func wireCode(err error) connect.Code {
	var ce *connect.Error
	switch {
	case errors.As(err, &ce):
		return ce.Code()
	case errors.Is(err, context.DeadlineExceeded):
		return connect.CodeDeadlineExceeded
	case errors.Is(err, context.Canceled):
		return connect.CodeCanceled
	}
	return connect.CodeUnknown
}

// toConnect turns a domain error into a Connect error with the right code;
// a Connect error is returned as it is. An error about one request field
// (fault.InvalidField) carries a google.rpc.BadRequest detail naming it,
// and one that says when to retry (fault.WithRetryDelay: a spent daily
// quota, say) a google.rpc.RetryInfo.
// Internal errors are logged with their detail (sampled: at most about ten
// lines a second) and returned with it too:
// kioku is self-hosted, and the operator reading the client's error is the
// one who can act on it.
//
// Handlers need not call it: every service a Server serves returns its
// errors through the error interceptor, which calls it.
func toConnect(ctx context.Context, log *sampledLog, err error) error {
	if err == nil {
		return nil
	}
	var ce *connect.Error
	if errors.As(err, &ce) {
		return ce
	}
	code := CodeOf(err)
	if code == connect.CodeInternal {
		log.writeContext(ctx, "internal error", "error", err)
	}
	out := connect.NewError(code, err)
	if field := fault.FieldOf(err); field != "" {
		var msg string
		var fe *fault.Error
		if errors.As(err, &fe) {
			msg = fe.Msg
		}
		if d, derr := connect.NewErrorDetail(&errdetails.BadRequest{
			FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: field, Description: msg}},
		}); derr == nil {
			out.AddDetail(d)
		}
	}
	if wait := fault.RetryDelayOf(err); wait > 0 {
		if d, derr := connect.NewErrorDetail(&errdetails.RetryInfo{RetryDelay: durationpb.New(wait)}); derr == nil {
			out.AddDetail(d)
		}
	}
	return out
}

// errorInterceptor maps the errors handlers return to Connect errors
// (toConnect), so that a handler returns the domain's errors as they are.
// It runs innermost, so that logging, metrics and clients all see the
// mapped code.
type errorInterceptor struct {
	log *sampledLog // internal errors, at error level
}

func (e *errorInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		resp, err := next(ctx, req)
		if err != nil {
			return nil, toConnect(ctx, e.log, err)
		}
		return resp, nil
	}
}

func (e *errorInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (e *errorInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		return toConnect(ctx, e.log, next(ctx, conn))
	}
}
