package server

import (
	"context"
	"net/http"
	"time"

	"connectrpc.com/grpchealth"
)

// healthTimeout bounds the store's readiness check within a health check.
const healthTimeout = 3 * time.Second

// health answers gRPC health checks (grpc.health.v1) and GET /healthz:
// SERVING while the server is up and its store answers (Config.Ready),
// NOT_SERVING while the store cannot be reached or the server is shutting
// down. Load balancers take a NOT_SERVING server out of rotation; clients
// of a server whose store is down get UNAVAILABLE and retry.
type health struct {
	static *grpchealth.StaticChecker
	ready  func(context.Context) error
}

// Check implements grpchealth.Checker.
func (h *health) Check(ctx context.Context, req *grpchealth.CheckRequest) (*grpchealth.CheckResponse, error) {
	resp, err := h.static.Check(ctx, req)
	if err != nil || resp.Status != grpchealth.StatusServing || h.ready == nil {
		return resp, err
	}
	ctx, cancel := context.WithTimeout(ctx, healthTimeout)
	defer cancel()
	if h.ready(ctx) != nil {
		return &grpchealth.CheckResponse{Status: grpchealth.StatusNotServing}, nil
	}
	return resp, nil
}

// ServeHTTP answers GET /healthz for the whole server: 200 and SERVING, or
// 503 and NOT_SERVING.
func (h *health) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	resp, err := h.Check(r.Context(), &grpchealth.CheckRequest{})
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if err != nil || resp.Status != grpchealth.StatusServing {
		w.WriteHeader(http.StatusServiceUnavailable)
		w.Write([]byte("NOT_SERVING\n"))
		return
	}
	w.Write([]byte("SERVING\n"))
}
