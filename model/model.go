package model

import (
	"context"

	"github.com/invopop/jsonschema"

	"github.com/kioku-ai/kioku/fault"
)

// EmbedTask tells an embedder what a text is for; some models embed queries
// and documents differently.
type EmbedTask int

// The embedding tasks.
const (
	TaskDocument EmbedTask = iota // a text to be found
	TaskQuery                     // a query to find texts with
)

// Embedder turns texts into vectors whose cosine similarity reflects how
// close their meanings are.
type Embedder interface {
	// Embed returns one vector per text, each of Dimensions() values.
	Embed(ctx context.Context, texts []string, task EmbedTask) ([][]float32, error)
	// Dimensions is the length of the vectors.
	Dimensions() int
	// Name identifies the embedding space (provider and model); vectors of
	// different names must not be compared.
	Name() string
}

// Generator produces text with a language model. With a schema, the reply
// is a JSON document that follows it (the provider's structured output).
type Generator interface {
	Generate(ctx context.Context, r *GenerateRequest) (*GenerateResponse, error)
	// Name identifies the provider and model, for logs and metadata.
	Name() string
}

// Message is one turn of a prompt.
type Message struct {
	Role string // "user" or "model"
	Text string
}

// GenerateRequest is one model call.
type GenerateRequest struct {
	// System is the system instruction.
	System string
	// Messages are the conversation so far; the model answers the last.
	Messages []Message
	// Schema, when set, asks for a JSON reply following it (see SchemaFor).
	Schema *jsonschema.Schema
	// Temperature, when set, overrides the model's default.
	Temperature *float32
}

// GenerateResponse is a model's reply.
type GenerateResponse struct {
	Text string
	// Usage in tokens, when the provider reports it.
	PromptTokens, OutputTokens int
}

// BadReply returns the error of a reply of gen to a call (named for the
// message, "extraction") that is not what the call asked for: not the JSON
// of its schema, or past a limit on its content. It is Unavailable, as a
// provider's failure is, so that the operation engine retries the work
// with backoff, and its message blames the model, not kioku.
func BadReply(gen Generator, call string, err error) error {
	return fault.Wrap(fault.Unavailable, err, "the model %s gave an unusable %s reply", gen.Name(), call)
}
