package transport

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/otelconnect"
	"go.opentelemetry.io/otel/trace"

	"github.com/kioku-ai/kioku/internal/transport/httperr"
)

// newTracingInterceptor traces each call of the kioku services with
// OpenTelemetry (connectrpc.com/otelconnect, through the global tracer
// provider that internal/telemetry installs when export is configured; a
// no-op otherwise): a server span per call. The caller's trace context is
// trusted, so a backend's trace continues into kioku's spans. It records
// no metrics: the calls are counted once, by the observing interceptor on
// /metrics (see rpcMetrics).
func newTracingInterceptor() *otelconnect.Interceptor {
	i, err := otelconnect.NewInterceptor(otelconnect.WithTrustRemote(), otelconnect.WithoutMetrics())
	if err != nil {
		panic("server: otelconnect: " + err.Error())
	}
	return i
}

// observingInterceptor writes one structured log line per call (the
// procedure, the protocol, the outcome code and the duration) and counts
// the call in the server's metrics; it marks the request's Progress
// reached (a REST request's errors before then are counted apart). Successful and cancelled calls log at
// debug level, failed calls at info (a caller's bad request or missing
// resource is not the server's fault), and internal, unknown and data-loss
// errors at error level, at most about ten such lines a second.
type observingInterceptor struct {
	log     *slog.Logger
	metrics *rpcMetrics
	errs    *sampledLog // the error-level lines, sampled
}

func newObservingInterceptor(log *slog.Logger, metrics *rpcMetrics, errs *sampledLog) *observingInterceptor {
	return &observingInterceptor{log: log, metrics: metrics, errs: errs}
}

func (l *observingInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		httperr.ProgressOf(ctx).Reached()
		start := time.Now()
		resp, err := next(ctx, req)
		l.record(ctx, req.Spec().Procedure, req.Peer().Protocol, start, err, true)
		return resp, err
	}
}

func (l *observingInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (l *observingInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		httperr.ProgressOf(ctx).Reached()
		start := time.Now()
		err := next(ctx, conn)
		l.record(ctx, conn.Spec().Procedure, conn.Peer().Protocol, start, err, false)
		return err
	}
}

func (l *observingInterceptor) record(ctx context.Context, procedure, protocol string, start time.Time, err error, unary bool) {
	l.metrics.record(procedure, err, time.Since(start), unary)
	level := slog.LevelDebug
	code := "ok"
	if err != nil {
		c := wireCode(err)
		code = c.String()
		switch c {
		case connect.CodeInternal, connect.CodeUnknown, connect.CodeDataLoss:
			level = slog.LevelError
		case connect.CodeCanceled:
			level = slog.LevelDebug
		default:
			level = slog.LevelInfo
		}
	}
	if !l.log.Enabled(ctx, level) {
		return
	}
	attrs := []slog.Attr{
		slog.String("procedure", procedure),
		slog.String("protocol", protocol),
		slog.String("code", code),
		slog.Duration("duration", time.Since(start)),
	}
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		attrs = append(attrs, slog.String("trace_id", sc.TraceID().String()))
	}
	if err != nil {
		var ce *connect.Error
		if errors.As(err, &ce) {
			attrs = append(attrs, slog.String("error", ce.Message()))
		} else {
			attrs = append(attrs, slog.String("error", err.Error()))
		}
	}
	if level == slog.LevelError {
		args := make([]any, len(attrs))
		for i, a := range attrs {
			args[i] = a
		}
		l.errs.writeContext(ctx, "rpc", args...)
		return
	}
	l.log.LogAttrs(ctx, level, "rpc", attrs...)
}

// deadlineInterceptor gives unary calls without a deadline a default one
// and caps the deadline a client may ask for, so no unary call holds
// resources forever; a stream ends DEADLINE_EXCEEDED after its maximum
// lifetime (the client opens a new one).
type deadlineInterceptor struct {
	def, max, maxStream time.Duration
}

func newDeadlineInterceptor(def, max, maxStream time.Duration) *deadlineInterceptor {
	return &deadlineInterceptor{def: def, max: max, maxStream: maxStream}
}

func (d *deadlineInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		limit := d.def
		if deadline, ok := ctx.Deadline(); ok {
			limit = min(time.Until(deadline), d.max)
		}
		ctx, cancel := context.WithTimeout(ctx, limit)
		defer cancel()
		return next(ctx, req)
	}
}

func (d *deadlineInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (d *deadlineInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		ended := connect.NewError(connect.CodeDeadlineExceeded, fmt.Errorf("this stream reached the server's maximum stream lifetime of %v; open a new one (WatchSession: after_sequence = the last sequence received; WatchMemories: start_cursor = the last cursor received)", d.maxStream))
		ctx, cancel := context.WithTimeoutCause(ctx, d.maxStream, ended)
		defer cancel()
		err := next(ctx, conn)
		if context.Cause(ctx) == ended {
			return ended
		}
		return err
	}
}
