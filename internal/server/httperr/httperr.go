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
	"encoding/json"
	"net/http"
	"strings"

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
