package transport

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"

	"github.com/kioku-ai/kioku/fault"
)

func TestErrorInterceptorMapsKindsAndFields(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	e := &errorInterceptor{log: newSampledLog(log, slog.LevelError)}
	call := func(err error) error {
		_, got := e.WrapUnary(func(context.Context, connect.AnyRequest) (connect.AnyResponse, error) {
			return nil, err
		})(t.Context(), connect.NewRequest(&struct{}{}))
		return got
	}
	for _, c := range []struct {
		err  error
		code connect.Code
	}{
		{fault.NotFoundf("session x not found"), connect.CodeNotFound},
		{fault.New(fault.ResourceExhausted, "too big"), connect.CodeResourceExhausted},
		{errors.New("disk on fire"), connect.CodeInternal},
		{context.DeadlineExceeded, connect.CodeDeadlineExceeded},
		{connect.NewError(connect.CodeUnauthenticated, errors.New("no key")), connect.CodeUnauthenticated},
	} {
		if got := connect.CodeOf(call(c.err)); got != c.code {
			t.Errorf("%v mapped to %v, want %v", c.err, got, c.code)
		}
	}

	got := call(fault.InvalidField("event.author", "Required field is not set."))
	var ce *connect.Error
	if !errors.As(got, &ce) || ce.Code() != connect.CodeInvalidArgument {
		t.Fatalf("a field error mapped to %v", got)
	}
	if len(ce.Details()) != 1 {
		t.Fatalf("details = %v, want one BadRequest", ce.Details())
	}
	v, err := ce.Details()[0].Value()
	if err != nil {
		t.Fatal(err)
	}
	br, ok := v.(*errdetails.BadRequest)
	if !ok || len(br.GetFieldViolations()) != 1 || br.GetFieldViolations()[0].GetField() != "event.author" ||
		br.GetFieldViolations()[0].GetDescription() != "Required field is not set." {
		t.Fatalf("detail = %v, want the field violation of event.author", v)
	}

	// A spent quota says when to retry.
	got = call(fault.WithRetryDelay(fault.New(fault.ResourceExhausted, "quota spent"), 3*time.Hour))
	if !errors.As(got, &ce) || ce.Code() != connect.CodeResourceExhausted || len(ce.Details()) != 1 {
		t.Fatalf("a spent quota mapped to %v", got)
	}
	if v, err := ce.Details()[0].Value(); err != nil || v.(*errdetails.RetryInfo).GetRetryDelay().AsDuration() != 3*time.Hour {
		t.Fatalf("detail = %v (%v), want a RetryInfo of 3h", v, err)
	}
}
