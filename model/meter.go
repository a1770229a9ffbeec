package model

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"strings"
	"sync"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Meter counts the calls made through the generators and embedders it
// wraps, and the tokens and texts they used, for the server's metrics:
// model calls are what a memory bank costs to run. Each call is also an
// OpenTelemetry span.
type Meter struct {
	mu     sync.Mutex
	counts map[usageKey]Usage
}

type usageKey struct {
	model, call string
	ok          bool
}

// Usage is the count of one kind of call of one model.
type Usage struct {
	Model string // the Generator's or Embedder's Name
	Call  string // "generate" or "embed"
	OK    bool   // the calls succeeded (else they failed)

	Calls        uint64
	PromptTokens uint64 // generate calls, as the provider reports them
	OutputTokens uint64
	Texts        uint64 // embed calls: texts embedded
}

// NewMeter returns a Meter with nothing counted.
func NewMeter() *Meter { return &Meter{counts: map[usageKey]Usage{}} }

func (m *Meter) add(model, call string, err error, prompt, output, texts int) {
	k := usageKey{model, call, err == nil}
	m.mu.Lock()
	defer m.mu.Unlock()
	u := m.counts[k]
	u.Model, u.Call, u.OK = model, call, err == nil
	u.Calls++
	u.PromptTokens += uint64(prompt)
	u.OutputTokens += uint64(output)
	u.Texts += uint64(texts)
	m.counts[k] = u
}

// Usage returns the counts so far, by model, call and outcome (succeeded
// first).
func (m *Meter) Usage() []Usage {
	m.mu.Lock()
	out := slices.Collect(maps.Values(m.counts))
	m.mu.Unlock()
	slices.SortFunc(out, func(a, b Usage) int {
		if c := cmp.Or(strings.Compare(a.Model, b.Model), strings.Compare(a.Call, b.Call)); c != 0 || a.OK == b.OK {
			return c
		}
		if a.OK {
			return -1
		}
		return 1
	})
	return out
}

// Generator returns g counted by m.
func (m *Meter) Generator(g Generator) Generator { return meteredGenerator{g, m} }

// Embedder returns e counted by m.
func (m *Meter) Embedder(e Embedder) Embedder { return meteredEmbedder{e, m} }

type meteredGenerator struct {
	Generator
	m *Meter
}

// Unwrap returns the generator counted (see IsOfflineExtractor).
func (g meteredGenerator) Unwrap() Generator { return g.Generator }

func (g meteredGenerator) Generate(ctx context.Context, r *GenerateRequest) (*GenerateResponse, error) {
	ctx, span := startSpan(ctx, "chat", g.Name())
	resp, err := g.Generator.Generate(ctx, r)
	var prompt, output int
	if resp != nil {
		prompt, output = resp.PromptTokens, resp.OutputTokens
	}
	g.m.add(g.Name(), "generate", err, prompt, output, 0)
	span.SetAttributes(attribute.Int("gen_ai.usage.input_tokens", prompt), attribute.Int("gen_ai.usage.output_tokens", output))
	endSpan(span, err)
	return resp, err
}

type meteredEmbedder struct {
	Embedder
	m *Meter
}

// Unwrap returns the embedder counted (see IsOffline).
func (e meteredEmbedder) Unwrap() Embedder { return e.Embedder }

func (e meteredEmbedder) Embed(ctx context.Context, texts []string, task EmbedTask) ([][]float32, error) {
	ctx, span := startSpan(ctx, "embeddings", e.Name())
	v, err := e.Embedder.Embed(ctx, texts, task)
	e.m.add(e.Name(), "embed", err, 0, 0, len(texts))
	span.SetAttributes(attribute.Int("kioku.embed.texts", len(texts)))
	endSpan(span, err)
	return v, err
}

// tracer makes the spans of the calls a Meter counts.
var tracer = otel.Tracer("github.com/kioku-ai/kioku/model")

// startSpan starts the OpenTelemetry span of one model call, named and
// described as OpenTelemetry's GenAI conventions have it ("chat MODEL",
// "embeddings MODEL"). It is a no-op unless a tracer provider is installed
// (internal/telemetry).
func startSpan(ctx context.Context, operation, model string) (context.Context, trace.Span) {
	return tracer.Start(ctx, operation+" "+model, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("gen_ai.operation.name", operation), attribute.String("gen_ai.request.model", model)))
}

func endSpan(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}
