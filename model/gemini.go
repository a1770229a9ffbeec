package model

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"

	"google.golang.org/genai"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/aip"
)

// GeminiConfig selects a Gemini backend: the Gemini API with a key, or
// Vertex AI with a project and location (credentials from Application
// Default Credentials).
type GeminiConfig struct {
	APIKey   string
	Project  string // Vertex AI
	Location string // Vertex AI
	// VertexAI selects Vertex AI even without Project (genai then reads
	// GOOGLE_CLOUD_PROJECT).
	VertexAI bool
	// BaseURL overrides the endpoint (tests point it at a fake server).
	BaseURL string
	Retry   RetryPolicy
	// Limits bound each call (zero fields: DefaultCallLimits).
	Limits CallLimits
	// HTTPClient is the base client; its transport is wrapped with retries
	// and the limits.
	HTTPClient *http.Client
}

// NewGeminiClient returns a genai client for cfg, whose requests are
// retried by cfg.Retry (genai's own retries stay off so that Retry-After is
// honoured) under cfg.Limits.
func NewGeminiClient(ctx context.Context, cfg GeminiConfig) (*genai.Client, error) {
	hc := newHTTPClient(cfg.HTTPClient, cfg.Retry, cfg.Limits)
	cc := &genai.ClientConfig{
		APIKey:      cfg.APIKey,
		Project:     cfg.Project,
		Location:    cfg.Location,
		HTTPClient:  hc,
		HTTPOptions: genai.HTTPOptions{BaseURL: cfg.BaseURL},
		Backend:     genai.BackendGeminiAPI,
	}
	if cfg.VertexAI || cfg.Project != "" {
		cc.Backend = genai.BackendVertexAI
		if cfg.APIKey == "" && cfg.BaseURL == "" {
			// Vertex AI authenticates with Application Default Credentials,
			// added around our retrying transport.
			if err := cc.UseDefaultCredentials(); err != nil {
				return nil, fault.Wrap(fault.FailedPrecondition, err, "Vertex AI needs Application Default Credentials (gcloud auth application-default login)")
			}
		}
	}
	c, err := genai.NewClient(ctx, cc)
	if err != nil {
		return nil, fault.Wrap(fault.FailedPrecondition, err, "configuring Gemini")
	}
	return c, nil
}

// Gemini is a Generator on a Gemini model.
type Gemini struct {
	Client *genai.Client
	Model  string // for example "gemini-2.5-flash"
}

// Name implements Generator.
func (g *Gemini) Name() string { return "gemini:" + g.Model }

// Generate implements Generator.
func (g *Gemini) Generate(ctx context.Context, r *GenerateRequest) (*GenerateResponse, error) {
	cfg := &genai.GenerateContentConfig{Temperature: r.Temperature}
	if r.System != "" {
		cfg.SystemInstruction = genai.NewContentFromText(r.System, genai.RoleUser)
	}
	if r.Schema != nil {
		m, err := schemaMap(r.Schema)
		if err != nil {
			return nil, err
		}
		cfg.ResponseMIMEType = "application/json"
		cfg.ResponseJsonSchema = m
	}
	var contents []*genai.Content
	for _, m := range r.Messages {
		role := genai.Role(genai.RoleUser)
		if m.Role == "model" {
			role = genai.RoleModel
		}
		contents = append(contents, genai.NewContentFromText(m.Text, role))
	}
	resp, err := g.GenerateContent(ctx, contents, cfg)
	if err != nil {
		return nil, err
	}
	out := &GenerateResponse{Text: resp.Text()}
	if u := resp.UsageMetadata; u != nil {
		out.PromptTokens, out.OutputTokens = int(u.PromptTokenCount), int(u.CandidatesTokenCount)
	}
	if out.Text == "" {
		reason := "no text"
		if len(resp.Candidates) > 0 && resp.Candidates[0].FinishReason != "" {
			reason = "finish reason " + string(resp.Candidates[0].FinishReason)
		} else if resp.PromptFeedback != nil && resp.PromptFeedback.BlockReason != "" {
			reason = "prompt blocked: " + string(resp.PromptFeedback.BlockReason)
		}
		return nil, fault.New(fault.Unavailable, "Gemini %s returned an empty reply (%s)", g.Model, reason)
	}
	return out, nil
}

// providerError classifies a provider's error: a passed call limit, rate
// limits and server errors (after retries), and failed connections are
// Unavailable (with the Retry-After that was not waited, see RetryPolicy),
// bad requests and permissions are FailedPrecondition (the configuration
// is wrong); the caller's own cancellation or deadline stays what it is.
func providerError(provider string, st *callState, err error) error {
	if f := asFault(err); f != nil {
		return fault.Wrap(fault.Unavailable, f, "calling %s", provider)
	}
	var apiErr genai.APIError
	if !errors.As(err, &apiErr) {
		if k := fault.KindOf(err); k == fault.Canceled || k == fault.DeadlineExceeded {
			return err
		}
		// The message may quote a whole reply (genai's decoding errors do).
		return fault.New(fault.Unavailable, "calling %s: %s", provider, aip.Truncate(err.Error(), 500))
	}
	switch {
	case apiErr.Code == http.StatusTooManyRequests || apiErr.Code >= 500:
		return st.withRetryDelay(fault.Wrap(fault.Unavailable, err, "%s is unavailable or rate limited (HTTP %d)", provider, apiErr.Code))
	case apiErr.Code == http.StatusUnauthorized || apiErr.Code == http.StatusForbidden:
		return fault.Wrap(fault.FailedPrecondition, err, "%s refused the credentials (HTTP %d)", provider, apiErr.Code)
	default:
		return fault.Wrap(fault.FailedPrecondition, err, "%s rejected the request (HTTP %d)", provider, apiErr.Code)
	}
}

// GeminiEmbedder is an Embedder on a Gemini embedding model.
type GeminiEmbedder struct {
	Client *genai.Client
	Model  string // for example "gemini-embedding-001"
	// Dims is the output dimensionality to ask for (at most 2048 to fit
	// Firestore's vector index).
	Dims int
}

// Name implements Embedder.
func (e *GeminiEmbedder) Name() string { return fmt.Sprintf("gemini:%s:%d", e.Model, e.Dims) }

// Dimensions implements Embedder.
func (e *GeminiEmbedder) Dimensions() int { return e.Dims }

// geminiBatch is the most texts per embedding request.
const geminiBatch = 100

// Embed implements Embedder. Vectors are normalised to unit length.
func (e *GeminiEmbedder) Embed(ctx context.Context, texts []string, task EmbedTask) ([][]float32, error) {
	taskType := "RETRIEVAL_DOCUMENT"
	if task == TaskQuery {
		taskType = "RETRIEVAL_QUERY"
	}
	dims := int32(e.Dims)
	out := make([][]float32, 0, len(texts))
	for start := 0; start < len(texts); start += geminiBatch {
		end := min(start+geminiBatch, len(texts))
		contents := make([]*genai.Content, 0, end-start)
		for _, t := range texts[start:end] {
			contents = append(contents, genai.NewContentFromText(t, genai.RoleUser))
		}
		cctx, st := startCall(withReplyLimit(ctx, embedReplyBytes(end-start, e.Dims)))
		resp, err := e.Client.Models.EmbedContent(cctx, e.Model, contents, &genai.EmbedContentConfig{TaskType: taskType, OutputDimensionality: &dims})
		if err != nil {
			return nil, providerError("Gemini embeddings "+e.Model, st, err)
		}
		if len(resp.Embeddings) != end-start {
			return nil, fault.New(fault.Unavailable, "Gemini embeddings returned %d vectors for %d texts", len(resp.Embeddings), end-start)
		}
		for _, emb := range resp.Embeddings {
			v, err := unitVector(emb.Values, e.Dims)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
	}
	return out, nil
}

// unitVector checks a provider's vector and scales it to unit length.
func unitVector(v []float32, dims int) ([]float32, error) {
	if len(v) != dims {
		return nil, fault.New(fault.Unavailable, "embedding has %d dimensions, want %d", len(v), dims)
	}
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	if s == 0 || math.IsNaN(s) || math.IsInf(s, 0) {
		return nil, fault.New(fault.Unavailable, "embedding is zero or not finite")
	}
	n := float32(1 / math.Sqrt(s))
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = x * n
	}
	return out, nil
}
