package server

import (
	"context"
	"errors"
	"log/slog"

	"connectrpc.com/connect"

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

// toConnect turns a domain error into a Connect error with the right code.
// Internal errors are logged with their detail and returned with it too:
// kioku is self-hosted, and the operator reading the client's error is the
// one who can act on it.
func toConnect(ctx context.Context, log *slog.Logger, err error) error {
	if err == nil {
		return nil
	}
	var ce *connect.Error
	if errors.As(err, &ce) {
		return ce
	}
	code := CodeOf(err)
	if code == connect.CodeInternal {
		log.ErrorContext(ctx, "internal error", "error", err)
	}
	return connect.NewError(code, err)
}
