package telemetry_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric/noop"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
	collmetrics "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	colltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/kioku-ai/kioku/internal/telemetry"
)

// clearEnv unsets the standard variables for the test, and makes
// OpenTelemetry's globals no-ops during and after it.
func clearEnv(t *testing.T) {
	for _, v := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_SDK_DISABLED", "OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES"} {
		t.Setenv(v, "")
	}
	otel.SetMeterProvider(noop.NewMeterProvider())
	t.Cleanup(func() {
		otel.SetTracerProvider(tracenoop.NewTracerProvider())
		otel.SetMeterProvider(noop.NewMeterProvider())
	})
}

// received is what a fake OTLP collector got: span names and the
// service.name of their resource.
type received struct {
	mu       sync.Mutex
	spans    []string
	services []string
	metrics  int
}

func (r *received) traces(req *colltrace.ExportTraceServiceRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		for _, a := range rs.GetResource().GetAttributes() {
			if a.GetKey() == "service.name" {
				r.services = append(r.services, a.GetValue().GetStringValue())
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				r.spans = append(r.spans, s.GetName())
			}
		}
	}
}

func (r *received) check(t *testing.T, span string) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if !strings.Contains(strings.Join(r.spans, ","), span) || len(r.services) == 0 || r.services[0] != "kioku" {
		t.Errorf("collector got spans %q of services %q, want %q of kioku", r.spans, r.services, span)
	}
	if r.metrics != 0 {
		t.Errorf("collector got %d metrics exports; metrics are /metrics's only (one pipeline)", r.metrics)
	}
}

// emit makes one span and one counter through the globals, then flushes.
// The counter must go nowhere: Setup installs no meter provider.
func emit(t *testing.T, shutdown func(context.Context) error) {
	t.Helper()
	if _, noop := otel.GetMeterProvider().(noop.MeterProvider); !noop {
		t.Errorf("Setup installed a meter provider (%T); metrics are /metrics's only", otel.GetMeterProvider())
	}
	ctx := context.Background()
	_, span := otel.Tracer("test").Start(ctx, "kioku.test.span")
	span.End()
	counter, _ := otel.Meter("test").Int64Counter("kioku.test.counter")
	counter.Add(ctx, 1)
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := shutdown(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestOffWithoutAnEndpoint(t *testing.T) {
	clearEnv(t)
	before := otel.GetTracerProvider()
	shutdown, enabled, err := telemetry.Setup(t.Context(), telemetry.Config{})
	if err != nil || enabled || shutdown(t.Context()) != nil {
		t.Fatalf("Setup without an endpoint: enabled=%v err=%v", enabled, err)
	}
	if otel.GetTracerProvider() != before {
		t.Error("Setup without an endpoint installed a tracer provider")
	}
	// Metrics are not exported (they are /metrics's), so their endpoint
	// alone turns nothing on.
	t.Setenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "http://127.0.0.1:1")
	if (telemetry.Config{}).Enabled() {
		t.Error("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT alone turned export on")
	}
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	t.Setenv("OTEL_SDK_DISABLED", "true")
	if (telemetry.Config{}).Enabled() {
		t.Error("OTEL_SDK_DISABLED=true did not turn export off")
	}
}

func TestBadSettingsAreNamed(t *testing.T) {
	clearEnv(t)
	if _, _, err := telemetry.Setup(t.Context(), telemetry.Config{Endpoint: "collector:4318"}); err == nil || !strings.Contains(err.Error(), "collector:4318") {
		t.Errorf("endpoint without a scheme: %v", err)
	}
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
	if _, _, err := telemetry.Setup(t.Context(), telemetry.Config{Endpoint: "http://127.0.0.1:4318"}); err == nil || !strings.Contains(err.Error(), "http/json") {
		t.Errorf("unsupported protocol: %v", err)
	}
}

// TestExportsOverOTLPHTTP: with an endpoint (the flag, or the standard
// variable), spans reach an OTLP/HTTP collector, and metrics do not.
func TestExportsOverOTLPHTTP(t *testing.T) {
	for _, viaEnv := range []bool{false, true} {
		clearEnv(t)
		var got received
		collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			switch r.URL.Path {
			case "/v1/traces":
				var req colltrace.ExportTraceServiceRequest
				if err := proto.Unmarshal(body, &req); err != nil {
					t.Errorf("traces: %v", err)
				}
				got.traces(&req)
			case "/v1/metrics":
				got.mu.Lock()
				got.metrics++
				got.mu.Unlock()
			default:
				t.Errorf("unexpected %s", r.URL.Path)
			}
			w.Header().Set("Content-Type", "application/x-protobuf")
		}))
		cfg := telemetry.Config{Endpoint: collector.URL, ServiceVersion: "test"}
		if viaEnv {
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.URL)
			cfg.Endpoint = ""
		}
		shutdown, enabled, err := telemetry.Setup(t.Context(), cfg)
		if err != nil || !enabled {
			t.Fatalf("Setup: enabled=%v err=%v", enabled, err)
		}
		emit(t, shutdown)
		got.check(t, "kioku.test.span")
		collector.Close()
	}
}

type traceCollector struct {
	colltrace.UnimplementedTraceServiceServer
	got *received
}

func (c traceCollector) Export(_ context.Context, req *colltrace.ExportTraceServiceRequest) (*colltrace.ExportTraceServiceResponse, error) {
	c.got.traces(req)
	return &colltrace.ExportTraceServiceResponse{}, nil
}

type metricsCollector struct {
	collmetrics.UnimplementedMetricsServiceServer
	got *received
}

func (c metricsCollector) Export(context.Context, *collmetrics.ExportMetricsServiceRequest) (*collmetrics.ExportMetricsServiceResponse, error) {
	c.got.mu.Lock()
	c.got.metrics++
	c.got.mu.Unlock()
	return &collmetrics.ExportMetricsServiceResponse{}, nil
}

// TestExportsOverOTLPgRPC: OTEL_EXPORTER_OTLP_PROTOCOL=grpc exports spans
// to an OTLP/gRPC collector (and no metrics).
func TestExportsOverOTLPgRPC(t *testing.T) {
	clearEnv(t)
	var got received
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	colltrace.RegisterTraceServiceServer(s, traceCollector{got: &got})
	collmetrics.RegisterMetricsServiceServer(s, metricsCollector{got: &got})
	go s.Serve(ln)
	t.Cleanup(s.Stop)

	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
	shutdown, enabled, err := telemetry.Setup(t.Context(), telemetry.Config{Endpoint: "http://" + ln.Addr().String()})
	if err != nil || !enabled {
		t.Fatalf("Setup: enabled=%v err=%v", enabled, err)
	}
	emit(t, shutdown)
	got.check(t, "kioku.test.span")
}
