package model_test

import (
	"context"
	"encoding/json"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/genai"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/model"
	"github.com/kioku-ai/kioku/model/modeltest"
)

type answer struct {
	City  string `json:"city" jsonschema_description:"The city."`
	Count int    `json:"count"`
	Note  string `json:"note,omitempty"`
}

func TestSchemaForIsInlineAndStrict(t *testing.T) {
	s := model.SchemaFor(&answer{})
	b, _ := json.Marshal(s)
	got := string(b)
	for _, want := range []string{`"required":["city","count"]`, `"additionalProperties":false`, `"description":"The city."`} {
		if !strings.Contains(got, want) {
			t.Errorf("schema %s lacks %s", got, want)
		}
	}
	for _, bad := range []string{`$ref`, `$schema`, `$id`} {
		if strings.Contains(got, bad) {
			t.Errorf("schema %s has %s", got, bad)
		}
	}
}

func TestGeminiStructuredOutput(t *testing.T) {
	fake := modeltest.NewGemini(t)
	fake.ReplyText(`{"city":"Kyoto","count":3}`)
	g := &model.Gemini{Client: fake.Client(t), Model: "gemini-test"}
	resp, err := g.Generate(t.Context(), &model.GenerateRequest{
		System:   "be brief",
		Messages: []model.Message{{Role: "user", Text: "where?"}},
		Schema:   model.SchemaFor(&answer{}),
	})
	if err != nil {
		t.Fatal(err)
	}
	var a answer
	if err := json.Unmarshal([]byte(resp.Text), &a); err != nil || a.City != "Kyoto" {
		t.Fatalf("reply %q: %v", resp.Text, err)
	}
	if resp.PromptTokens != 10 || resp.OutputTokens != 5 {
		t.Fatalf("usage = %d/%d", resp.PromptTokens, resp.OutputTokens)
	}
	call := fake.Calls()[0]
	if call.Model != "gemini-test" || call.System != "be brief" || call.Text() != "where?" {
		t.Fatalf("request = %+v", call)
	}
	schema, _ := json.Marshal(call.Schema)
	if !strings.Contains(string(schema), `"city"`) {
		t.Fatalf("response schema not sent: %s", schema)
	}
	if mime := call.Raw["generationConfig"].(map[string]any)["responseMimeType"]; mime != "application/json" {
		t.Fatalf("responseMimeType = %v", mime)
	}
}

func TestGeminiRetriesHonouringRetryAfter(t *testing.T) {
	fake := modeltest.NewGemini(t)
	fake.Reply(modeltest.Reply{Status: 429, RetryAfter: "1"}, modeltest.Reply{Status: 503}, modeltest.Reply{Text: "ok"})
	g := &model.Gemini{Client: fake.Client(t), Model: "m"}
	start := time.Now()
	resp, err := g.Generate(t.Context(), &model.GenerateRequest{Messages: []model.Message{{Role: "user", Text: "hi"}}})
	if err != nil || resp.Text != "ok" {
		t.Fatalf("Generate after 429 and 503 = %v, %v", resp, err)
	}
	if len(fake.Calls()) != 3 {
		t.Fatalf("%d calls, want 3", len(fake.Calls()))
	}
	if waited := time.Since(start); waited < 900*time.Millisecond {
		t.Fatalf("waited %v; Retry-After asked for 1s", waited)
	}
}

func TestGeminiGivesUpWithUnavailable(t *testing.T) {
	fake := modeltest.NewGemini(t)
	for range 4 {
		fake.Reply(modeltest.Reply{Status: 500})
	}
	g := &model.Gemini{Client: fake.Client(t), Model: "m"}
	_, err := g.Generate(t.Context(), &model.GenerateRequest{Messages: []model.Message{{Role: "user", Text: "hi"}}})
	if fault.KindOf(err) != fault.Unavailable {
		t.Fatalf("error after exhausting retries = %v (%v), want Unavailable", err, fault.KindOf(err))
	}
	if n := len(fake.Calls()); n != modeltest.FastRetry.Attempts {
		t.Fatalf("%d attempts, want %d", n, modeltest.FastRetry.Attempts)
	}
}

func TestGeminiEmbedderBatchesAndNormalises(t *testing.T) {
	fake := modeltest.NewGemini(t)
	e := &model.GeminiEmbedder{Client: fake.Client(t), Model: "gemini-embedding-001", Dims: 64}
	texts := make([]string, 150)
	for i := range texts {
		texts[i] = "text number " + string(rune('a'+i%26))
	}
	vecs, err := e.Embed(t.Context(), texts, model.TaskDocument)
	if err != nil {
		t.Fatal(err)
	}
	if len(vecs) != 150 || len(vecs[0]) != 64 {
		t.Fatalf("got %d vectors of %d", len(vecs), len(vecs[0]))
	}
	if n := fake.EmbedRequests(); n != 2 {
		t.Fatalf("%d embedding requests for 150 texts, want 2 (batches of 100)", n)
	}
	if norm := l2(vecs[0]); math.Abs(norm-1) > 1e-5 {
		t.Fatalf("vector norm %v, want 1", norm)
	}
}

func TestOpenAIGenerateAndEmbed(t *testing.T) {
	fake := modeltest.NewOpenAI(t)
	fake.ReplyText("```json\n{\"city\":\"Osaka\",\"count\":1}\n```")
	g := model.NewOpenAI(fake.Config(), "llama3.1")
	resp, err := g.Generate(t.Context(), &model.GenerateRequest{System: "sys", Messages: []model.Message{{Role: "user", Text: "q"}}, Schema: model.SchemaFor(&answer{})})
	if err != nil || !strings.Contains(resp.Text, "Osaka") {
		t.Fatalf("Generate = %v, %v", resp, err)
	}
	call := fake.Calls()[0]
	if call.System != "sys" || call.Model != "llama3.1" || call.Schema == nil {
		t.Fatalf("request = %+v", call)
	}
	rf := call.Raw["response_format"].(map[string]any)
	if rf["type"] != "json_schema" || rf["json_schema"].(map[string]any)["strict"] != true {
		t.Fatalf("response_format = %v", rf)
	}
	e := model.NewOpenAIEmbedder(fake.Config(), "nomic-embed-text", 256)
	vecs, err := e.Embed(t.Context(), []string{"a", "b"}, model.TaskQuery)
	if err != nil || len(vecs) != 2 || len(vecs[1]) != 256 {
		t.Fatalf("Embed = %d vectors, %v", len(vecs), err)
	}
	bad := model.NewOpenAIEmbedder(fake.Config(), "nomic-embed-text", 300)
	if _, err := bad.Embed(t.Context(), []string{"a"}, model.TaskQuery); fault.KindOf(err) != fault.Unavailable || !strings.Contains(err.Error(), "dimensions") {
		t.Fatalf("embedding of the wrong size: %v", err)
	}
}

func TestOpenAIErrorsAreClassified(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.WriteHeader(http.StatusBadRequest)
		w.Write([]byte(`{"error":{"message":"model 'nope' not found"}}`))
	}))
	defer srv.Close()
	g := model.NewOpenAI(model.OpenAIConfig{BaseURL: srv.URL, Retry: modeltest.FastRetry}, "nope")
	_, err := g.Generate(context.Background(), &model.GenerateRequest{Messages: []model.Message{{Role: "user", Text: "q"}}})
	if fault.KindOf(err) != fault.FailedPrecondition || !strings.Contains(err.Error(), "model 'nope' not found") {
		t.Fatalf("400 error = %v", err)
	}
	if calls.Load() != 1 {
		t.Fatalf("a 400 was retried (%d calls)", calls.Load())
	}
}

func TestConfigBuild(t *testing.T) {
	t.Setenv("GEMINI_API_KEY", "")
	t.Setenv("GOOGLE_API_KEY", "")
	gen, emb, err := model.Config{}.Build(t.Context())
	if err != nil || !model.IsOfflineExtractor(gen) || emb.Name() != "kioku-offline-v4" {
		t.Fatalf("default config = %v, %v, %v; want the offline extractor and embedder", gen, emb, err)
	}
	if gen, _, err := (model.Config{Provider: "offline"}).Build(t.Context()); err != nil || !model.IsOfflineExtractor(gen) {
		t.Fatalf("--model-provider offline = %v, %v", gen, err)
	}
	if gen, _, err := (model.Config{Provider: "none"}).Build(t.Context()); err != nil || gen != nil {
		t.Fatalf("--model-provider none = %v, %v; want no generator", gen, err)
	}
	for _, p := range []string{"", "offline", "none"} {
		if _, err := (model.Config{Provider: p}).Chat(t.Context()); fault.KindOf(err) != fault.FailedPrecondition || !strings.Contains(err.Error(), "--model-provider gemini") {
			t.Errorf("Chat with provider %q: %v, want FailedPrecondition naming the settings", p, err)
		}
	}
	if _, _, err := (model.Config{Provider: "gpt"}).Build(t.Context()); fault.KindOf(err) != fault.Invalid || !strings.Contains(err.Error(), "offline, gemini, vertex, openai or none") {
		t.Errorf("an unknown provider: %v", err)
	}
	_, _, err = model.Config{Provider: "gemini"}.Build(t.Context())
	if fault.KindOf(err) != fault.FailedPrecondition || !strings.Contains(err.Error(), "GEMINI_API_KEY") {
		t.Fatalf("gemini without a key: %v", err)
	}
	_, _, err = model.Config{Provider: "openai"}.Build(t.Context())
	if fault.KindOf(err) != fault.Invalid || !strings.Contains(err.Error(), "--model") {
		t.Fatalf("openai without a model: %v", err)
	}
	fake := modeltest.NewGemini(t)
	gen, emb, err = model.Config{Provider: "gemini", GeminiAPIKey: "k", GeminiBaseURL: fake.URL, Embedder: "gemini", EmbedDims: 32}.Build(t.Context())
	if err != nil || gen.Name() != "gemini:gemini-2.5-flash" || emb.Dimensions() != 32 {
		t.Fatalf("gemini config = %v, %v, %v", gen, emb, err)
	}
}

func l2(v []float32) float64 {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	return math.Sqrt(s)
}

func dot(a, b []float32) float64 {
	var s float64
	for i := range a {
		s += float64(a[i]) * float64(b[i])
	}
	return s
}

func TestOfflineEmbedder(t *testing.T) {
	e := model.Offline{}
	q := func(s string) []float32 { return e.Vector(s, model.TaskQuery) }
	d := func(s string) []float32 { return e.Vector(s, model.TaskDocument) }
	// Deterministic, fixed size, unit queries.
	if a, b := q("I love green tea"), q("I love green tea"); dot(a, b) < 0.999 || len(a) != model.OfflineDimensions {
		t.Fatalf("not deterministic or wrong size")
	}
	if n := l2(q("hello world")); math.Abs(n-1) > 1e-5 {
		t.Fatalf("query norm %v", n)
	}
	// Inflections meet; unrelated texts do not.
	near := dot(q("She paints landscapes"), d("painting a landscape"))
	far := dot(q("She paints landscapes"), d("my dog likes the beach"))
	if near <= 0.3 || far > 0.05 {
		t.Fatalf("similar %v, unrelated %v", near, far)
	}
	// Japanese: character bigrams.
	jaNear := dot(q("緑茶が好きです"), d("私は緑茶が大好き"))
	jaFar := dot(q("緑茶が好きです"), d("明日は雨が降る"))
	if jaNear <= 0.3 || jaNear <= jaFar+0.2 {
		t.Fatalf("Japanese similar %v, unrelated %v", jaNear, jaFar)
	}
	// Stop words alone carry nothing.
	if n := l2(q("the and of to")); n != 0 {
		t.Fatalf("stop words embed to norm %v", n)
	}
}

// TestOpenAIChatCarriesToolCalls sends a conversation begun on Gemini (its
// function calls have no ids) to an OpenAI-compatible server: the calls get
// ids, the responses name the same ids, and the reply's tool calls come
// back as genai function calls.
func TestOpenAIChatCarriesToolCalls(t *testing.T) {
	fake := modeltest.NewOpenAI(t)
	fake.Reply(modeltest.Reply{Parts: []map[string]any{{"functionCall": map[string]any{"name": "weather", "args": map[string]any{"city": "Nara"}}}}})
	chat := model.NewOpenAI(fake.Config(), "llama3.1")
	contents := []*genai.Content{
		genai.NewContentFromText("Weather in Kyoto and Osaka?", genai.RoleUser),
		{Role: genai.RoleModel, Parts: []*genai.Part{
			{FunctionCall: &genai.FunctionCall{Name: "weather", Args: map[string]any{"city": "Kyoto"}}},
			{FunctionCall: &genai.FunctionCall{Name: "forecast", Args: map[string]any{"city": "Osaka"}}},
		}},
		{Role: genai.RoleUser, Parts: []*genai.Part{
			{FunctionResponse: &genai.FunctionResponse{Name: "weather", Response: map[string]any{"sky": "sunny"}}},
			{FunctionResponse: &genai.FunctionResponse{Name: "forecast", Response: map[string]any{"sky": "rain"}}},
		}},
		genai.NewContentFromText("And Nara?", genai.RoleUser),
	}
	cfg := &genai.GenerateContentConfig{
		SystemInstruction: genai.NewContentFromText("Be brief.", genai.RoleUser),
		Tools: []*genai.Tool{{FunctionDeclarations: []*genai.FunctionDeclaration{
			{Name: "weather", Description: "The weather.", ParametersJsonSchema: map[string]any{"type": "object"}},
		}}},
	}
	resp, err := chat.GenerateContent(t.Context(), contents, cfg)
	if err != nil {
		t.Fatal(err)
	}
	fc := resp.Candidates[0].Content.Parts[0].FunctionCall
	if fc == nil || fc.Name != "weather" || fc.Args["city"] != "Nara" || fc.ID == "" {
		t.Fatalf("reply = %+v", resp.Candidates[0].Content.Parts[0])
	}
	call := fake.Calls()[0]
	text := call.Text()
	for _, want := range []string{`call weather {"city":"Kyoto"}`, `call forecast {"city":"Osaka"}`, `response weather {"sky":"sunny"}`, `response forecast {"sky":"rain"}`, "And Nara?"} {
		if !strings.Contains(text, want) {
			t.Fatalf("the server saw %q, without %q", text, want)
		}
	}
	if call.System != "Be brief." || len(call.Tools) != 1 || call.Tools[0]["name"] != "weather" {
		t.Fatalf("system %q, tools %v", call.System, call.Tools)
	}
}

// provider is a generation model on a fake server, for the tests that run
// on both providers.
type provider struct {
	name  string
	reply func(...modeltest.Reply)
	calls func() int
	gen   model.Generator
}

// providers returns a Gemini and an OpenAI-compatible generator on fakes,
// their clients under limits.
func providers(t *testing.T, limits model.CallLimits) []provider {
	gf := modeltest.NewGemini(t)
	gc := gf.Config()
	gc.Limits = limits
	client, err := model.NewGeminiClient(t.Context(), gc)
	if err != nil {
		t.Fatal(err)
	}
	of := modeltest.NewOpenAI(t)
	oc := of.Config()
	oc.Limits = limits
	return []provider{
		{"gemini", gf.Reply, func() int { return len(gf.Calls()) }, &model.Gemini{Client: client, Model: "m"}},
		{"openai", of.Reply, func() int { return len(of.Calls()) }, model.NewOpenAI(oc, "m")},
	}
}

func generate(ctx context.Context, g model.Generator) (*model.GenerateResponse, error) {
	return g.Generate(ctx, &model.GenerateRequest{Messages: []model.Message{{Role: "user", Text: "hi"}}})
}

// TestHangingModelTimesOut: a model that never answers ends the call,
// retryable (Unavailable) and naming the limit it passed, when the first
// byte's timeout has passed on every try, or at the whole call's timeout,
// whichever comes first; the caller's own deadline stays its own.
func TestHangingModelTimesOut(t *testing.T) {
	for _, tc := range []struct {
		name   string
		limits model.CallLimits
		flag   string
		within time.Duration
	}{
		{"first byte", model.CallLimits{FirstByte: 100 * time.Millisecond, Reply: time.Minute}, "--model-first-byte-timeout", 10 * time.Second},
		{"whole reply", model.CallLimits{FirstByte: time.Minute, Reply: 300 * time.Millisecond}, "--model-timeout", 10 * time.Second},
	} {
		for _, p := range providers(t, tc.limits) {
			for range modeltest.FastRetry.Attempts {
				p.reply(modeltest.Reply{Hang: true})
			}
			start := time.Now()
			_, err := generate(t.Context(), p.gen)
			took := time.Since(start)
			if fault.KindOf(err) != fault.Unavailable || !strings.Contains(err.Error(), tc.flag) {
				t.Errorf("%s, %s: %v (%v), want Unavailable naming %s", tc.name, p.name, err, fault.KindOf(err), tc.flag)
			}
			if took > tc.within {
				t.Errorf("%s, %s: the call took %v", tc.name, p.name, took)
			}
			want := modeltest.FastRetry.Attempts
			if tc.flag == "--model-timeout" {
				want = 1 // the call's time is over during the first try
			}
			if n := p.calls(); n != want {
				t.Errorf("%s, %s: %d tries, want %d", tc.name, p.name, n, want)
			}
		}
	}
	// A caller's deadline shorter than the limits is the caller's.
	for _, p := range providers(t, model.CallLimits{}) {
		p.reply(modeltest.Reply{Hang: true})
		ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
		_, err := generate(ctx, p.gen)
		cancel()
		if fault.KindOf(err) != fault.DeadlineExceeded {
			t.Errorf("%s under the caller's deadline: %v (%v), want DeadlineExceeded", p.name, err, fault.KindOf(err))
		}
	}
}

// TestTricklingReplyIsCut: a reply that begins at once but whose body
// comes a byte at a time is cut at the whole call's timeout.
func TestTricklingReplyIsCut(t *testing.T) {
	for _, p := range providers(t, model.CallLimits{Reply: 400 * time.Millisecond}) {
		p.reply(modeltest.Reply{Text: `{"facts":[]}`, Trickle: 50 * time.Millisecond})
		start := time.Now()
		_, err := generate(t.Context(), p.gen)
		if fault.KindOf(err) != fault.Unavailable || !strings.Contains(err.Error(), "no complete reply within 400ms") {
			t.Errorf("%s: %v (%v), want Unavailable: no complete reply", p.name, err, fault.KindOf(err))
		}
		if took := time.Since(start); took > 10*time.Second {
			t.Errorf("%s: the call took %v", p.name, took)
		}
	}
}

// TestHugeReplyIsRefused: a reply past the byte limit is refused while it
// is read (chunked) or from its Content-Length, retryable and naming the
// limit, and not tried again within the call.
func TestHugeReplyIsRefused(t *testing.T) {
	huge := `{"facts":[` + strings.Repeat(`{"fact":"The user likes tea.","topic":"USER_PREFERENCES","events":[1]},`, 40000) + `]}`
	for _, p := range providers(t, model.CallLimits{}) {
		p.reply(modeltest.Reply{Text: huge})
		_, err := generate(t.Context(), p.gen)
		if fault.KindOf(err) != fault.Unavailable || !strings.Contains(err.Error(), "more than 1048576 bytes") || !strings.Contains(err.Error(), "--model-max-reply") {
			t.Errorf("%s: %v (%v), want Unavailable naming the limit", p.name, err, fault.KindOf(err))
		}
		if n := p.calls(); n != 1 {
			t.Errorf("%s: %d tries of a reply too large, want 1", p.name, n)
		}
	}
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Length", "5000000")
		w.WriteHeader(http.StatusOK)
		w.Write([]byte(`{"choices":[`))
	}))
	defer srv.Close()
	g := model.NewOpenAI(model.OpenAIConfig{BaseURL: srv.URL, Retry: modeltest.FastRetry, Limits: model.CallLimits{MaxReplyBytes: 4096}}, "m")
	_, err := generate(t.Context(), g)
	if fault.KindOf(err) != fault.Unavailable || !strings.Contains(err.Error(), "more than 4096 bytes") || calls.Load() != 1 {
		t.Errorf("a Content-Length over the limit: %v (%v), %d tries", err, fault.KindOf(err), calls.Load())
	}
}

// TestRateLimitsAndServerErrors: 429, 500 and 503, with and without
// Retry-After, are retried; a Retry-After within the cap (MaxDelay) is
// waited, a longer one ends the call at once with an error that carries
// it (for the operation engine).
func TestRateLimitsAndServerErrors(t *testing.T) {
	for _, p := range providers(t, model.CallLimits{}) {
		p.reply(modeltest.Reply{Status: 429}, modeltest.Reply{Status: 500}, modeltest.Reply{Status: 503, RetryAfter: "0.2"}, modeltest.Reply{Text: "ok"})
		start := time.Now()
		resp, err := generate(t.Context(), p.gen)
		if err != nil || resp.Text != "ok" || p.calls() != 4 {
			t.Fatalf("%s after 429, 500 and 503: %v, %v, %d tries", p.name, resp, err, p.calls())
		}
		if took := time.Since(start); took < 200*time.Millisecond {
			t.Errorf("%s: Retry-After 0.2 not waited (%v)", p.name, took)
		}
		// FastRetry's cap is 2s: a Retry-After of an hour is not waited.
		p.reply(modeltest.Reply{Status: 429, RetryAfter: "3600"})
		start = time.Now()
		_, err = generate(t.Context(), p.gen)
		if fault.KindOf(err) != fault.Unavailable || fault.RetryDelayOf(err) != time.Hour || p.calls() != 5 {
			t.Errorf("%s, Retry-After 3600: %v (%v, delay %v), %d tries; want Unavailable carrying 1h after one try", p.name, err, fault.KindOf(err), fault.RetryDelayOf(err), p.calls())
		}
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("%s waited %v for a Retry-After past the cap", p.name, took)
		}
		// Without Retry-After, a failure that lasts ends after the tries.
		for range modeltest.FastRetry.Attempts {
			p.reply(modeltest.Reply{Status: 503})
		}
		if _, err := generate(t.Context(), p.gen); fault.KindOf(err) != fault.Unavailable || fault.RetryDelayOf(err) != 0 || p.calls() != 5+modeltest.FastRetry.Attempts {
			t.Errorf("%s, lasting 503: %v, %d tries", p.name, err, p.calls())
		}
	}
}

// TestConnectTimeout: a server that accepts connections and never
// finishes the TLS handshake fails each try at the connect timeout.
func TestConnectTimeout(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
		}
	}()
	g := model.NewOpenAI(model.OpenAIConfig{
		BaseURL: "https://" + ln.Addr().String() + "/v1", Retry: model.RetryPolicy{Attempts: 2, BaseDelay: time.Millisecond, MaxDelay: time.Millisecond},
		Limits: model.CallLimits{Connect: 100 * time.Millisecond, Reply: time.Minute},
	}, "m")
	start := time.Now()
	_, err = generate(t.Context(), g)
	if fault.KindOf(err) != fault.Unavailable || !strings.Contains(err.Error(), "handshake timeout") {
		t.Errorf("a handshake that never ends: %v (%v)", err, fault.KindOf(err))
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("the call took %v", took)
	}
}
