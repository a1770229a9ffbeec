package model

import (
	"context"
	"net/http"
	"os"
	"slices"
	"strings"

	"google.golang.org/genai"

	"github.com/kioku-ai/kioku/fault"
)

// Config chooses the generation model and the embedder. The zero value
// means the offline extractor and the offline embedder: memories are
// generated from conversations with no key and no network.
type Config struct {
	// Provider of the generation model: "offline" (the built-in rules of
	// OfflineExtractor; "" means the same), "gemini" (Gemini API key),
	// "vertex" (Vertex AI), "openai" (any OpenAI-compatible server), or
	// "none" (no generation: memories are only created directly).
	Provider string
	// Model is the generation model; empty takes the provider's default
	// (gemini-2.5-flash; for openai it is required).
	Model string

	// Embedder is "offline" (the default), "gemini", "vertex" or "openai".
	Embedder string
	// EmbedModel is the embedding model; empty takes the provider's default
	// (gemini-embedding-001; for openai it is required).
	EmbedModel string
	// EmbedDims is the vector size to ask for or expect (default 768 for
	// Gemini; required for openai). At most 2048 with Firestore.
	EmbedDims int

	// Gemini API key (default: GEMINI_API_KEY, then GOOGLE_API_KEY).
	GeminiAPIKey string
	// Vertex AI project and location (default: GOOGLE_CLOUD_PROJECT and
	// GOOGLE_CLOUD_LOCATION, location falling back to us-central1).
	Project, Location string
	// GeminiBaseURL overrides the Gemini or Vertex AI endpoint.
	GeminiBaseURL string

	// OpenAI-compatible server (default: OPENAI_BASE_URL, then
	// https://api.openai.com/v1) and key (default: OPENAI_API_KEY).
	OpenAIBaseURL, OpenAIAPIKey string

	// Retry is the retry policy of every model request (zero: default).
	Retry RetryPolicy
	// Limits bound every model call: its time and the size of its reply
	// (zero fields: DefaultCallLimits).
	Limits CallLimits
	// HTTPClient is the base HTTP client (nil: http.DefaultClient).
	HTTPClient *http.Client
}

// Provider is a generation model provider: a value of Config.Provider
// (--model-provider) and what it needs, for help and error texts.
type Provider struct {
	Name  string
	Needs string
}

// Providers returns the generation providers Config.Provider names ("" is
// offline), in the order help and error texts list them: the offline
// extractor, the language models (ChatProviders) and none. It is the one
// list of their names: a new provider is added here or in ChatProviders.
func Providers() []Provider {
	return slices.Concat(
		[]Provider{{Name: "offline", Needs: "the default: built-in rules that turn what people say about themselves into memories, no key; a language model does far better"}},
		ChatProviders(),
		[]Provider{{Name: "none", Needs: "memories only created directly"}},
	)
}

// ChatProviders returns the providers of language models, which can also
// hold a conversation (Config.Chat).
func ChatProviders() []Provider {
	return []Provider{
		{Name: "gemini", Needs: "GEMINI_API_KEY"},
		{Name: "vertex", Needs: "GOOGLE_CLOUD_PROJECT, GOOGLE_CLOUD_LOCATION"},
		{Name: "openai", Needs: "OpenAI-compatible: Ollama, vLLM, llama.cpp"},
	}
}

// ProviderList lists providers for a message: "gemini, vertex or openai",
// or with needs, "gemini (GEMINI_API_KEY), vertex (...) or openai (...)".
func ProviderList(providers []Provider, needs bool) string {
	var b strings.Builder
	for i, p := range providers {
		switch {
		case i == 0:
		case i == len(providers)-1:
			b.WriteString(" or ")
		default:
			b.WriteString(", ")
		}
		b.WriteString(p.Name)
		if needs && p.Needs != "" {
			b.WriteString(" (" + p.Needs + ")")
		}
	}
	return b.String()
}

// Settings names the flags and environment variables that configure a
// generation model, for error messages.
const Settings = "--model-provider gemini with GEMINI_API_KEY, --model-provider vertex with GOOGLE_CLOUD_PROJECT (and Application Default Credentials), or --model-provider openai with --openai-base-url and --model (env KIOKU_MODEL_PROVIDER, KIOKU_MODEL, KIOKU_OPENAI_BASE_URL)"

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

func (c Config) withDefaults() Config {
	c.GeminiAPIKey = firstNonEmpty(c.GeminiAPIKey, os.Getenv("GEMINI_API_KEY"), os.Getenv("GOOGLE_API_KEY"))
	c.Project = firstNonEmpty(c.Project, os.Getenv("GOOGLE_CLOUD_PROJECT"))
	c.Location = firstNonEmpty(c.Location, os.Getenv("GOOGLE_CLOUD_LOCATION"), os.Getenv("GOOGLE_CLOUD_REGION"), "us-central1")
	c.OpenAIBaseURL = firstNonEmpty(c.OpenAIBaseURL, os.Getenv("OPENAI_BASE_URL"), "https://api.openai.com/v1")
	c.OpenAIAPIKey = firstNonEmpty(c.OpenAIAPIKey, os.Getenv("OPENAI_API_KEY"))
	if c.Embedder == "" {
		c.Embedder = "offline"
	}
	return c
}

// Build returns the configured generator (nil with provider "none") and
// embedder.
func (c Config) Build(ctx context.Context) (Generator, Embedder, error) {
	c = c.withDefaults()
	var gen Generator
	switch c.Provider {
	case "", "offline":
		gen = OfflineExtractor{}
	case "none":
	default:
		chat, err := c.chat(ctx)
		if err != nil {
			return nil, nil, err
		}
		gen = chat
	}

	var emb Embedder
	switch c.Embedder {
	case "offline":
		emb = Offline{}
	case "gemini", "vertex":
		client, err := c.gemini(ctx, c.Embedder)
		if err != nil {
			return nil, nil, err
		}
		dims := c.EmbedDims
		if dims == 0 {
			dims = 768
		}
		emb = &GeminiEmbedder{Client: client, Model: firstNonEmpty(c.EmbedModel, "gemini-embedding-001"), Dims: dims}
	case "openai":
		if c.EmbedModel == "" || c.EmbedDims <= 0 {
			return nil, nil, fault.Invalidf("--embed-model and --embed-dims are required with --embedder openai (for example nomic-embed-text and 768 on Ollama)")
		}
		emb = NewOpenAIEmbedder(c.openAI(), c.EmbedModel, c.EmbedDims)
	default:
		return nil, nil, fault.Invalidf("unknown embedder %q: use offline, gemini, vertex or openai", c.Embedder)
	}
	if d := emb.Dimensions(); d < 1 || d > 4096 {
		return nil, nil, fault.Invalidf("embedding dimensions %d out of range (1 to 4096)", d)
	}
	return gen, emb, nil
}

// Chat returns the configured generation model for conversations with
// tools, or an error naming the settings when none is configured: the
// offline extractor only turns conversations into memories and cannot
// hold one.
func (c Config) Chat(ctx context.Context) (Chat, error) {
	switch c.Provider {
	case "", "offline":
		return nil, fault.New(fault.FailedPrecondition, "the offline extractor (the default generation provider) only turns conversations into memories and cannot hold a conversation: use %s", Settings)
	case "none":
		return nil, fault.New(fault.FailedPrecondition, "no model is configured: use %s", Settings)
	}
	return c.withDefaults().chat(ctx)
}

// chatGenerator is what every generation provider implements.
type chatGenerator interface {
	Chat
	Generator
}

// chat builds the language model of a provider that has one.
func (c Config) chat(ctx context.Context) (chatGenerator, error) {
	switch c.Provider {
	case "gemini", "vertex":
		client, err := c.gemini(ctx, c.Provider)
		if err != nil {
			return nil, err
		}
		return &Gemini{Client: client, Model: firstNonEmpty(c.Model, "gemini-2.5-flash")}, nil
	case "openai":
		if c.Model == "" {
			return nil, fault.Invalidf("--model is required with --model-provider openai (for example llama3.1 on Ollama)")
		}
		return NewOpenAI(c.openAI(), c.Model), nil
	default:
		return nil, fault.Invalidf("unknown model provider %q: use %s", c.Provider, ProviderList(Providers(), false))
	}
}

// gemini returns a genai client for the Gemini API ("gemini") or Vertex AI
// ("vertex").
func (c Config) gemini(ctx context.Context, provider string) (*genai.Client, error) {
	gc := GeminiConfig{BaseURL: c.GeminiBaseURL, Retry: c.Retry, Limits: c.Limits, HTTPClient: c.HTTPClient}
	if provider == "vertex" {
		if c.Project == "" {
			return nil, fault.New(fault.FailedPrecondition, "Vertex AI needs a project: set GOOGLE_CLOUD_PROJECT (and GOOGLE_CLOUD_LOCATION)")
		}
		gc.VertexAI, gc.Project, gc.Location = true, c.Project, c.Location
	} else {
		if c.GeminiAPIKey == "" {
			return nil, fault.New(fault.FailedPrecondition, "the Gemini API needs a key: set GEMINI_API_KEY (or GOOGLE_API_KEY)")
		}
		gc.APIKey = c.GeminiAPIKey
	}
	return NewGeminiClient(ctx, gc)
}

func (c Config) openAI() OpenAIConfig {
	return OpenAIConfig{BaseURL: c.OpenAIBaseURL, APIKey: c.OpenAIAPIKey, Retry: c.Retry, Limits: c.Limits, HTTPClient: c.HTTPClient}
}
