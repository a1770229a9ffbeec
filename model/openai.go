package model

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/aip"
)

// OpenAIConfig selects an OpenAI-compatible server: OpenAI itself, or a
// local Ollama (http://localhost:11434/v1), vLLM or llama.cpp server.
type OpenAIConfig struct {
	// BaseURL is the API root, ending in /v1 for most servers.
	BaseURL string
	// APIKey is sent as a bearer token when set.
	APIKey string
	Retry  RetryPolicy
	// Limits bound each call (zero fields: DefaultCallLimits).
	Limits CallLimits
	// HTTPClient is the base client; its transport is wrapped with retries
	// and the limits.
	HTTPClient *http.Client
}

// openAIClient speaks the OpenAI-compatible HTTP API.
type openAIClient struct {
	base, key string
	hc        *http.Client
}

func newOpenAIClient(cfg OpenAIConfig) *openAIClient {
	return &openAIClient{
		base: strings.TrimRight(cfg.BaseURL, "/"),
		key:  cfg.APIKey,
		hc:   newHTTPClient(cfg.HTTPClient, cfg.Retry, cfg.Limits),
	}
}

// post sends a JSON request and decodes a JSON response, under the call
// limits.
func (c *openAIClient) post(ctx context.Context, path string, in, out any) error {
	ctx, st := startCall(ctx)
	err := c.send(ctx, path, in, out)
	if f := asFault(err); f != nil {
		return fault.Wrap(fault.Unavailable, f, "calling %s%s", c.base, path)
	}
	if fault.Is(err, fault.Unavailable) {
		err = st.withRetryDelay(err)
	}
	return err
}

func (c *openAIClient) send(ctx context.Context, path string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+path, bytes.NewReader(body))
	if err != nil {
		return fault.Wrap(fault.FailedPrecondition, err, "OpenAI-compatible base URL %q", c.base)
	}
	req.Header.Set("Content-Type", "application/json")
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		if k := fault.KindOf(err); k == fault.Canceled || k == fault.DeadlineExceeded {
			return err
		}
		return fault.Wrap(fault.Unavailable, err, "calling %s%s", c.base, path)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body) // bounded by the call's limits
	if err != nil {
		return fault.Wrap(fault.Unavailable, err, "reading %s%s", c.base, path)
	}
	if resp.StatusCode != http.StatusOK {
		msg := strings.TrimSpace(string(data))
		var e struct {
			Error struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if json.Unmarshal(data, &e) == nil && e.Error.Message != "" {
			msg = e.Error.Message
		}
		kind := fault.FailedPrecondition
		if retryable(resp.StatusCode) {
			kind = fault.Unavailable
		}
		return fault.New(kind, "%s%s answered HTTP %d: %s", c.base, path, resp.StatusCode, aip.Truncate(msg, 500))
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fault.Wrap(fault.Unavailable, err, "%s%s answered with malformed JSON", c.base, path)
	}
	return nil
}

// OpenAI is a Generator on an OpenAI-compatible chat model.
type OpenAI struct {
	c     *openAIClient
	model string
}

// NewOpenAI returns a Generator for model on an OpenAI-compatible server.
func NewOpenAI(cfg OpenAIConfig, model string) *OpenAI {
	return &OpenAI{c: newOpenAIClient(cfg), model: model}
}

// Name implements Generator.
func (o *OpenAI) Name() string { return "openai:" + o.model }

type chatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type chatRequest struct {
	Model          string         `json:"model"`
	Messages       []chatMessage  `json:"messages"`
	Temperature    *float32       `json:"temperature,omitempty"`
	ResponseFormat map[string]any `json:"response_format,omitempty"`
}

type chatResponse struct {
	Choices []struct {
		Message struct {
			Content string `json:"content"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
}

// Generate implements Generator. A schema becomes a strict json_schema
// response format.
func (o *OpenAI) Generate(ctx context.Context, r *GenerateRequest) (*GenerateResponse, error) {
	req := chatRequest{Model: o.model, Temperature: r.Temperature}
	if r.System != "" {
		req.Messages = append(req.Messages, chatMessage{Role: "system", Content: r.System})
	}
	for _, m := range r.Messages {
		role := "user"
		if m.Role == "model" {
			role = "assistant"
		}
		req.Messages = append(req.Messages, chatMessage{Role: role, Content: m.Text})
	}
	if r.Schema != nil {
		m, err := schemaMap(r.Schema)
		if err != nil {
			return nil, err
		}
		req.ResponseFormat = map[string]any{
			"type":        "json_schema",
			"json_schema": map[string]any{"name": "reply", "strict": true, "schema": m},
		}
	}
	var resp chatResponse
	if err := o.c.post(ctx, "/chat/completions", req, &resp); err != nil {
		return nil, err
	}
	if len(resp.Choices) == 0 || resp.Choices[0].Message.Content == "" {
		reason := "no choices"
		if len(resp.Choices) > 0 {
			reason = "finish reason " + resp.Choices[0].FinishReason
		}
		return nil, fault.New(fault.Unavailable, "%s returned an empty reply (%s)", o.model, reason)
	}
	return &GenerateResponse{
		Text:         resp.Choices[0].Message.Content,
		PromptTokens: resp.Usage.PromptTokens,
		OutputTokens: resp.Usage.CompletionTokens,
	}, nil
}

// OpenAIEmbedder is an Embedder on an OpenAI-compatible embeddings model.
type OpenAIEmbedder struct {
	c     *openAIClient
	model string
	dims  int
}

// NewOpenAIEmbedder returns an Embedder for model, whose vectors have dims
// values.
func NewOpenAIEmbedder(cfg OpenAIConfig, model string, dims int) *OpenAIEmbedder {
	return &OpenAIEmbedder{c: newOpenAIClient(cfg), model: model, dims: dims}
}

// Name implements Embedder.
func (e *OpenAIEmbedder) Name() string { return fmt.Sprintf("openai:%s:%d", e.model, e.dims) }

// Dimensions implements Embedder.
func (e *OpenAIEmbedder) Dimensions() int { return e.dims }

// Embed implements Embedder. Vectors are normalised to unit length.
func (e *OpenAIEmbedder) Embed(ctx context.Context, texts []string, _ EmbedTask) ([][]float32, error) {
	const batch = 256
	out := make([][]float32, 0, len(texts))
	for start := 0; start < len(texts); start += batch {
		end := min(start+batch, len(texts))
		var resp struct {
			Data []struct {
				Index     int       `json:"index"`
				Embedding []float32 `json:"embedding"`
			} `json:"data"`
		}
		bctx := withReplyLimit(ctx, embedReplyBytes(end-start, e.dims))
		if err := e.c.post(bctx, "/embeddings", map[string]any{"model": e.model, "input": texts[start:end]}, &resp); err != nil {
			return nil, err
		}
		if len(resp.Data) != end-start {
			return nil, fault.New(fault.Unavailable, "%s returned %d embeddings for %d texts", e.model, len(resp.Data), end-start)
		}
		vecs := make([][]float32, end-start)
		for _, d := range resp.Data {
			if d.Index < 0 || d.Index >= len(vecs) {
				return nil, fault.New(fault.Unavailable, "%s returned an embedding for index %d of %d", e.model, d.Index, len(vecs))
			}
			v, err := unitVector(d.Embedding, e.dims)
			if err != nil {
				return nil, err
			}
			vecs[d.Index] = v
		}
		out = append(out, vecs...)
	}
	return out, nil
}
