package transport_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync/atomic"
	"testing"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/kioku-ai/kioku/gen/kioku/v1/kiokuv1connect"
	"github.com/kioku-ai/kioku/internal/transport"
)

// TestHealthFollowsTheStore: gRPC health and GET /healthz report
// NOT_SERVING (503) while Config.Ready fails, for the server and each
// service, and SERVING (200) again once it succeeds; a Watch stream sends
// each change; unknown services stay NOT_FOUND.
func TestHealthFollowsTheStore(t *testing.T) {
	var down atomic.Bool
	ts := startServer(t, transport.Config{Ready: func(context.Context) error {
		if down.Load() {
			return errors.New("unreachable")
		}
		return nil
	}})
	hc := healthpb.NewHealthClient(grpcConn(t, ts))
	check := func(wantCode int, want healthpb.HealthCheckResponse_ServingStatus, body string) {
		t.Helper()
		resp, err := http.Get(ts.URL + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != wantCode || string(b) != body {
			t.Errorf("GET /healthz = %d %q, want %d %q", resp.StatusCode, b, wantCode, body)
		}
		for _, svc := range []string{"", kiokuv1connect.SessionServiceName, kiokuv1connect.MemoryBankServiceName} {
			got, err := hc.Check(t.Context(), &healthpb.HealthCheckRequest{Service: svc})
			if err != nil || got.Status != want {
				t.Errorf("gRPC health of %q = %v, %v; want %v", svc, got, err, want)
			}
		}
	}
	check(http.StatusOK, healthpb.HealthCheckResponse_SERVING, "SERVING\n")
	watch, err := hc.Watch(t.Context(), &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	next := func(want healthpb.HealthCheckResponse_ServingStatus) {
		t.Helper()
		got, err := watch.Recv()
		if err != nil || got.Status != want {
			t.Fatalf("Watch sent %v, %v; want %v", got, err, want)
		}
	}
	next(healthpb.HealthCheckResponse_SERVING)
	down.Store(true)
	check(http.StatusServiceUnavailable, healthpb.HealthCheckResponse_NOT_SERVING, "NOT_SERVING\n")
	next(healthpb.HealthCheckResponse_NOT_SERVING)
	down.Store(false)
	check(http.StatusOK, healthpb.HealthCheckResponse_SERVING, "SERVING\n")
	next(healthpb.HealthCheckResponse_SERVING)
	if _, err := hc.Check(t.Context(), &healthpb.HealthCheckRequest{Service: "no.such.Service"}); err == nil {
		t.Error("gRPC health of an unknown service answered")
	}
}
