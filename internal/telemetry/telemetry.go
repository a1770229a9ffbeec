// Package telemetry turns on OpenTelemetry traces for a kioku process: when
// an OTLP endpoint is configured, Setup installs the SDK's tracer provider
// as OpenTelemetry's global, exporting over OTLP, with W3C trace context
// and baggage as the propagators; otherwise nothing is installed and every
// span in the process stays OpenTelemetry's no-op.
//
// Metrics are not exported here: kioku has one metrics pipeline, the
// Prometheus client behind GET /metrics (internal/transport's rpcMetrics says
// why), and installs no OpenTelemetry meter provider, so the calls are not
// counted twice.
//
// What records through the global: each RPC (connectrpc.com/otelconnect in
// package transport: a span per call, trusting the caller's trace context),
// each SQLite write transaction (span
// sqlite.write, in internal/sqlitedb), each call of the memory bank's
// generation model and embedder (spans "chat MODEL" and "embeddings
// MODEL", in package model), and the Firestore client's own spans of its
// transactions and calls.
package telemetry

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
)

// Config says where to export.
type Config struct {
	// Endpoint is the OTLP endpoint's URL (http://collector:4318 for
	// OTLP/HTTP, the default protocol; http://collector:4317 with
	// OTEL_EXPORTER_OTLP_PROTOCOL=grpc). Empty: the standard
	// OTEL_EXPORTER_OTLP_ENDPOINT (or its _TRACES_ form) decides, and
	// without either, telemetry stays off.
	Endpoint string
	// ServiceVersion is reported as service.version.
	ServiceVersion string
}

// Enabled reports whether cfg, with the environment, asks for export.
// OTEL_SDK_DISABLED=true turns it off whatever else is set.
func (cfg Config) Enabled() bool {
	if strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true") {
		return false
	}
	return cfg.Endpoint != "" || os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" ||
		os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// Setup installs an OTLP-exporting tracer provider as OpenTelemetry's global
// when cfg is enabled, and returns a function that flushes and stops it (a
// no-op when nothing was installed) and whether it installed it. The
// exporter reads the other standard OTEL_EXPORTER_OTLP_* variables
// (headers, certificates, timeouts, compression); OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES add to the resource (service.name is kioku by
// default).
func Setup(ctx context.Context, cfg Config) (shutdown func(context.Context) error, enabled bool, err error) {
	none := func(context.Context) error { return nil }
	if !cfg.Enabled() {
		return none, false, nil
	}
	protocol := os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	if protocol == "" {
		protocol = "http/protobuf"
	}
	if cfg.Endpoint != "" {
		u, err := url.Parse(cfg.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return none, false, fmt.Errorf("OTLP endpoint %q: want a URL such as http://localhost:4318", cfg.Endpoint)
		}
	}

	var spans sdktrace.SpanExporter
	switch protocol {
	case "http/protobuf":
		var opts []otlptracehttp.Option
		if cfg.Endpoint != "" {
			opts = append(opts, otlptracehttp.WithEndpointURL(strings.TrimSuffix(cfg.Endpoint, "/")+"/v1/traces"))
		}
		spans, err = otlptracehttp.New(ctx, opts...)
	case "grpc":
		var opts []otlptracegrpc.Option
		if cfg.Endpoint != "" {
			opts = append(opts, otlptracegrpc.WithEndpointURL(cfg.Endpoint))
		}
		spans, err = otlptracegrpc.New(ctx, opts...)
	default:
		return none, false, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL %q: kioku exports with http/protobuf (the default) or grpc", protocol)
	}
	if err != nil {
		return none, false, fmt.Errorf("OTLP exporter: %w", err)
	}

	res, err := resource.Merge(
		resource.NewSchemaless(semconv.ServiceName("kioku"), semconv.ServiceVersion(cfg.ServiceVersion)),
		resource.Environment(),
	)
	if err != nil {
		return none, false, fmt.Errorf("OpenTelemetry resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(spans), sdktrace.WithResource(res))
	Install(tp)
	return tp.Shutdown, true, nil
}

// Install makes tp OpenTelemetry's global tracer provider, with W3C trace
// context and baggage as the global propagators. Setup calls it; tests call
// it with an in-memory exporter.
func Install(tp *sdktrace.TracerProvider) {
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
}
