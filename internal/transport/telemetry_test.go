package transport_test

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/gen/kioku/v1/kiokuv1connect"
	"github.com/kioku-ai/kioku/internal/firestoretest"
	"github.com/kioku-ai/kioku/internal/node"
	"github.com/kioku-ai/kioku/internal/node/nodetest"
	"github.com/kioku-ai/kioku/internal/telemetry"
	"github.com/kioku-ai/kioku/model/modeltest"
)

// installInMemoryTelemetry makes an in-memory tracer provider the global
// for the test, as internal/telemetry installs an exporting one, and an
// in-memory meter provider too, as a program that embeds kioku may install
// one of its own: kioku must record no metrics through it.
func installInMemoryTelemetry(t *testing.T) (*tracetest.InMemoryExporter, *sdkmetric.ManualReader) {
	spans := tracetest.NewInMemoryExporter()
	metrics := sdkmetric.NewManualReader()
	telemetry.Install(sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans)))
	otel.SetMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(metrics)))
	t.Cleanup(func() {
		otel.SetTracerProvider(tracenoop.NewTracerProvider())
		otel.SetMeterProvider(noop.NewMeterProvider())
	})
	return spans, metrics
}

// traceparent is a caller's trace context, as a backend that traces would
// send it.
var (
	remoteTrace = trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36}
	remoteSpan  = trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7}
	traceparent = "00-" + remoteTrace.String() + "-" + remoteSpan.String() + "-01"
)

func withTraceparent() connect.ClientOption {
	return connect.WithInterceptors(connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			req.Header().Set("traceparent", traceparent)
			return next(ctx, req)
		}
	}))
}

func findSpans(spans tracetest.SpanStubs, match func(tracetest.SpanStub) bool) []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, s := range spans {
		if match(s) {
			out = append(out, s)
		}
	}
	return out
}

func spanAttr(s tracetest.SpanStub, key string) attribute.Value {
	for _, a := range s.Attributes {
		if string(a.Key) == key {
			return a.Value
		}
	}
	return attribute.Value{}
}

// TestTracing: with OpenTelemetry providers installed, each RPC of the
// kioku services is a server span continuing the caller's trace (over
// Connect and REST), with the store's transactions inside it (SQLite's
// sqlite.write, the Firestore client's own spans), model calls are spans
// with their model and tokens, and the RPC's log line names its trace. The
// calls are counted once, on /metrics: OpenTelemetry records no RPC
// metrics (one metrics pipeline).
func TestTracing(t *testing.T) {
	spans, metrics := installInMemoryTelemetry(t)
	fake := modeltest.NewGemini(t)
	var logs nodetest.LogBuffer
	open := func(cfg node.Config) (kiokuv1connect.SessionServiceClient, *clients) {
		cfg.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		cfg.Models = nodetest.Gemini(fake)
		_, url := nodetest.Serve(t, cfg)
		c := &clients{
			memories: kiokuv1connect.NewMemoryBankServiceClient(http.DefaultClient, url),
			ops:      kiokuv1connect.NewOperationServiceClient(http.DefaultClient, url),
			url:      url,
		}
		return kiokuv1connect.NewSessionServiceClient(http.DefaultClient, url, withTraceparent()), c
	}
	// rpcSpan finds the server span of a procedure in the caller's trace.
	rpcSpan := func(t *testing.T, procedure string) tracetest.SpanStub {
		t.Helper()
		found := findSpans(spans.GetSpans(), func(s tracetest.SpanStub) bool {
			return s.Name == procedure && s.SpanKind == trace.SpanKindServer && s.SpanContext.TraceID() == remoteTrace
		})
		if len(found) != 1 {
			t.Fatalf("want one server span %s in trace %s, got %d of %d spans", procedure, remoteTrace, len(found), len(spans.GetSpans()))
		}
		if found[0].Parent.SpanID() != remoteSpan {
			t.Errorf("%s: parent %s, want the caller's span %s", procedure, found[0].Parent.SpanID(), remoteSpan)
		}
		return found[0]
	}

	t.Run("sqlite", func(t *testing.T) {
		spans.Reset()
		sessions, c := open(node.Config{DataDir: t.TempDir()})
		ctx := t.Context()
		if _, err := sessions.CreateSession(ctx, req(&kiokuv1.CreateSessionRequest{Parent: "apps/demo/users/ann", SessionId: "s"})); err != nil {
			t.Fatal(err)
		}
		if _, err := sessions.AppendEvent(ctx, req(&kiokuv1.AppendEventRequest{Name: "apps/demo/users/ann/sessions/s", Event: &kiokuv1.Event{
			Author: "user", Content: &kiokuv1.Content{Role: "user", Parts: []*kiokuv1.Part{{Text: "I moved to Sapporo."}}}}})); err != nil {
			t.Fatal(err)
		}
		appendSpan := rpcSpan(t, "kioku.v1.SessionService/AppendEvent")
		writes := findSpans(spans.GetSpans(), func(s tracetest.SpanStub) bool {
			return s.Name == "sqlite.write" && s.Parent.SpanID() == appendSpan.SpanContext.SpanID()
		})
		if len(writes) == 0 || spanAttr(writes[0], "kioku.sqlite.batch_writes").AsInt64() < 1 || spanAttr(writes[0], "db.system.name").AsString() != "sqlite" {
			t.Errorf("AppendEvent's span holds no sqlite.write span with its batch: %+v", writes)
		}
		if !strings.Contains(logs.String(), "procedure=/kioku.v1.SessionService/AppendEvent") || !strings.Contains(logs.String(), "trace_id="+remoteTrace.String()) {
			t.Errorf("the RPC's log line does not name its trace:\n%s", logs.String())
		}

		// REST goes through the same handlers, so through the same spans.
		restReq, _ := http.NewRequestWithContext(ctx, "GET", c.url+"/v1/apps/demo/users/ann/sessions/s", nil)
		restReq.Header.Set("traceparent", traceparent)
		res, err := http.DefaultClient.Do(restReq)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		rpcSpan(t, "kioku.v1.SessionService/GetSession")

		// A generation's model calls: extraction (chat) and embeddings.
		fake.ReplyText(`{"facts":[{"fact":"The user moved to Sapporo.","topic":"USER_PERSONAL_INFO","events":[1]}]}`)
		op, err := c.memories.GenerateMemories(ctx, req(&kiokuv1.GenerateMemoriesRequest{Parent: "apps/demo",
			Source: &kiokuv1.GenerateMemoriesRequest_SessionSource{SessionSource: &kiokuv1.SessionSource{Session: "apps/demo/users/ann/sessions/s"}}}))
		if err != nil {
			t.Fatal(err)
		}
		if done := wait(t, c, op.Msg); done.GetError() != nil {
			t.Fatalf("generation failed: %v", done.GetError())
		}
		chats := findSpans(spans.GetSpans(), func(s tracetest.SpanStub) bool { return strings.HasPrefix(s.Name, "chat ") })
		if len(chats) == 0 || spanAttr(chats[0], "gen_ai.request.model").AsString() == "" || spanAttr(chats[0], "gen_ai.usage.input_tokens").AsInt64() != 10 {
			t.Errorf("no chat span with its model and the 10 prompt tokens the fake reports: %+v", chats)
		}
		embeds := findSpans(spans.GetSpans(), func(s tracetest.SpanStub) bool { return strings.HasPrefix(s.Name, "embeddings ") })
		if len(embeds) == 0 || spanAttr(embeds[0], "kioku.embed.texts").AsInt64() < 1 {
			var names []string
			for _, s := range spans.GetSpans() {
				names = append(names, s.Name)
			}
			t.Errorf("no embeddings span with its texts among %q", names)
		}

		var rm metricdata.ResourceMetrics
		if err := metrics.Collect(ctx, &rm); err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				names = append(names, m.Name)
			}
		}
		if strings.Contains(strings.Join(names, " "), "rpc.server.") {
			t.Errorf("rpc.server metrics recorded through OpenTelemetry: %q; the calls are counted on /metrics only", names)
		}
		if n := scrape(t, c.url)[`kioku_rpc_calls_total{code="ok",procedure="/kioku.v1.SessionService/AppendEvent"}`]; n != 1 {
			t.Errorf("/metrics counted %v AppendEvent calls, want 1", n)
		}
	})

	t.Run("firestore", func(t *testing.T) {
		spans.Reset()
		sessions, _ := open(node.Config{Store: "firestore", FirestoreProject: firestoretest.Project(t)})
		ctx := t.Context()
		if _, err := sessions.CreateSession(ctx, req(&kiokuv1.CreateSessionRequest{Parent: "apps/demo/users/ann", SessionId: "s"})); err != nil {
			t.Fatal(err)
		}
		if _, err := sessions.AppendEvent(ctx, req(&kiokuv1.AppendEventRequest{Name: "apps/demo/users/ann/sessions/s", Event: &kiokuv1.Event{Author: "user"}})); err != nil {
			t.Fatal(err)
		}
		appendSpan := rpcSpan(t, "kioku.v1.SessionService/AppendEvent")
		tx := findSpans(spans.GetSpans(), func(s tracetest.SpanStub) bool {
			return s.Name == "cloud.google.com/go/firestore.Client.RunTransaction" && s.Parent.SpanID() == appendSpan.SpanContext.SpanID()
		})
		if len(tx) == 0 {
			t.Errorf("AppendEvent's span holds no Firestore transaction span: %+v", tx)
		}
	})
}
