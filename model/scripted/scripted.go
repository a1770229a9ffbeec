// Package scripted serves the Gemini API's generation and embedding methods
// over HTTP, answering from a Go function, so that the real genai client,
// and everything kioku builds on it, runs against scripted answers through
// the real wire format. The companion demo's offline mode plays Hana with
// it (cmd/companion, --model-provider demo), and the fakes of package
// modeltest are built on it.
//
// Gemini decodes each generateContent request into a Call (the system
// instruction, the messages as text, the response schema, the tools
// offered) and encodes the Reply its function returns; batchEmbedContents
// answers with Vector of each text, deterministic vectors under which
// similar texts are close.
package scripted

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"strings"
	"time"
	"unicode"

	"github.com/kioku-ai/kioku/model"
)

// Reply is one scripted answer to a generation call.
type Reply struct {
	// Text is the reply's text (for structured output, the JSON).
	Text string
	// Parts, when set, are the reply's parts as raw Gemini JSON objects
	// (for function calls), instead of Text. The OpenAI fake of modeltest
	// turns functionCall parts into tool_calls.
	Parts []map[string]any
	// Status, when not 0 or 200, makes the call fail with this HTTP status
	// and an error body; RetryAfter is sent as the Retry-After header.
	Status     int
	RetryAfter string
	// Hang, when set, answers nothing: the call waits until its client
	// gives up or the server stops (a model that never answers).
	Hang bool
	// Trickle, when set, sends the reply's status and headers at once and
	// then its body one byte every Trickle (a model whose reply never
	// seems to end).
	Trickle time.Duration
}

// FunctionCall returns a reply that calls the function name with args.
func FunctionCall(name string, args map[string]any) Reply {
	return Reply{Parts: []map[string]any{{"functionCall": map[string]any{"name": name, "args": args}}}}
}

// Call is a generation request as the responder sees it.
type Call struct {
	Model string
	// System is the system instruction's text.
	System string
	// Messages are the texts of the contents, in order, with their roles.
	Messages []Message
	// Schema is the response JSON schema asked for, if any.
	Schema any
	// Tools are the function declarations offered, if any (as the
	// provider's JSON objects: name, description and parameters).
	Tools []map[string]any
	// Raw is the whole request body.
	Raw map[string]any
}

// Message is a content's role and text (function calls and responses are
// rendered as "call NAME ARGS" and "response NAME RESULT").
type Message struct {
	Role string
	Text string
}

// Text returns the texts of all messages, joined with newlines.
func (c Call) Text() string {
	var parts []string
	for _, m := range c.Messages {
		parts = append(parts, m.Text)
	}
	return strings.Join(parts, "\n")
}

// Gemini is an http.Handler that speaks the Gemini API at any base URL:
// POST .../models/{model}:generateContent and :batchEmbedContents.
type Gemini struct {
	// Respond answers a generation call; an error is answered with status
	// 500 and its text. Required.
	Respond func(Call) (Reply, error)
	// Embedded, when set, is called for each embedding request with the
	// texts to embed.
	Embedded func(texts []string)
	// Stop, when set, ends the calls that hang (Reply.Hang) or trickle
	// once it is closed, so that the server can stop.
	Stop <-chan struct{}
}

// ServeHTTP answers one request.
func (g *Gemini) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	var req map[string]any
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, "bad json", http.StatusBadRequest)
		return
	}
	path := r.URL.Path
	model := path[strings.LastIndex(path, "/")+1:]
	model, method, _ := strings.Cut(model, ":")
	switch method {
	case "generateContent":
		g.generate(w, r, model, req)
	case "batchEmbedContents":
		if g.Embedded != nil {
			var texts []string
			reqs, _ := req["requests"].([]any)
			for _, r := range reqs {
				rm, _ := r.(map[string]any)
				_, text := textsOf(rm["content"])
				texts = append(texts, text)
			}
			g.Embedded(texts)
		}
		embed(w, req)
	default:
		http.Error(w, "unknown method "+method, http.StatusNotFound)
	}
}

// Serve serves h on a loopback port until stop is called, and returns its
// base URL (http://127.0.0.1:PORT), for a model.Config's GeminiBaseURL. It
// is what programs (kioku-bench memories) use instead of an httptest
// server, so that they link no test code.
func Serve(h http.Handler) (url string, stop func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, fmt.Errorf("serving the scripted model: %w", err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	return "http://" + ln.Addr().String(), func() { srv.Close() }, nil
}

// WriteFailure answers with a reply's scripted failure (Status and
// RetryAfter) in the shape of a Google API error.
func WriteFailure(w http.ResponseWriter, r Reply) {
	if r.RetryAfter != "" {
		w.Header().Set("Retry-After", r.RetryAfter)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(r.Status)
	fmt.Fprintf(w, `{"error":{"code":%d,"message":"scripted failure","status":"UNAVAILABLE"}}`, r.Status)
}

func textsOf(content any) (role string, text string) {
	m, _ := content.(map[string]any)
	role, _ = m["role"].(string)
	parts, _ := m["parts"].([]any)
	var out []string
	for _, p := range parts {
		pm, _ := p.(map[string]any)
		if t, ok := pm["text"].(string); ok {
			out = append(out, t)
		}
		if fc, ok := pm["functionCall"].(map[string]any); ok {
			args, _ := json.Marshal(fc["args"])
			out = append(out, fmt.Sprintf("call %v %s", fc["name"], args))
		}
		if fr, ok := pm["functionResponse"].(map[string]any); ok {
			resp, _ := json.Marshal(fr["response"])
			out = append(out, fmt.Sprintf("response %v %s", fr["name"], resp))
		}
	}
	return role, strings.Join(out, "\n")
}

func (g *Gemini) generate(w http.ResponseWriter, r *http.Request, model string, req map[string]any) {
	c := Call{Model: model, Raw: req}
	if si, ok := req["systemInstruction"]; ok {
		_, c.System = textsOf(si)
	}
	contents, _ := req["contents"].([]any)
	for _, ct := range contents {
		role, text := textsOf(ct)
		c.Messages = append(c.Messages, Message{Role: role, Text: text})
	}
	if gc, ok := req["generationConfig"].(map[string]any); ok {
		c.Schema = gc["responseJsonSchema"]
		if c.Schema == nil {
			c.Schema = gc["responseSchema"]
		}
	}
	if tools, ok := req["tools"].([]any); ok {
		for _, t := range tools {
			tm, _ := t.(map[string]any)
			decls, _ := tm["functionDeclarations"].([]any)
			for _, d := range decls {
				if dm, ok := d.(map[string]any); ok {
					c.Tools = append(c.Tools, dm)
				}
			}
		}
	}
	reply, err := g.Respond(c)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if reply.Hang {
		Hang(r, g.Stop)
		return
	}
	if reply.Status != 0 && reply.Status != http.StatusOK {
		WriteFailure(w, reply)
		return
	}
	parts := reply.Parts
	if parts == nil {
		parts = []map[string]any{{"text": reply.Text}}
	}
	resp := map[string]any{
		"candidates": []any{map[string]any{
			"content":      map[string]any{"role": "model", "parts": parts},
			"finishReason": "STOP",
			"index":        0,
		}},
		"usageMetadata": map[string]any{"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15},
		"modelVersion":  model,
	}
	WriteJSON(w, r, reply, resp, g.Stop)
}

// Hang waits until the client of r gives up or stop is closed (a nil stop
// never is): the answer of a model that never answers.
func Hang(r *http.Request, stop <-chan struct{}) {
	select {
	case <-r.Context().Done():
	case <-stop:
	}
}

// WriteJSON answers a call with v in JSON, all at once, or a byte at a
// time when the reply trickles (Reply.Trickle: until the body is written,
// the client gives up or stop is closed).
func WriteJSON(w http.ResponseWriter, r *http.Request, reply Reply, v any, stop <-chan struct{}) {
	body, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if reply.Trickle <= 0 {
		w.Write(body)
		return
	}
	flusher, _ := w.(http.Flusher)
	for _, b := range body {
		if _, err := w.Write([]byte{b}); err != nil {
			return
		}
		if flusher != nil {
			flusher.Flush()
		}
		t := time.NewTimer(reply.Trickle)
		select {
		case <-r.Context().Done():
		case <-stop:
		case <-t.C:
		}
		t.Stop()
		if r.Context().Err() != nil || closed(stop) {
			return
		}
	}
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func embed(w http.ResponseWriter, req map[string]any) {
	reqs, _ := req["requests"].([]any)
	var embs []any
	for _, r := range reqs {
		rm, _ := r.(map[string]any)
		_, text := textsOf(rm["content"])
		dims := 768
		if d, ok := rm["outputDimensionality"].(float64); ok && d > 0 {
			dims = int(d)
		}
		embs = append(embs, map[string]any{"values": Vector(text, dims)})
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"embeddings": embs})
}

// Synonyms are the groups of words the scripted embedder treats as one.
var Synonyms = [][]string{
	{"car", "automobile", "vehicle", "sedan"},
	{"doctor", "physician"},
	{"sea", "ocean"},
}

var synonymOf = func() map[string]string {
	m := map[string]string{}
	for _, g := range Synonyms {
		for _, w := range g[1:] {
			m[w] = g[0]
		}
	}
	return m
}()

// Vector returns the scripted embedding of a text with dims values, dense
// like a real model's: the words of each group of Synonyms become the
// group's first (the scripted model knows that an automobile is a car, as
// a real one does and the offline embedder does not), then each feature of
// the text (model.OfflineTerms) adds its weight times a pseudo-random ±1
// vector of its own, and the sum is scaled to unit length. Every value is
// non-zero, so that no coordinate is rarer than another; texts that share
// features get similar vectors, and texts that share none nearly
// orthogonal ones (a cosine of the order of 1/√dims).
func Vector(text string, dims int) []float32 {
	words := strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '\'' })
	for i, w := range words {
		if s, ok := synonymOf[w]; ok {
			words[i] = s
		}
	}
	acc := make([]float64, dims)
	for _, t := range model.OfflineTerms(strings.Join(words, " ")) {
		x := uint64(t.ID)
		for i := range acc {
			// splitmix64: a pseudo-random stream seeded by the feature.
			x += 0x9e3779b97f4a7c15
			z := (x ^ x>>30) * 0xbf58476d1ce4e5b9
			z = (z ^ z>>27) * 0x94d049bb133111eb
			if (z^z>>31)&1 == 1 {
				acc[i] += float64(t.Weight)
			} else {
				acc[i] -= float64(t.Weight)
			}
		}
	}
	out := make([]float32, dims)
	var s float64
	for _, a := range acc {
		s += a * a
	}
	if s == 0 {
		out[0] = 1
		return out
	}
	for i, a := range acc {
		out[i] = float32(a / math.Sqrt(s))
		if out[i] == 0 {
			out[i] = 1e-6
		}
	}
	return out
}
