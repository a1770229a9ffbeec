package main_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"syscall"
	"testing"

	"connectrpc.com/connect"
	colltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/gen/kioku/v1/kiokuv1connect"
)

// TestOTelEndpoint: kioku serve --otel-endpoint exports the spans of its
// calls to an OTLP/HTTP collector, flushing them when it stops.
func TestOTelEndpoint(t *testing.T) {
	t.Parallel()
	var (
		mu      sync.Mutex
		spans   []string
		service string
	)
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.URL.Path == "/v1/traces" {
			var req colltrace.ExportTraceServiceRequest
			if err := proto.Unmarshal(body, &req); err != nil {
				t.Errorf("traces: %v", err)
			}
			mu.Lock()
			for _, rs := range req.GetResourceSpans() {
				for _, a := range rs.GetResource().GetAttributes() {
					if a.GetKey() == "service.name" {
						service = a.GetValue().GetStringValue()
					}
				}
				for _, ss := range rs.GetScopeSpans() {
					for _, s := range ss.GetSpans() {
						spans = append(spans, s.GetName())
					}
				}
			}
			mu.Unlock()
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer collector.Close()

	proc := startKioku(t, "--data-dir", t.TempDir(), "--otel-endpoint", collector.URL)
	c := kiokuv1connect.NewSessionServiceClient(http.DefaultClient, proc.url)
	if _, err := c.CreateSession(t.Context(), connect.NewRequest(&kiokuv1.CreateSessionRequest{Parent: "apps/demo/users/ann"})); err != nil {
		t.Fatal(err)
	}
	if err := proc.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := proc.cmd.Wait(); err != nil {
		t.Fatalf("kioku serve: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Contains(spans, "kioku.v1.SessionService/CreateSession") || !slices.Contains(spans, "sqlite.write") || service != "kioku" {
		t.Errorf("the collector got spans %q of service %q", spans, service)
	}
}
