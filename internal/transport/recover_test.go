package transport

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestPanicOutsideHandlersIsRecovered: a panic in what serves a request
// outside the Connect handlers (the transcoders, middleware) answers
// INTERNAL instead of dropping the connection, is counted, and is logged
// with its stack; http.ErrAbortHandler still aborts.
func TestPanicOutsideHandlersIsRecovered(t *testing.T) {
	var log bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&log, nil))
	metrics := newRPCMetrics(logger, nil)
	b := &bounds{
		next: http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
			var s []int
			_ = s[3]
		}),
		maxBody: 1 << 20, bodyTimeout: 1e9, writeTimeout: 1e9, metrics: metrics,
		logs: newSampledLog(logger, slog.LevelInfo), panics: newSampledLog(logger, slog.LevelError),
	}
	w := httptest.NewRecorder()
	b.ServeHTTP(w, httptest.NewRequest("GET", "/v1/apps/a/users/u/sessions/s", nil))
	if w.Code != 500 || !strings.Contains(w.Body.String(), `"code":13`) {
		t.Errorf("a panic: %d %s; want 500 INTERNAL", w.Code, w.Body)
	}
	if !strings.Contains(log.String(), "level=ERROR") || !strings.Contains(log.String(), "index out of range") || !strings.Contains(log.String(), "stack=") {
		t.Errorf("the panic was logged as %s", log.String())
	}
	m := httptest.NewRecorder()
	metrics.ServeHTTP(m, httptest.NewRequest("GET", "/metrics", nil))
	if !strings.Contains(m.Body.String(), `kioku_rpc_refused_total{procedure="REST",reason="panic"} 1`) {
		t.Errorf("the panic is not counted on /metrics")
	}

	b.next = http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic(http.ErrAbortHandler) })
	defer func() {
		if p := recover(); p != http.ErrAbortHandler {
			t.Errorf("http.ErrAbortHandler became %v", p)
		}
	}()
	b.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
}
