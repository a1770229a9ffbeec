package redact

import (
	"context"

	"github.com/kioku-ai/kioku/model"
)

// Generator returns a generator that redacts, with r, the system
// instruction and every message of each request before g sees it; g
// itself when r is nil. Its Name is g's, and its Unwrap returns g (see
// model.IsOfflineExtractor). The reply is g's, unchanged: the caller
// redacts what it keeps of it.
func Generator(g model.Generator, r *Redactor) model.Generator {
	if g == nil || r == nil {
		return g
	}
	return generator{g: g, r: r}
}

type generator struct {
	g model.Generator
	r *Redactor
}

// Generate implements model.Generator.
func (x generator) Generate(ctx context.Context, req *model.GenerateRequest) (*model.GenerateResponse, error) {
	c := *req
	c.System = x.r.Redact(req.System)
	c.Messages = make([]model.Message, len(req.Messages))
	for i, m := range req.Messages {
		c.Messages[i] = model.Message{Role: m.Role, Text: x.r.Redact(m.Text)}
	}
	return x.g.Generate(ctx, &c)
}

// Name implements model.Generator.
func (x generator) Name() string { return x.g.Name() }

// Unwrap returns the generator redacted for.
func (x generator) Unwrap() model.Generator { return x.g }
