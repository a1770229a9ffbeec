package model

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"google.golang.org/genai"

	"github.com/kioku-ai/kioku/fault"
)

// Chat holds a conversation with function calling, for the agent runtime.
// Its contents, config and response are genai's types whatever the
// provider: Gemini takes them as they are, an OpenAI-compatible server gets
// them translated to and from chat completions with tools.
//
// The parts of the config a Chat honours: SystemInstruction, Temperature,
// Tools (function declarations with ParametersJsonSchema or Parameters),
// ResponseMIMEType with ResponseJsonSchema.
type Chat interface {
	GenerateContent(ctx context.Context, contents []*genai.Content, cfg *genai.GenerateContentConfig) (*genai.GenerateContentResponse, error)
	// Name identifies the provider and model.
	Name() string
}

// GenerateContent implements Chat.
func (g *Gemini) GenerateContent(ctx context.Context, contents []*genai.Content, cfg *genai.GenerateContentConfig) (*genai.GenerateContentResponse, error) {
	ctx, st := startCall(ctx)
	resp, err := g.Client.Models.GenerateContent(ctx, g.Model, contents, cfg)
	if err != nil {
		return nil, providerError("Gemini "+g.Model, st, err)
	}
	return resp, nil
}

// OpenAI chat completions with tools, as far as kioku uses them.
type (
	toolChatMessage struct {
		Role       string         `json:"role"`
		Content    *string        `json:"content"`
		ToolCalls  []chatToolCall `json:"tool_calls,omitempty"`
		ToolCallID string         `json:"tool_call_id,omitempty"`
	}
	chatToolCall struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	}
	chatTool struct {
		Type     string       `json:"type"`
		Function chatFunction `json:"function"`
	}
	chatFunction struct {
		Name        string `json:"name"`
		Description string `json:"description,omitempty"`
		Parameters  any    `json:"parameters"`
	}
	toolChatRequest struct {
		Model          string            `json:"model"`
		Messages       []toolChatMessage `json:"messages"`
		Tools          []chatTool        `json:"tools,omitempty"`
		Temperature    *float32          `json:"temperature,omitempty"`
		ResponseFormat map[string]any    `json:"response_format,omitempty"`
	}
	toolChatResponse struct {
		Model   string `json:"model"`
		Choices []struct {
			Message struct {
				Content   *string        `json:"content"`
				ToolCalls []chatToolCall `json:"tool_calls"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage struct {
			PromptTokens     int32 `json:"prompt_tokens"`
			CompletionTokens int32 `json:"completion_tokens"`
			TotalTokens      int32 `json:"total_tokens"`
		} `json:"usage"`
	}
)

// GenerateContent implements Chat. Function calls without an id (a
// conversation that began on Gemini) get ids derived from their position,
// matched by the function responses of the next content in order.
func (o *OpenAI) GenerateContent(ctx context.Context, contents []*genai.Content, cfg *genai.GenerateContentConfig) (*genai.GenerateContentResponse, error) {
	if cfg == nil {
		cfg = &genai.GenerateContentConfig{}
	}
	req := toolChatRequest{Model: o.model, Temperature: cfg.Temperature}
	if si := textOf(cfg.SystemInstruction); si != "" {
		req.Messages = append(req.Messages, toolChatMessage{Role: "system", Content: &si})
	}
	var pending []string // ids of the previous content's calls, in order
	for ci, c := range contents {
		if c == nil {
			continue
		}
		if c.Role == genai.RoleModel {
			m := toolChatMessage{Role: "assistant"}
			pending = pending[:0]
			for pi, p := range c.Parts {
				if fc := p.FunctionCall; fc != nil {
					id := fc.ID
					if id == "" {
						id = fmt.Sprintf("call_%d_%d", ci, pi)
					}
					args, err := json.Marshal(fc.Args)
					if err != nil {
						return nil, fault.Wrap(fault.Invalid, err, "the arguments of the call to %s", fc.Name)
					}
					if fc.Args == nil {
						args = []byte("{}")
					}
					tc := chatToolCall{ID: id, Type: "function"}
					tc.Function.Name, tc.Function.Arguments = fc.Name, string(args)
					m.ToolCalls = append(m.ToolCalls, tc)
					pending = append(pending, id)
				}
			}
			if t := textOf(c); t != "" || len(m.ToolCalls) == 0 {
				m.Content = &t
			}
			req.Messages = append(req.Messages, m)
			continue
		}
		n := 0
		for _, p := range c.Parts {
			fr := p.FunctionResponse
			if fr == nil {
				continue
			}
			id := fr.ID
			if id == "" && n < len(pending) {
				id = pending[n]
			}
			n++
			body, err := json.Marshal(fr.Response)
			if err != nil {
				return nil, fault.Wrap(fault.Invalid, err, "the response of %s", fr.Name)
			}
			s := string(body)
			req.Messages = append(req.Messages, toolChatMessage{Role: "tool", ToolCallID: id, Content: &s})
		}
		if t := textOf(c); t != "" {
			req.Messages = append(req.Messages, toolChatMessage{Role: "user", Content: &t})
		}
	}
	for _, tool := range cfg.Tools {
		for _, d := range tool.FunctionDeclarations {
			params := d.ParametersJsonSchema
			if params == nil && d.Parameters != nil {
				params = d.Parameters
			}
			if params == nil {
				params = map[string]any{"type": "object", "properties": map[string]any{}}
			}
			req.Tools = append(req.Tools, chatTool{Type: "function", Function: chatFunction{Name: d.Name, Description: d.Description, Parameters: params}})
		}
	}
	if cfg.ResponseJsonSchema != nil {
		req.ResponseFormat = map[string]any{
			"type":        "json_schema",
			"json_schema": map[string]any{"name": "reply", "strict": true, "schema": cfg.ResponseJsonSchema},
		}
	} else if cfg.ResponseMIMEType == "application/json" {
		req.ResponseFormat = map[string]any{"type": "json_object"}
	}

	var resp toolChatResponse
	if err := o.c.post(ctx, "/chat/completions", req, &resp); err != nil {
		return nil, err
	}
	if len(resp.Choices) == 0 {
		return nil, fault.New(fault.Unavailable, "%s returned no choices", o.model)
	}
	ch := resp.Choices[0]
	content := &genai.Content{Role: genai.RoleModel}
	if ch.Message.Content != nil && *ch.Message.Content != "" {
		content.Parts = append(content.Parts, &genai.Part{Text: *ch.Message.Content})
	}
	for _, tc := range ch.Message.ToolCalls {
		var args map[string]any
		if strings.TrimSpace(tc.Function.Arguments) != "" {
			if err := json.Unmarshal([]byte(tc.Function.Arguments), &args); err != nil {
				// Sent back to the model as the call's arguments error.
				args = map[string]any{"_unparsed": tc.Function.Arguments}
			}
		}
		content.Parts = append(content.Parts, &genai.Part{FunctionCall: &genai.FunctionCall{ID: tc.ID, Name: tc.Function.Name, Args: args}})
	}
	if len(content.Parts) == 0 {
		return nil, fault.New(fault.Unavailable, "%s returned an empty reply (finish reason %s)", o.model, ch.FinishReason)
	}
	finish := genai.FinishReasonStop
	switch ch.FinishReason {
	case "length":
		finish = genai.FinishReasonMaxTokens
	case "content_filter":
		finish = genai.FinishReasonSafety
	}
	return &genai.GenerateContentResponse{
		ModelVersion: firstNonEmpty(resp.Model, o.model),
		Candidates:   []*genai.Candidate{{Content: content, FinishReason: finish}},
		UsageMetadata: &genai.GenerateContentResponseUsageMetadata{
			PromptTokenCount: resp.Usage.PromptTokens, CandidatesTokenCount: resp.Usage.CompletionTokens, TotalTokenCount: resp.Usage.TotalTokens,
		},
	}, nil
}

// textOf joins a content's text parts, leaving thoughts out.
func textOf(c *genai.Content) string {
	if c == nil {
		return ""
	}
	var b strings.Builder
	for _, p := range c.Parts {
		if p.Text != "" && !p.Thought {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}
