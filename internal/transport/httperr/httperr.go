// Package httperr writes the error bodies of kioku's REST APIs, one writer
// per shape, so that every error of one API has the same shape whoever
// answers it (the transcoder, the key check, a path no method binds):
//
//   - Status: a google.rpc.Status in JSON, {"code": 5, "message",
//     "details"}, with the HTTP status of its code; the shape of kioku.v1's
//     REST errors, which vanguard writes the same way;
//   - Google: Google's error envelope, {"error": {"code": 404, "message",
//     "status": "NOT_FOUND", "details"}}; the shape of the Vertex AI API's
//     REST errors, which Google's clients parse (a google.rpc.BadRequest's
//     field violations among the details).
//
// HTTPStatus is the one table from codes to HTTP statuses, Google's (and
// vanguard's).
package httperr

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/anypb"
)

// httpStatus is the HTTP status of each code, as Google's APIs answer.
var httpStatus = [...]int{
	http.StatusOK,                  // OK
	499,                            // Canceled
	http.StatusInternalServerError, // Unknown
	http.StatusBadRequest,          // InvalidArgument
	http.StatusGatewayTimeout,      // DeadlineExceeded
	http.StatusNotFound,            // NotFound
	http.StatusConflict,            // AlreadyExists
	http.StatusForbidden,           // PermissionDenied
	http.StatusTooManyRequests,     // ResourceExhausted
	http.StatusBadRequest,          // FailedPrecondition
	http.StatusConflict,            // Aborted
	http.StatusBadRequest,          // OutOfRange
	http.StatusNotImplemented,      // Unimplemented
	http.StatusInternalServerError, // Internal
	http.StatusServiceUnavailable,  // Unavailable
	http.StatusInternalServerError, // DataLoss
	http.StatusUnauthorized,        // Unauthenticated
}

// HTTPStatus returns the HTTP status of a code.
func HTTPStatus(code connect.Code) int {
	if int(code) >= len(httpStatus) {
		return http.StatusInternalServerError
	}
	return httpStatus[code]
}

// FromConnect returns a Connect error as a google.rpc.Status, with its
// details.
func FromConnect(err *connect.Error) *status.Status {
	st := &status.Status{Code: int32(err.Code()), Message: err.Message()}
	for _, d := range err.Details() {
		st.Details = append(st.Details, &anypb.Any{TypeUrl: "type.googleapis.com/" + d.Type(), Value: d.Bytes()})
	}
	return st
}

// asConnect returns err as a Connect error (INTERNAL when it is not one).
func asConnect(err error) *connect.Error {
	if ce, ok := err.(*connect.Error); ok {
		return ce
	}
	return connect.NewError(connect.CodeInternal, err)
}

// WriteStatus writes err as a google.rpc.Status in JSON, with the HTTP
// status of its code.
func WriteStatus(w http.ResponseWriter, err error) {
	st := FromConnect(asConnect(err))
	body, merr := protojson.Marshal(st)
	if merr != nil {
		body, _ = protojson.Marshal(&status.Status{Code: st.Code, Message: st.Message})
	}
	write(w, HTTPStatus(connect.Code(st.Code)), body)
}

// WriteGoogle writes err in Google's error envelope, with the HTTP status
// of its code.
func WriteGoogle(w http.ResponseWriter, err error) {
	st := FromConnect(asConnect(err))
	write(w, HTTPStatus(connect.Code(st.Code)), GoogleBody(0, st, nil))
}

// WriteGoogleStatus writes a status in Google's error envelope with the
// given HTTP status.
func WriteGoogleStatus(w http.ResponseWriter, httpStatus int, st *status.Status) {
	write(w, httpStatus, GoogleBody(httpStatus, st, nil))
}

// Resolver finds the message types of a status's details.
type Resolver interface {
	protoregistry.MessageTypeResolver
	protoregistry.ExtensionTypeResolver
}

// GoogleBody returns a status in Google's error envelope, whose code is
// httpStatus (0: the HTTP status of the status's code); res resolves the
// details' types (nil: the global registry). Details it cannot resolve are
// left out.
func GoogleBody(httpStatus int, st *status.Status, res Resolver) []byte {
	code := connect.Code(st.GetCode())
	if httpStatus == 0 {
		httpStatus = HTTPStatus(code)
	}
	e := map[string]any{
		"code":    httpStatus,
		"message": st.GetMessage(),
		"status":  strings.ToUpper(code.String()),
	}
	var details []json.RawMessage
	opts := protojson.MarshalOptions{}
	if res != nil {
		opts.Resolver = res
	}
	for _, d := range st.GetDetails() {
		if b, err := opts.Marshal(d); err == nil {
			details = append(details, b)
		}
	}
	if len(details) > 0 {
		e["details"] = details
	}
	b, _ := json.Marshal(map[string]any{"error": e})
	return b
}

func write(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Del("Content-Length")
	w.WriteHeader(status)
	w.Write(body)
}

// Progress records how far a REST request got, so that an error answered
// before any handler ran (vanguard's, reading the request) can be told
// from a handler's. The server puts one in every request's context
// (Track); the REST transcoder marks it as it starts (Transcoding), and
// the server's interceptors as the call reaches them, its request read
// (Reached).
type Progress struct {
	transcoding, reached, counted atomic.Bool
}

type progressKey struct{}

// Track returns ctx with a new Progress, and the Progress.
func Track(ctx context.Context) (context.Context, *Progress) {
	p := &Progress{}
	return context.WithValue(ctx, progressKey{}, p), p
}

// ProgressOf returns the Progress of a request's context, nil when it has
// none.
func ProgressOf(ctx context.Context) *Progress {
	p, _ := ctx.Value(progressKey{}).(*Progress)
	return p
}

// Transcoding marks that a transcoder began reading the request.
func (p *Progress) Transcoding() {
	if p != nil {
		p.transcoding.Store(true)
	}
}

// Reached marks that the request was read and reached the handler's
// interceptors.
func (p *Progress) Reached() {
	if p != nil {
		p.reached.Store(true)
	}
}

// Counted marks that the request's refusal was counted in the metrics
// where it happened (and must not be counted again).
func (p *Progress) Counted() {
	if p != nil {
		p.counted.Store(true)
	}
}

// Unread reports whether the transcoder answered the request without
// calling a handler, and no refusal was counted: its error is about
// reading the request.
func (p *Progress) Unread() bool {
	return p != nil && p.transcoding.Load() && !p.reached.Load() && !p.counted.Load()
}

// Rewrite returns next with its error responses (a status of 400 or more)
// held until complete and written in one shape, Google's envelope when
// google is set, else google.rpc.Status:
//
//   - an error in the other shape, or in plain text (as vanguard writes
//     the errors of a request it could not classify: 405, 415), is
//     rewritten in the shape, keeping its HTTP status;
//   - an error of code UNKNOWN is answered as INVALID_ARGUMENT, 400:
//     vanguard reports so the errors of reading a REST request (a query
//     parameter that is no field, a body where the binding takes none, a
//     body that does not decode), and kioku's handlers never return
//     UNKNOWN (the error interceptor gives every error its code);
//   - so is an error of code INTERNAL that the transcoder answered before
//     any handler ran (the request's Progress says so): vanguard reports
//     a query parameter that is no field so when the method is called
//     over Connect GET.
//
// Other responses pass as they are.
func Rewrite(next http.Handler, google bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hw := &holdingWriter{ResponseWriter: w}
		next.ServeHTTP(hw, r)
		hw.finish(google, ProgressOf(r.Context()).Unread())
	})
}

// holdingWriter holds an error response until it is complete.
type holdingWriter struct {
	http.ResponseWriter
	status int
	buf    *bytes.Buffer // set while an error is being held
}

func (h *holdingWriter) WriteHeader(code int) {
	if h.status != 0 {
		return
	}
	h.status = code
	if code >= 400 {
		h.buf = &bytes.Buffer{}
		return
	}
	h.ResponseWriter.WriteHeader(code)
}

func (h *holdingWriter) Write(b []byte) (int, error) {
	if h.status == 0 {
		h.WriteHeader(http.StatusOK)
	}
	if h.buf != nil {
		return h.buf.Write(b)
	}
	return h.ResponseWriter.Write(b)
}

// Flush flushes what is written, unless an error is being held (vanguard
// flushes as soon as it has written an error's status line).
func (h *holdingWriter) Flush() {
	if h.buf == nil {
		http.NewResponseController(h.ResponseWriter).Flush()
	}
}

func (h *holdingWriter) finish(google, unread bool) {
	if h.buf == nil {
		return
	}
	st, isGoogle := parse(h.buf.Bytes())
	httpStatus := h.status
	switch {
	case st == nil:
		st = &status.Status{Code: int32(CodeOfHTTP(h.status)), Message: strings.TrimSpace(h.buf.String())}
	case connect.Code(st.GetCode()) == connect.CodeUnknown,
		connect.Code(st.GetCode()) == connect.CodeInternal && unread:
		st.Code, httpStatus = int32(connect.CodeInvalidArgument), http.StatusBadRequest
	case isGoogle == google:
		h.ResponseWriter.WriteHeader(h.status)
		h.ResponseWriter.Write(h.buf.Bytes())
		return
	}
	if google {
		write(h.ResponseWriter, httpStatus, GoogleBody(httpStatus, st, nil))
		return
	}
	body, err := protojson.Marshal(st)
	if err != nil {
		body, _ = protojson.Marshal(&status.Status{Code: st.Code, Message: st.Message})
	}
	write(h.ResponseWriter, httpStatus, body)
}

// parse reads an error body in either shape; nil when it is neither.
func parse(body []byte) (st *status.Status, google bool) {
	var env struct {
		Error *struct {
			Message string            `json:"message"`
			Status  string            `json:"status"`
			Details []json.RawMessage `json:"details"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &env) == nil && env.Error != nil {
		var code connect.Code
		if code.UnmarshalText([]byte(strings.ToLower(env.Error.Status))) != nil {
			code = connect.CodeUnknown
		}
		st := &status.Status{Code: int32(code), Message: env.Error.Message}
		for _, d := range env.Error.Details {
			a := &anypb.Any{}
			if protojson.Unmarshal(d, a) == nil {
				st.Details = append(st.Details, a)
			}
		}
		return st, true
	}
	st = &status.Status{}
	if protojson.Unmarshal(body, st) != nil || st.GetCode() == 0 {
		return nil, false
	}
	return st, false
}

// CodeOfHTTP is the code of an HTTP error status, as Google's front end
// reports them.
func CodeOfHTTP(status int) connect.Code {
	switch status {
	case http.StatusBadRequest, http.StatusUnsupportedMediaType:
		return connect.CodeInvalidArgument
	case http.StatusUnauthorized:
		return connect.CodeUnauthenticated
	case http.StatusForbidden:
		return connect.CodePermissionDenied
	case http.StatusNotFound:
		return connect.CodeNotFound
	case http.StatusMethodNotAllowed, http.StatusNotImplemented:
		return connect.CodeUnimplemented
	case http.StatusConflict:
		return connect.CodeAborted
	case http.StatusRequestEntityTooLarge, http.StatusTooManyRequests:
		return connect.CodeResourceExhausted
	case http.StatusServiceUnavailable:
		return connect.CodeUnavailable
	case http.StatusGatewayTimeout:
		return connect.CodeDeadlineExceeded
	}
	return connect.CodeInternal
}
