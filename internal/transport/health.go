package transport

import (
	"context"
	"net/http"
	"sync"
	"time"

	"connectrpc.com/grpchealth"
)

// healthTimeout bounds the store's readiness check within a health check.
const healthTimeout = 3 * time.Second

// health answers gRPC health checks and watches (grpc.health.v1) and GET
// /healthz: SERVING while the server is up and its store answers
// (Config.Ready), NOT_SERVING while the store cannot be reached or the
// server is shutting down. Load balancers take a NOT_SERVING server out of rotation; clients
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

// healthWatchInterval is how often a health Watch stream looks at the
// store's readiness again (the stream sends only changes).
const healthWatchInterval = time.Second

// Watch implements grpchealth.Watcher: the static checker's changes (the
// server shutting down) and, with a readiness check, a look every second,
// so that a Watch stream sees the store go and come back.
func (h *health) Watch(ctx context.Context, req *grpchealth.CheckRequest, onChange func()) (func(), error) {
	stop, err := h.static.Watch(ctx, req, onChange)
	if err != nil || h.ready == nil {
		return stop, err
	}
	done := make(chan struct{})
	go func() {
		tick := time.NewTicker(healthWatchInterval)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				onChange()
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() { close(done) })
		stop()
	}, nil
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
