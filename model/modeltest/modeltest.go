// Package modeltest fakes model providers at the HTTP level for tests: an
// httptest server that speaks the Gemini API (generateContent and
// batchEmbedContents) and one that speaks the OpenAI-compatible API
// (chat/completions and embeddings). The code under test uses the real
// clients (google.golang.org/genai, package model's OpenAI client) pointed
// at them, so requests and replies go through the real wire formats.
//
// Replies to generation calls are scripted: queue them with Reply, or set a
// Responder that answers from the request. A reply can also be a fault of
// the provider's: an HTTP error with or without Retry-After (Reply.Status,
// RetryAfter), no answer at all (Hang), a body that trickles (Trickle), or
// any text, however large or off its schema. Embeddings are deterministic and
// dense, like a real model's (scripted.Vector): texts that share words get
// similar vectors, and so do texts whose words are scripted.Synonyms, which
// the offline embedder cannot see, so that tests can tell the two sides of
// hybrid retrieval apart.
package modeltest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/genai"

	"github.com/kioku-ai/kioku/model"
	"github.com/kioku-ai/kioku/model/scripted"
)

// Reply, Call and Message are package scripted's: the Gemini fake is a
// scripted.Gemini, and the OpenAI fake decodes and answers the same way.
type (
	// Reply is one scripted answer to a generation call.
	Reply = scripted.Reply
	// Call is a generation request the fake received.
	Call = scripted.Call
	// Message is a content's role and text.
	Message = scripted.Message
)

// fake is what both servers share.
type fake struct {
	// stop ends the calls that hang or trickle when the fake stops.
	stop      chan struct{}
	mu        sync.Mutex
	script    []Reply
	calls     []Call
	embedReqs int
	embedded  []string
	responder func(Call) Reply
}

// Reply queues replies, answered in order.
func (f *fake) Reply(r ...Reply) {
	f.mu.Lock()
	f.script = append(f.script, r...)
	f.mu.Unlock()
}

// ReplyText queues text replies.
func (f *fake) ReplyText(texts ...string) {
	for _, t := range texts {
		f.Reply(Reply{Text: t})
	}
}

// ReplyJSON queues a reply whose text is v in JSON.
func (f *fake) ReplyJSON(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	f.Reply(Reply{Text: string(b)})
}

// SetResponder answers the calls the script does not.
func (f *fake) SetResponder(r func(Call) Reply) {
	f.mu.Lock()
	f.responder = r
	f.mu.Unlock()
}

// Calls returns the generation calls received so far.
func (f *fake) Calls() []Call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Call(nil), f.calls...)
}

// EmbedRequests returns how many embedding requests were received.
func (f *fake) EmbedRequests() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.embedReqs
}

// EmbeddedTexts returns the texts of the embedding requests received so
// far, in order.
func (f *fake) EmbeddedTexts() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.embedded...)
}

// next records a call and returns its reply. A responder runs without the
// fake's lock held, so it may block (to hold calls in flight).
func (f *fake) next(c Call) (Reply, error) {
	f.mu.Lock()
	f.calls = append(f.calls, c)
	n := len(f.calls)
	if len(f.script) > 0 {
		r := f.script[0]
		f.script = f.script[1:]
		f.mu.Unlock()
		return r, nil
	}
	responder := f.responder
	f.mu.Unlock()
	if responder != nil {
		return responder(c), nil
	}
	return Reply{}, fmt.Errorf("modeltest: unexpected generation call %d (no reply scripted): %.300s", n, c.Text())
}

// answer records a call and returns its reply; when the reply is a
// scripted failure or hangs (or none was scripted) it answers so and
// returns false.
func (f *fake) answer(w http.ResponseWriter, r *http.Request, c Call) (Reply, bool) {
	reply, err := f.next(c)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return Reply{}, false
	}
	if reply.Hang {
		scripted.Hang(r, f.stop)
		return Reply{}, false
	}
	if reply.Status != 0 && reply.Status != http.StatusOK {
		scripted.WriteFailure(w, reply)
		return Reply{}, false
	}
	return reply, true
}

// Pending returns how many scripted replies are still queued.
func (f *fake) Pending() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.script)
}

// Vector returns the fake embedding of a text with dims values
// (scripted.Vector).
func Vector(text string, dims int) []float32 { return scripted.Vector(text, dims) }

// Gemini is a fake Gemini API.
type Gemini struct {
	fake
	URL string
}

// NewGemini starts a fake Gemini API; it stops when the test ends.
func NewGemini(t testing.TB) *Gemini {
	g, stop := StartGemini()
	t.Cleanup(stop)
	return g
}

// StartGemini starts a fake Gemini API outside a test (for benchmarks) and
// returns the function that stops it.
func StartGemini() (*Gemini, func()) {
	g := &Gemini{fake: fake{stop: make(chan struct{})}}
	srv := httptest.NewServer(&scripted.Gemini{Respond: g.next, Embedded: g.countEmbed, Stop: g.stop})
	g.URL = srv.URL
	return g, g.stopWith(srv)
}

// stopWith returns the function that stops the fake and its server.
func (f *fake) stopWith(srv *httptest.Server) func() {
	return func() {
		close(f.stop)
		srv.Close()
	}
}

// Client returns a real genai client for the fake, with fast retries.
func (g *Gemini) Client(t testing.TB) *genai.Client {
	t.Helper()
	c, err := model.NewGeminiClient(context.Background(), g.Config())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Config returns the GeminiConfig that points at the fake.
func (g *Gemini) Config() model.GeminiConfig {
	return model.GeminiConfig{APIKey: "test-key", BaseURL: g.URL, Retry: FastRetry}
}

// FastRetry retries quickly, for tests.
var FastRetry = model.RetryPolicy{Attempts: 4, BaseDelay: 5 * time.Millisecond, MaxDelay: 2 * time.Second}

// countEmbed records an embedding request.
func (f *fake) countEmbed(texts []string) {
	f.mu.Lock()
	f.embedReqs++
	f.embedded = append(f.embedded, texts...)
	f.mu.Unlock()
}

// OpenAI is a fake OpenAI-compatible API.
type OpenAI struct {
	fake
	// URL is the API root (ending in /v1).
	URL string
	// Dims is the size of the embeddings it returns. Default 256.
	Dims int
}

// NewOpenAI starts a fake OpenAI-compatible server; it stops when the test
// ends.
func NewOpenAI(t testing.TB) *OpenAI {
	o := &OpenAI{fake: fake{stop: make(chan struct{})}, Dims: 256}
	srv := httptest.NewServer(http.HandlerFunc(o.serve))
	t.Cleanup(o.stopWith(srv))
	o.URL = srv.URL + "/v1"
	return o
}

// Config returns the OpenAIConfig that points at the fake.
func (o *OpenAI) Config() model.OpenAIConfig {
	return model.OpenAIConfig{BaseURL: o.URL, APIKey: "test-key", Retry: FastRetry}
}

func (o *OpenAI) serve(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer test-key" {
		http.Error(w, `{"error":{"message":"bad key"}}`, http.StatusUnauthorized)
		return
	}
	body, _ := io.ReadAll(r.Body)
	var req map[string]any
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, "bad json", http.StatusBadRequest)
		return
	}
	switch r.URL.Path {
	case "/v1/chat/completions":
		o.chat(w, r, req)
	case "/v1/embeddings":
		o.embeddings(w, req)
	default:
		http.NotFound(w, r)
	}
}

func (o *OpenAI) chat(w http.ResponseWriter, r *http.Request, req map[string]any) {
	c := Call{Raw: req}
	c.Model, _ = req["model"].(string)
	msgs, _ := req["messages"].([]any)
	callNames := map[string]any{} // tool call id → function name
	for _, m := range msgs {
		mm, _ := m.(map[string]any)
		role, _ := mm["role"].(string)
		text, _ := mm["content"].(string)
		switch role {
		case "system":
			c.System = text
			continue
		case "tool":
			id, _ := mm["tool_call_id"].(string)
			text = fmt.Sprintf("response %v %s", callNames[id], text)
		}
		var lines []string
		if text != "" {
			lines = append(lines, text)
		}
		calls, _ := mm["tool_calls"].([]any)
		for _, tc := range calls {
			tcm, _ := tc.(map[string]any)
			fn, _ := tcm["function"].(map[string]any)
			id, _ := tcm["id"].(string)
			callNames[id] = fn["name"]
			lines = append(lines, fmt.Sprintf("call %v %v", fn["name"], fn["arguments"]))
		}
		c.Messages = append(c.Messages, Message{Role: role, Text: strings.Join(lines, "\n")})
	}
	if rf, ok := req["response_format"].(map[string]any); ok {
		if js, ok := rf["json_schema"].(map[string]any); ok {
			c.Schema = js["schema"]
		}
	}
	tools, _ := req["tools"].([]any)
	for _, t := range tools {
		tm, _ := t.(map[string]any)
		if fn, ok := tm["function"].(map[string]any); ok {
			c.Tools = append(c.Tools, fn)
		}
	}
	reply, ok := o.answer(w, r, c)
	if !ok {
		return
	}
	msg := map[string]any{"role": "assistant", "content": reply.Text}
	finish := "stop"
	var toolCalls []any
	for i, p := range reply.Parts {
		if t, ok := p["text"].(string); ok {
			msg["content"] = t
		}
		fc, ok := p["functionCall"].(map[string]any)
		if !ok {
			continue
		}
		args, _ := json.Marshal(fc["args"])
		toolCalls = append(toolCalls, map[string]any{
			"id": fmt.Sprintf("call_%d_%d", len(c.Messages), i), "type": "function",
			"function": map[string]any{"name": fc["name"], "arguments": string(args)},
		})
	}
	if toolCalls != nil {
		msg["tool_calls"] = toolCalls
		finish = "tool_calls"
		if msg["content"] == "" {
			msg["content"] = nil
		}
	}
	scripted.WriteJSON(w, r, reply, map[string]any{
		"id": "chatcmpl-1", "object": "chat.completion", "model": c.Model,
		"choices": []any{map[string]any{"index": 0, "finish_reason": finish, "message": msg}},
		"usage":   map[string]any{"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
	}, o.stop)
}

func (o *OpenAI) embeddings(w http.ResponseWriter, req map[string]any) {
	var inputs []string
	switch in := req["input"].(type) {
	case string:
		inputs = []string{in}
	case []any:
		for _, x := range in {
			s, _ := x.(string)
			inputs = append(inputs, s)
		}
	}
	o.countEmbed(inputs)
	var data []any
	for i, text := range inputs {
		data = append(data, map[string]any{"object": "embedding", "index": i, "embedding": Vector(text, o.Dims)})
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": data, "model": req["model"]})
}
