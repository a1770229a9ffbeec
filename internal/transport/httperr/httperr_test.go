package httperr_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"connectrpc.com/connect"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/genproto/googleapis/rpc/errdetails"

	"github.com/kioku-ai/kioku/internal/transport/httperr"
)

func badRequest() *connect.Error {
	err := connect.NewError(connect.CodeInvalidArgument, errors.New("filter is bad"))
	d, _ := connect.NewErrorDetail(&errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: "filter", Description: "bad"}}})
	err.AddDetail(d)
	return err
}

// answer serves one request with h and returns the status and the JSON.
func answer(t *testing.T, h http.Handler) (int, map[string]any) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	var out map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		t.Fatalf("%d %q: %v", rec.Code, rec.Body, err)
	}
	return rec.Code, out
}

func TestShapes(t *testing.T) {
	status, out := answer(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { httperr.WriteStatus(w, badRequest()) }))
	want := map[string]any{"code": 3.0, "message": "filter is bad", "details": []any{map[string]any{
		"@type": "type.googleapis.com/google.rpc.BadRequest", "fieldViolations": []any{map[string]any{"field": "filter", "description": "bad"}},
	}}}
	if diff := cmp.Diff(want, out); status != 400 || diff != "" {
		t.Errorf("WriteStatus: %d (-want +got):\n%s", status, diff)
	}
	status, out = answer(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { httperr.WriteGoogle(w, badRequest()) }))
	want = map[string]any{"error": map[string]any{"code": 400.0, "status": "INVALID_ARGUMENT", "message": "filter is bad", "details": want["details"]}}
	if diff := cmp.Diff(want, out); status != 400 || diff != "" {
		t.Errorf("WriteGoogle: %d (-want +got):\n%s", status, diff)
	}
}

func TestRewrite(t *testing.T) {
	for _, c := range []struct {
		name       string
		write      func(http.ResponseWriter)
		google     bool
		wantStatus int
		wantCode   string // the Google status, or the google.rpc.Status code as a number
	}{
		{"plain text 405 to Google's", func(w http.ResponseWriter) { http.Error(w, "method not allowed", 405) }, true, 405, "UNIMPLEMENTED"},
		{"plain text 415 to a Status", func(w http.ResponseWriter) { http.Error(w, "no", 415) }, false, 415, "3"},
		{"a Status to Google's", func(w http.ResponseWriter) {
			httperr.WriteStatus(w, connect.NewError(connect.CodeUnauthenticated, errors.New("no key")))
		}, true, 401, "UNAUTHENTICATED"},
		{"Google's to a Status", func(w http.ResponseWriter) {
			httperr.WriteGoogle(w, connect.NewError(connect.CodeNotFound, errors.New("gone")))
		}, false, 404, "5"},
		{"UNKNOWN is the caller's", func(w http.ResponseWriter) {
			httperr.WriteStatus(w, connect.NewError(connect.CodeUnknown, errors.New("unknown field")))
		}, true, 400, "INVALID_ARGUMENT"},
		{"UNKNOWN in Google's", func(w http.ResponseWriter) {
			httperr.WriteGoogle(w, connect.NewError(connect.CodeUnknown, errors.New("bad body")))
		}, false, 400, "3"},
	} {
		status, out := answer(t, httperr.Rewrite(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			c.write(w)
			// vanguard flushes an error's status line at once.
			http.NewResponseController(w).Flush()
		}), c.google))
		var code string
		if c.google {
			e, _ := out["error"].(map[string]any)
			code, _ = e["status"].(string)
			if e["code"] != float64(c.wantStatus) || e["message"] == "" {
				t.Errorf("%s: %v", c.name, out)
			}
		} else {
			code = json.Number(jsonNumber(out["code"])).String()
		}
		if status != c.wantStatus || code != c.wantCode {
			t.Errorf("%s: %d %v, want %d with %s", c.name, status, out, c.wantStatus, c.wantCode)
		}
	}
	// Successes pass as they are.
	rec := httptest.NewRecorder()
	httperr.Rewrite(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte(`{"ok":true}`)) }), true).ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	if rec.Code != 200 || rec.Body.String() != `{"ok":true}` {
		t.Errorf("a success: %d %q", rec.Code, rec.Body)
	}
}

func jsonNumber(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
