package transport

import (
	"compress/gzip"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"golang.org/x/time/rate"

	"github.com/kioku-ai/kioku/internal/aip"
	"github.com/kioku-ai/kioku/internal/transport/httperr"
)

// Request bounds. Every request body is read within Config.BodyTimeout of
// its headers, is at most a message (Config.MaxRequestBytes) plus its
// framing, and inflates to at most a message: the gzip decompressor stops
// as soon as it passes the limit (connect-go's and vanguard's own would
// inflate the whole body first, to report its size). Every write of a
// response must make progress within Config.WriteTimeout, so a client that
// does not read cannot hold a response (and the memory behind it) for
// longer; between writes a stream may idle as long as it lives.
//
// Reflection's bidirectional stream is exempt from the body timeout (its
// requests arrive as the client asks), not from the size bounds.

// bodySlack is the room for framing beyond one message: gRPC's and
// Connect's envelope prefixes and end-of-stream messages.
const bodySlack = 64 << 10

// bounds applies the request bounds to every request of next.
type bounds struct {
	next                      http.Handler
	maxBody                   int64
	bodyTimeout, writeTimeout time.Duration
	metrics                   *rpcMetrics
	logs                      *sampledLog     // refusals, at info level
	panics                    *sampledLog     // at error level
	procedures                map[string]bool // served, for metrics labels
}

func (b *bounds) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	defer b.recoverPanic(w, r)
	requestBegan(r.Context())
	if !strings.HasPrefix(r.URL.Path, "/grpc.") { // health and reflection are shallow
		growStack()
	}
	rc := http.NewResponseController(w)
	// A connection's previous request may have left a deadline (HTTP/1.1).
	rc.SetWriteDeadline(time.Time{})
	dw := &deadlineWriter{ResponseWriter: w, rc: rc, timeout: b.writeTimeout}
	// A copy of the request carries the bounded body: net/http looks at
	// the original's to tell a body cut off (the connection must then
	// close, or the rest would be read as the next request).
	ctx, progress := httperr.Track(r.Context())
	r = r.WithContext(ctx)
	if r.Body != nil && r.Body != http.NoBody {
		body := &boundedBody{b: b, r: r, rc: rc, body: http.MaxBytesReader(w, r.Body, b.maxBody), frames: framesOf(r), progress: progress}
		if !strings.HasPrefix(r.URL.Path, "/grpc.reflection.") {
			rc.SetReadDeadline(time.Now().Add(b.bodyTimeout))
			body.deadline = true
		}
		r.Body = body
	}
	b.next.ServeHTTP(dw, r)
	// What the server still writes after the handler (the end of a
	// buffered response) is bounded too.
	rc.SetWriteDeadline(time.Now().Add(b.writeTimeout))
}

// recoverPanic turns a panic outside the Connect handlers (which recover
// their own: WithRecover in New) into INTERNAL, logged with its stack at
// most about ten times a second, instead of net/http's dropped
// connection. A handler's deliberate abort (http.ErrAbortHandler) goes on.
func (b *bounds) recoverPanic(w http.ResponseWriter, r *http.Request) {
	p := recover()
	if p == nil {
		return
	}
	if p == http.ErrAbortHandler {
		panic(p)
	}
	b.panics.writeContext(r.Context(), "panic serving a request", "path", aip.Truncate(r.URL.Path, 200), "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
	b.metrics.refused(b.procedureLabel(r.URL.Path), "panic", connect.CodeInternal)
	// Headers already sent cannot be taken back; net/http then ends the
	// response as it is.
	httperr.WriteStatus(w, connect.NewError(connect.CodeInternal, errors.New("internal error (the server's log has the details)")))
}

// boundedBody is a request body read under the bounds: it turns a timeout
// or an oversized body into a Connect error naming the limit, counted and
// logged, and lifts the read deadline once the body has been read.
type boundedBody struct {
	b        *bounds
	r        *http.Request
	rc       *http.ResponseController
	body     io.ReadCloser
	deadline bool
	frames   *frames // nil for an unframed body (Connect unary, REST)
	failed   error   // a framing error, returned by every later Read
	progress *httperr.Progress
}

func (bb *boundedBody) Read(p []byte) (int, error) {
	if bb.failed != nil {
		return 0, bb.failed
	}
	n, err := bb.body.Read(p)
	if bb.frames != nil {
		ferr := bb.frames.scan(p[:n])
		if ferr == nil && err == io.EOF {
			ferr = bb.frames.end()
		}
		if ferr != nil {
			bb.failed = bb.refuse("malformed_frame", connect.NewError(connect.CodeInvalidArgument, ferr))
			return 0, bb.failed
		}
	}
	var tooLarge *http.MaxBytesError
	switch {
	case err == io.EOF && bb.deadline:
		bb.rc.SetReadDeadline(time.Time{})
		bb.deadline = false
	case errors.Is(err, os.ErrDeadlineExceeded):
		err = bb.refuse("body_timeout", connect.NewError(connect.CodeDeadlineExceeded,
			fmt.Errorf("the request body did not arrive within %v of its headers (the server's body timeout)", bb.b.bodyTimeout)))
	case errors.As(err, &tooLarge):
		err = bb.refuse("body_too_large", connect.NewError(connect.CodeResourceExhausted,
			fmt.Errorf("the request body is over %d bytes; a request message may have at most %d", tooLarge.Limit, tooLarge.Limit-bodySlack)))
	}
	return n, err
}

func (bb *boundedBody) Close() error { return bb.body.Close() }

func (bb *boundedBody) refuse(reason string, err *connect.Error) error {
	proc := bb.b.procedureLabel(bb.r.URL.Path)
	bb.progress.Counted()
	bb.b.metrics.refused(proc, reason, err.Code())
	bb.b.logs.write("request refused", "procedure", proc, "path", aip.Truncate(bb.r.URL.Path, 200), "reason", reason, "remote", bb.r.RemoteAddr, "error", err.Message())
	return err
}

// openProcedures are the procedures served without a key.
var openProcedures = []string{
	"/grpc.health.v1.Health/Check",
	"/grpc.health.v1.Health/Watch",
	"/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
	"/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
}

// procedureLabel is the metrics label of a request path: the procedure
// when the server serves it, "REST" for a REST path (/v1/..., /v1beta1/...),
// "MCP" for the MCP endpoint (/mcp...), "other" otherwise, so that callers
// cannot make up series.
func (b *bounds) procedureLabel(path string) string {
	switch {
	case b.procedures[path]:
		return path
	case strings.HasPrefix(path, "/v1"):
		return "REST"
	case path == "/mcp" || strings.HasPrefix(path, "/mcp/"):
		return "MCP"
	}
	return "other"
}

// frames checks, as it is read, the framing of an enveloped request body
// (gRPC, gRPC-Web, Connect streaming: each message a flags byte and a
// 4-byte length), so that a malformed one is INVALID_ARGUMENT; connect-go
// reports it INTERNAL, its word for a server's malformed response.
type frames struct {
	compressed bool // the request names a compression
	prefix     [5]byte
	n          int   // bytes of the current prefix seen
	rest       int64 // bytes of the current message still to come
}

// framesOf returns the framing check of a request, nil when its body is
// not enveloped.
func framesOf(r *http.Request) *frames {
	ctype := r.Header.Get("Content-Type")
	encoding := r.Header.Get("Grpc-Encoding")
	switch {
	case strings.HasPrefix(ctype, "application/grpc"):
	case strings.HasPrefix(ctype, "application/connect+"):
		encoding = r.Header.Get("Connect-Content-Encoding")
	default:
		return nil
	}
	return &frames{compressed: encoding != "" && encoding != "identity"}
}

func (f *frames) scan(p []byte) error {
	for len(p) > 0 {
		if f.rest > 0 {
			k := min(int64(len(p)), f.rest)
			f.rest -= k
			p = p[k:]
			continue
		}
		k := copy(f.prefix[f.n:], p)
		f.n += k
		p = p[k:]
		if f.n < len(f.prefix) {
			return nil
		}
		switch flags := f.prefix[0]; {
		case flags&^1 != 0:
			return fmt.Errorf("malformed request: a message frame has the flags %#x; a request's may only mark compression (1)", flags)
		case flags == 1 && !f.compressed:
			return fmt.Errorf("malformed request: a message frame is marked compressed, but the request names no compression (grpc-encoding or connect-content-encoding)")
		}
		f.n, f.rest = 0, int64(binary.BigEndian.Uint32(f.prefix[1:]))
	}
	return nil
}

// end checks that the body did not end inside a frame.
func (f *frames) end() error {
	switch {
	case f.n > 0:
		return fmt.Errorf("malformed request: the body ends inside a message frame's 5-byte prefix (%d bytes of it)", f.n)
	case f.rest > 0:
		return fmt.Errorf("malformed request: the body ends %d bytes short of the message its last frame announced", f.rest)
	}
	return nil
}

// deadlineWriter gives every write of a response (and every flush)
// Config.WriteTimeout to complete, and lifts the deadline once it has, so
// that a stream may idle between messages.
type deadlineWriter struct {
	http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
}

func (w *deadlineWriter) Write(p []byte) (int, error) {
	w.rc.SetWriteDeadline(time.Now().Add(w.timeout))
	defer w.rc.SetWriteDeadline(time.Time{})
	return w.ResponseWriter.Write(p)
}

func (w *deadlineWriter) Flush() {
	w.rc.SetWriteDeadline(time.Now().Add(w.timeout))
	defer w.rc.SetWriteDeadline(time.Time{})
	w.rc.Flush()
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *deadlineWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// boundedGzip is a gzip decompressor that fails with RESOURCE_EXHAUSTED as
// soon as its output passes max bytes, instead of inflating the rest.
type boundedGzip struct {
	r        gzip.Reader
	max, n   int64
	exceeded func()
}

// newBoundedGzip returns the decompressor factory for connect and vanguard.
func newBoundedGzip(max int64, exceeded func()) func() connect.Decompressor {
	return func() connect.Decompressor { return &boundedGzip{max: max, exceeded: exceeded} }
}

func (g *boundedGzip) Read(p []byte) (int, error) {
	if g.n >= g.max {
		// At the limit: any more output is too much.
		var one [1]byte
		if n, err := g.r.Read(one[:]); n == 0 {
			return 0, err
		}
		g.exceeded()
		return 0, connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("the request inflates to more than %d bytes, the limit of a request message", g.max))
	}
	if rest := g.max - g.n; int64(len(p)) > rest {
		p = p[:rest]
	}
	n, err := g.r.Read(p)
	g.n += int64(n)
	return n, err
}

func (g *boundedGzip) Reset(r io.Reader) error {
	g.n = 0
	return g.r.Reset(r)
}

func (g *boundedGzip) Close() error { return g.r.Close() }

func newGzipCompressor() connect.Compressor { return gzip.NewWriter(io.Discard) }

// sampledLog writes at most about ten lines a second at its level; the
// next line says how many were left out. The metrics count every event.
// A server has one at info level for refused requests, and one at error
// level for internal errors and panics, so that a caller repeating a
// request that fails cannot flood the log.
type sampledLog struct {
	log     *slog.Logger
	level   slog.Level
	lim     *rate.Limiter
	skipped atomic.Int64
}

func newSampledLog(log *slog.Logger, level slog.Level) *sampledLog {
	return &sampledLog{log: log, level: level, lim: rate.NewLimiter(10, 20)}
}

func (l *sampledLog) write(msg string, args ...any) {
	l.writeContext(context.Background(), msg, args...)
}

func (l *sampledLog) writeContext(ctx context.Context, msg string, args ...any) {
	if !l.lim.Allow() {
		l.skipped.Add(1)
		return
	}
	if n := l.skipped.Swap(0); n > 0 {
		args = append(args, "not_logged_before", n)
	}
	l.log.Log(ctx, l.level, msg, args...)
}
