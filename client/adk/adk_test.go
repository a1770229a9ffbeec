package adk_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/adk/v2/agent"
	"google.golang.org/adk/v2/agent/llmagent"
	"google.golang.org/adk/v2/memory"
	"google.golang.org/adk/v2/model"
	"google.golang.org/adk/v2/model/gemini"
	"google.golang.org/adk/v2/runner"
	"google.golang.org/adk/v2/session"
	"google.golang.org/adk/v2/session/sessiontestsuite"
	"google.golang.org/adk/v2/tool"
	"google.golang.org/adk/v2/tool/loadmemorytool"
	"google.golang.org/adk/v2/tool/preloadmemorytool"
	"google.golang.org/genai"

	"github.com/kioku-ai/kioku/client"
	"github.com/kioku-ai/kioku/client/adk"
	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/internal/node"
	"github.com/kioku-ai/kioku/internal/node/nodetest"
	"github.com/kioku-ai/kioku/model/modeltest"
	"github.com/kioku-ai/kioku/resource"
)

// startKioku serves a fresh kioku (embedded store) for one test; with a
// fake Gemini, memory generation uses it. tune changes the configuration.
func startKioku(t *testing.T, fake *modeltest.Gemini, tune ...func(*node.Config)) *client.Client {
	t.Helper()
	var cfg node.Config
	if fake != nil {
		cfg.Models = nodetest.Gemini(fake)
	}
	for _, f := range tune {
		f(&cfg)
	}
	_, url := nodetest.ServeH2C(t, cfg)
	return client.New(url)
}

// TestADKSessionServiceSuite runs ADK's own conformance suite against
// kioku.
func TestADKSessionServiceSuite(t *testing.T) {
	sessiontestsuite.RunServiceTests(t, sessiontestsuite.SuiteOptions{SupportsUserProvidedSessionID: true}, func(t *testing.T) session.Service {
		return adk.NewSessionService(startKioku(t, nil))
	})
}

// TestGetPagesALargeSession: a session with more events than one
// GetSession returns reaches ADK whole, read page by page, and the most
// recent N of it too.
func TestGetPagesALargeSession(t *testing.T) {
	c := startKioku(t, nil, func(cfg *node.Config) { cfg.SessionLimits.MaxReadBytes = 32 << 10 })
	svc := adk.NewSessionService(c)
	ctx := t.Context()
	created, err := svc.Create(ctx, &session.CreateRequest{AppName: "a", UserID: "u", SessionID: "long"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		e := session.NewEvent(ctx, "inv")
		e.Author = "user"
		e.Content = genai.NewContentFromText(fmt.Sprint(i, strings.Repeat(".", 2<<10)), genai.RoleUser)
		e.Actions.StateDelta = map[string]any{"turn": float64(i)}
		if err := svc.AppendEvent(ctx, created.Session, e); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.GetSession(ctx, &kiokuv1.GetSessionRequest{Name: resource.SessionName("a", "u", "long")}); connect.CodeOf(err) != connect.CodeFailedPrecondition {
		t.Fatalf("GetSession of 80 KiB of events with a 32 KiB budget: %v, want FAILED_PRECONDITION", err)
	}
	for _, c := range []struct{ recent, want, first int }{{0, 40, 0}, {25, 25, 15}, {3, 3, 37}} {
		got, err := svc.Get(ctx, &session.GetRequest{AppName: "a", UserID: "u", SessionID: "long", NumRecentEvents: c.recent})
		if err != nil {
			t.Fatalf("Get(recent %d): %v", c.recent, err)
		}
		events := got.Session.Events()
		if events.Len() != c.want || !strings.HasPrefix(events.At(0).Content.Parts[0].Text, fmt.Sprint(c.first, ".")) {
			t.Fatalf("Get(recent %d): %d events from %q, want %d from %d", c.recent, events.Len(), events.At(0).Content.Parts[0].Text[:4], c.want, c.first)
		}
		if turn, err := got.Session.State().Get("turn"); err != nil || turn != float64(39) {
			t.Fatalf("Get(recent %d): state turn = %v, %v", c.recent, turn, err)
		}
	}
}

// TestEventFieldsRoundTrip stores an event with every field ADK has and
// reads it back equal.
func TestEventFieldsRoundTrip(t *testing.T) {
	svc := adk.NewSessionService(startKioku(t, nil))
	ctx := t.Context()
	created, err := svc.Create(ctx, &session.CreateRequest{AppName: "a", UserID: "u", SessionID: "s"})
	if err != nil {
		t.Fatal(err)
	}
	e := &session.Event{
		ID: "e1", InvocationID: "inv", Author: "helper", Branch: "root.helper", IsolationScope: "scope",
		Timestamp: time.Date(2026, 2, 3, 4, 5, 6, 7000, time.UTC),
		Actions: session.EventActions{
			StateDelta: map[string]any{"k": "v", "user:n": 2.0}, ArtifactDelta: map[string]int64{"f.png": 3},
			TransferToAgent: "other", Escalate: true, SkipSummarization: true,
		},
		LongRunningToolIDs: []string{"call-1"},
		Routes:             []string{"next"},
		Output:             map[string]any{"answer": 42.0},
		NodeInfo:           &session.NodeInfo{Path: "wf/step@1", MessageAsOutput: true},
		LLMResponse: model.LLMResponse{
			Content: &genai.Content{Role: "model", Parts: []*genai.Part{
				{Text: "let me think", Thought: true, ThoughtSignature: []byte("sig")},
				{InlineData: &genai.Blob{MIMEType: "image/png", Data: []byte{1, 2, 3}}},
				{FileData: &genai.FileData{MIMEType: "application/pdf", FileURI: "gs://b/o.pdf"}},
				{FunctionCall: &genai.FunctionCall{ID: "call-1", Name: "lookup", Args: map[string]any{"q": "tea"}}},
				{FunctionResponse: &genai.FunctionResponse{ID: "call-1", Name: "lookup", Response: map[string]any{"ok": true}, WillContinue: new(true)}},
				{ExecutableCode: &genai.ExecutableCode{Code: "print(1)", Language: genai.LanguagePython}},
			}},
			GroundingMetadata:  &genai.GroundingMetadata{WebSearchQueries: []string{"q"}},
			UsageMetadata:      &genai.GenerateContentResponseUsageMetadata{PromptTokenCount: 3, CandidatesTokenCount: 4, TotalTokenCount: 7},
			CitationMetadata:   &genai.CitationMetadata{Citations: []*genai.Citation{{Title: "t", URI: "https://x"}}},
			CustomMetadata:     map[string]any{"trace": "abc"},
			InputTranscription: &genai.Transcription{Text: "heard", Finished: true},
			ModelVersion:       "gemini-x",
			TurnComplete:       true,
			Interrupted:        true,
			ErrorCode:          "E",
			ErrorMessage:       "message",
			FinishReason:       genai.FinishReasonStop,
			AvgLogprobs:        -0.5,
		},
	}
	if err := svc.AppendEvent(ctx, created.Session, e); err != nil {
		t.Fatal(err)
	}
	got, err := svc.Get(ctx, &session.GetRequest{AppName: "a", UserID: "u", SessionID: "s"})
	if err != nil {
		t.Fatal(err)
	}
	if got.Session.Events().Len() != 1 {
		t.Fatalf("%d events", got.Session.Events().Len())
	}
	if diff := cmp.Diff(e, got.Session.Events().At(0)); diff != "" {
		t.Fatalf("event after a round trip (-stored +read):\n%s", diff)
	}
	// The session passed to AppendEvent sees the delta at once.
	if v, _ := created.Session.State().Get("user:n"); v != 2.0 {
		t.Fatalf("local state user:n = %v", v)
	}
}

// TestADKRunnerRemembersAcrossSessions runs an ADK llmagent through ADK's
// runner with kioku as session and memory service, ADK's preload_memory and
// load_memory tools, and a fake Gemini endpoint (for the agent and for
// kioku's memory generation): a fact told in one session is answered in
// the next.
func TestADKRunnerRemembersAcrossSessions(t *testing.T) {
	fake := modeltest.NewGemini(t)
	c := startKioku(t, fake)
	ctx := t.Context()

	llm, err := gemini.NewModel(ctx, "gemini-test", &genai.ClientConfig{APIKey: "k", HTTPOptions: genai.HTTPOptions{BaseURL: fake.URL}})
	if err != nil {
		t.Fatal(err)
	}
	a, err := llmagent.New(llmagent.Config{
		Name:        "companion",
		Model:       llm,
		Instruction: "You are a friendly companion.",
		Tools:       []tool.Tool{preloadmemorytool.New(), loadmemorytool.New()},
	})
	if err != nil {
		t.Fatal(err)
	}
	sessions := adk.NewSessionService(c)
	memories := adk.NewMemoryService(c, adk.WithWait(true), adk.WithTopK(3))
	r, err := runner.New(runner.Config{AppName: "companion", Agent: a, SessionService: sessions, MemoryService: memories})
	if err != nil {
		t.Fatal(err)
	}
	say := func(sessionID, text string) string {
		t.Helper()
		var reply string
		for ev, err := range r.Run(ctx, "alice", sessionID, genai.NewContentFromText(text, genai.RoleUser), agent.RunConfig{}) {
			if err != nil {
				t.Fatalf("run: %v", err)
			}
			if ev.Content != nil && ev.IsFinalResponse() {
				for _, p := range ev.Content.Parts {
					reply += p.Text
				}
			}
		}
		return reply
	}

	// Session 1: the user tells a fact; kioku extracts it.
	for _, id := range []string{"day1", "day2"} {
		if _, err := sessions.Create(ctx, &session.CreateRequest{AppName: "companion", UserID: "alice", SessionID: id}); err != nil {
			t.Fatal(err)
		}
	}
	fake.ReplyText("How lovely!")
	if got := say("day1", "My favourite colour is teal."); got != "How lovely!" {
		t.Fatalf("reply in session 1 = %q", got)
	}
	fake.ReplyText(`{"facts":[{"fact":"Alice's favourite colour is teal.","topic":"USER_PREFERENCES","events":[1]}]}`)
	day1, err := sessions.Get(ctx, &session.GetRequest{AppName: "companion", UserID: "alice", SessionID: "day1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := memories.AddSessionToMemory(ctx, day1.Session); err != nil {
		t.Fatalf("AddSessionToMemory: %v", err)
	}
	extraction := fake.Calls()[len(fake.Calls())-1]
	if !strings.Contains(extraction.Text(), "My favourite colour is teal.") {
		t.Fatalf("kioku's extraction did not see session 1: %q", extraction.Text())
	}

	// Session 2: the memory is preloaded; the model also searches with load_memory.
	fake.Reply(modeltest.Reply{Parts: []map[string]any{{"functionCall": map[string]any{"name": "load_memory", "args": map[string]any{"query": "favourite colour"}}}}})
	fake.SetResponder(func(call modeltest.Call) modeltest.Reply {
		if strings.Contains(call.Text(), "teal") {
			return modeltest.Reply{Text: "Your favourite colour is teal."}
		}
		return modeltest.Reply{Text: "I don't know."}
	})
	before := len(fake.Calls())
	if got := say("day2", "What is my favourite colour?"); got != "Your favourite colour is teal." {
		t.Fatalf("reply in session 2 = %q", got)
	}
	calls := fake.Calls()[before:]
	if len(calls) != 2 {
		t.Fatalf("%d model calls in session 2, want 2 (load_memory, then the answer)", len(calls))
	}
	if !strings.Contains(calls[0].System, "Alice's favourite colour is teal.") {
		t.Fatalf("preload_memory did not put the memory in the instruction: %q", calls[0].System)
	}
	if !strings.Contains(calls[1].Text(), "response load_memory") || !strings.Contains(calls[1].Text(), "teal") {
		t.Fatalf("load_memory's result did not reach the model: %q", calls[1].Text())
	}

	// Memories stay in their app and with their user.
	for _, req := range []struct{ app, user string }{{"other-app", "alice"}, {"companion", "bob"}} {
		res, err := memories.SearchMemory(ctx, &memory.SearchRequest{Query: "favourite colour", AppName: req.app, UserID: req.user})
		if err != nil || len(res.Memories) != 0 {
			t.Fatalf("search in %s for %s = %v, %v", req.app, req.user, res, err)
		}
	}
	// The events of session 2 are in kioku, tool call and result included.
	day2, _ := sessions.Get(ctx, &session.GetRequest{AppName: "companion", UserID: "alice", SessionID: "day2"})
	var authors []string
	for e := range day2.Session.Events().All() {
		authors = append(authors, fmt.Sprintf("%s:%v", e.Author, e.Content != nil))
	}
	if len(authors) != 4 {
		t.Fatalf("session 2 holds %v; want the user message, the call, the result and the answer", authors)
	}
}

// TestCompaction: an ADK Python compaction (kept in custom metadata, as ADK
// Python writes it to Vertex AI) round-trips; a kioku compaction reads as
// the compacted view, with the compaction in ADK Python's form too.
func TestCompaction(t *testing.T) {
	fake := modeltest.NewGemini(t)
	fake.SetResponder(func(modeltest.Call) modeltest.Reply { return modeltest.Reply{Text: "Ann told five things."} })
	c := startKioku(t, fake)
	svc := adk.NewSessionService(c)
	ctx := t.Context()
	created, err := svc.Create(ctx, &session.CreateRequest{AppName: "a", UserID: "ann", SessionID: "s"})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 2, 3, 4, 5, 6, 0, time.UTC)
	for i := range 7 {
		e := &session.Event{ID: fmt.Sprint("e", i), InvocationID: "inv", Author: "user", Timestamp: at.Add(time.Duration(i) * time.Minute),
			LLMResponse: model.LLMResponse{Content: genai.NewContentFromText(fmt.Sprint("thing ", i), "user")}}
		if err := svc.AppendEvent(ctx, created.Session, e); err != nil {
			t.Fatal(err)
		}
	}
	python := &session.Event{ID: "py", InvocationID: "inv", Author: "user", Timestamp: at.Add(time.Hour),
		LLMResponse: model.LLMResponse{CustomMetadata: map[string]any{"_compaction": map[string]any{
			"start_timestamp": 1.7e9, "end_timestamp": 1.7e9 + 60,
			"compacted_content": map[string]any{"role": "model", "parts": []any{map[string]any{"text": "Python's summary."}}},
		}}}}
	if err := svc.AppendEvent(ctx, created.Session, python); err != nil {
		t.Fatal(err)
	}
	got, err := svc.Get(ctx, &session.GetRequest{AppName: "a", UserID: "ann", SessionID: "s"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(python, got.Session.Events().At(7)); diff != "" {
		t.Fatalf("ADK Python's compaction after a round trip (-stored +read):\n%s", diff)
	}

	op, err := c.CompactSession(ctx, &kiokuv1.CompactSessionRequest{Name: resource.SessionName("a", "ann", "s"), KeepRecentEvents: 3})
	if err != nil {
		t.Fatal(err)
	}
	if done, err := c.WaitOperation(ctx, op.GetName()); err != nil || done.GetError() != nil {
		t.Fatalf("compaction: %v, %v", done, err)
	}
	got, err = svc.Get(ctx, &session.GetRequest{AppName: "a", UserID: "ann", SessionID: "s"})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for e := range got.Session.Events().All() {
		ids = append(ids, e.ID)
	}
	if strings.Join(ids, ",") != "kioku-compaction-5,e5,e6,py" {
		t.Fatalf("compacted view through ADK: %v", ids)
	}
	summary := got.Session.Events().At(0)
	if summary.Author != "kioku" || summary.Content.Parts[0].Text != "Ann told five things." {
		t.Fatalf("compaction through ADK: %+v", summary)
	}
	want := map[string]any{
		"start_timestamp": float64(at.Unix()), "end_timestamp": float64(at.Add(4 * time.Minute).Unix()),
		"compacted_content": map[string]any{"role": "model", "parts": []any{map[string]any{"text": "Ann told five things."}}},
	}
	if diff := cmp.Diff(want, summary.CustomMetadata["_compaction"]); diff != "" {
		t.Fatalf("the compaction in ADK Python's form (-want +got):\n%s", diff)
	}
	full, err := adk.NewSessionService(c, adk.WithFullHistory()).Get(ctx, &session.GetRequest{AppName: "a", UserID: "ann", SessionID: "s"})
	if err != nil || full.Session.Events().Len() != 9 {
		t.Fatalf("full history: %v, %v", full, err)
	}
}
