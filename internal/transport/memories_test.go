package transport_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/kioku-ai/kioku/client"
	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/gen/kioku/v1/kiokuv1connect"
	"github.com/kioku-ai/kioku/internal/node"
	"github.com/kioku-ai/kioku/internal/node/nodetest"
	"github.com/kioku-ai/kioku/model"
	"github.com/kioku-ai/kioku/model/modeltest"
)

type clients struct {
	sessions kiokuv1connect.SessionServiceClient
	memories kiokuv1connect.MemoryBankServiceClient
	ops      kiokuv1connect.OperationServiceClient
	url      string
}

// startNode runs a whole kioku (SQLite store, memory bank workers) with a
// fake Gemini behind the real genai client (withModel), or with no
// generation model at all (--model-provider none), served over HTTP/2.
func startNode(t *testing.T, withModel bool, options ...func(*node.Config)) (*clients, *modeltest.Gemini) {
	t.Helper()
	fake := modeltest.NewGemini(t)
	cfg := node.Config{
		DataDir: t.TempDir(),
		Logger:  quietLog(),
	}
	cfg.Models = model.Config{Provider: "none"}
	if withModel {
		cfg.Models = model.Config{Provider: "gemini", GeminiAPIKey: "k", GeminiBaseURL: fake.URL, Retry: modeltest.FastRetry}
	}
	for _, o := range options {
		o(&cfg)
	}
	_, url := serveNode(t, func(c *node.Config) { *c = cfg })
	hc := h2cClient()
	return &clients{
		sessions: kiokuv1connect.NewSessionServiceClient(hc, url, connect.WithProtoJSON()),
		memories: kiokuv1connect.NewMemoryBankServiceClient(hc, url, connect.WithProtoJSON()),
		ops:      kiokuv1connect.NewOperationServiceClient(hc, url, connect.WithProtoJSON()),
		url:      url,
	}, fake
}

func req[T any](m *T) *connect.Request[T] { return connect.NewRequest(m) }

func wait(t *testing.T, c *clients, op *kiokuv1.Operation) *kiokuv1.Operation {
	t.Helper()
	res, err := c.ops.WaitOperation(t.Context(), req(&kiokuv1.WaitOperationRequest{Name: op.GetName(), Timeout: durationpb.New(20 * time.Second)}))
	if err != nil {
		t.Fatal(err)
	}
	if !res.Msg.GetDone() {
		t.Fatalf("operation %s not done after 20s: %v", op.GetName(), res.Msg)
	}
	return res.Msg
}

func TestMemoryRoundTripOverConnect(t *testing.T) {
	c, fake := startNode(t, true)
	ctx := t.Context()
	scope := map[string]string{"user_id": "ann"}

	created, err := c.memories.CreateMemory(ctx, req(&kiokuv1.CreateMemoryRequest{
		Parent: "apps/demo",
		Memory: &kiokuv1.Memory{Fact: "Ann prefers green tea.", Scope: scope, Topics: []string{"USER_PREFERENCES"}},
	}))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(created.Msg.GetName(), "apps/demo/memories/") || created.Msg.GetRevisionId() != "1" {
		t.Fatalf("created %v", created.Msg)
	}
	got, err := c.memories.RetrieveMemories(ctx, req(&kiokuv1.RetrieveMemoriesRequest{
		Parent: "apps/demo", Scope: scope,
		Method: &kiokuv1.RetrieveMemoriesRequest_SimilaritySearch{SimilaritySearch: &kiokuv1.SimilaritySearch{Query: "what tea?", TopK: 5}},
	}))
	if err != nil || len(got.Msg.GetRetrievedMemories()) != 1 || got.Msg.GetRetrievedMemories()[0].GetDistance() >= 1 {
		t.Fatalf("RetrieveMemories = %v, %v", got, err)
	}

	// Generate from a session: extraction and consolidation through the
	// fake model, then wait on the operation.
	if _, err := c.sessions.CreateSession(ctx, req(&kiokuv1.CreateSessionRequest{Parent: "apps/demo/users/ann", SessionId: "s1"})); err != nil {
		t.Fatal(err)
	}
	for i, text := range []string{"I moved to Sapporo last month.", "Also I now prefer black tea."} {
		if _, err := c.sessions.AppendEvent(ctx, req(&kiokuv1.AppendEventRequest{
			Name:  "apps/demo/users/ann/sessions/s1",
			Event: &kiokuv1.Event{Id: "e" + string(rune('1'+i)), Author: "user", Content: &kiokuv1.Content{Role: "user", Parts: []*kiokuv1.Part{{Text: text}}}},
		})); err != nil {
			t.Fatal(err)
		}
	}
	fake.ReplyText(`{"facts":[{"fact":"Ann moved to Sapporo last month.","topic":"USER_PERSONAL_INFO","events":[1]},{"fact":"Ann prefers black tea.","topic":"USER_PREFERENCES","events":[2]}]}`)
	fake.SetResponder(func(call modeltest.Call) modeltest.Reply {
		return modeltest.Reply{Text: `{"actions":[{"candidate":1,"action":"CREATE","memory":0,"fact":"Ann moved to Sapporo last month."},{"candidate":2,"action":"UPDATE","memory":1,"fact":"Ann prefers black tea (she used to prefer green tea)."}]}`}
	})
	op, err := c.memories.GenerateMemories(ctx, req(&kiokuv1.GenerateMemoriesRequest{
		Parent: "apps/demo",
		Source: &kiokuv1.GenerateMemoriesRequest_SessionSource{SessionSource: &kiokuv1.SessionSource{Session: "apps/demo/users/ann/sessions/s1"}},
	}))
	if err != nil {
		t.Fatal(err)
	}
	if op.Msg.GetDone() || !strings.HasPrefix(op.Msg.GetName(), "apps/demo/operations/") {
		t.Fatalf("GenerateMemories returned %v", op.Msg)
	}
	done := wait(t, c, op.Msg)
	if done.GetError() != nil {
		t.Fatalf("operation failed: %v", done.GetError())
	}
	var resp kiokuv1.GenerateMemoriesResponse
	if err := done.GetResponse().UnmarshalTo(&resp); err != nil {
		t.Fatal(err)
	}
	if len(resp.GetGeneratedMemories()) != 2 {
		t.Fatalf("generated %v", resp.GetGeneratedMemories())
	}
	var md kiokuv1.OperationMetadata
	if err := done.GetMetadata().UnmarshalTo(&md); err != nil || md.GetModelCalls() != 2 || md.GetState() != kiokuv1.OperationState_OPERATION_STATE_SUCCEEDED {
		t.Fatalf("metadata = %v, %v", &md, err)
	}
	// The JSON shape docs/concepts.md shows (A memory round trip).
	js, _ := protojson.Marshal(done)
	for _, want := range []string{`"done":true`, `"generatedMemories"`, `"action":"MEMORY_ACTION_UPDATED"`, `"@type":"type.googleapis.com/kioku.v1.GenerateMemoriesResponse"`} {
		if !strings.Contains(string(js), want) {
			t.Fatalf("operation JSON %s lacks %s", js, want)
		}
	}

	// Revisions of the updated memory, and a rollback by revision name.
	revs, err := c.memories.ListMemoryRevisions(ctx, req(&kiokuv1.ListMemoryRevisionsRequest{Parent: created.Msg.GetName()}))
	if err != nil || len(revs.Msg.GetMemoryRevisions()) != 2 || revs.Msg.GetMemoryRevisions()[0].GetExtractedFacts() == nil {
		t.Fatalf("revisions = %v, %v", revs, err)
	}
	back, err := c.memories.RollbackMemory(ctx, req(&kiokuv1.RollbackMemoryRequest{Name: created.Msg.GetName(), TargetRevisionId: created.Msg.GetName() + "/revisions/1"}))
	if err != nil || back.Msg.GetFact() != "Ann prefers green tea." || back.Msg.GetRevisionId() != "3" {
		t.Fatalf("rollback = %v, %v", back, err)
	}

	// Operations listed by state.
	list, err := c.ops.ListOperations(ctx, req(&kiokuv1.ListOperationsRequest{Parent: "apps/demo", Filter: "state = SUCCEEDED"}))
	if err != nil || len(list.Msg.GetOperations()) != 1 {
		t.Fatalf("ListOperations = %v, %v", list, err)
	}
	_, err = c.ops.ListOperations(ctx, req(&kiokuv1.ListOperationsRequest{Parent: "apps/demo", Filter: "state = DANCING"}))
	if connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Fatalf("bad filter: %v", err)
	}

	// Config round trip with a mask.
	cfg, err := c.memories.UpdateMemoryBankConfig(ctx, req(&kiokuv1.UpdateMemoryBankConfigRequest{
		MemoryBankConfig: &kiokuv1.MemoryBankConfig{Name: "apps/demo/memoryBankConfig", CustomTopics: []*kiokuv1.CustomMemoryTopic{{Label: "TRAVEL", Description: "Trips."}}},
		UpdateMask:       &fieldmaskpb.FieldMask{Paths: []string{"custom_topics"}},
	}))
	if err != nil || len(cfg.Msg.GetCustomTopics()) != 1 {
		t.Fatalf("UpdateMemoryBankConfig = %v, %v", cfg, err)
	}
	fusion := &kiokuv1.FusionConfig{Method: kiokuv1.FusionMethod_FUSION_METHOD_WEIGHTED, DenseWeight: 0.3, LexicalWeight: 0.7, RrfK: 20}
	cfg, err = c.memories.UpdateMemoryBankConfig(ctx, req(&kiokuv1.UpdateMemoryBankConfigRequest{
		MemoryBankConfig: &kiokuv1.MemoryBankConfig{Name: "apps/demo/memoryBankConfig", Retrieval: &kiokuv1.RetrievalConfig{Fusion: fusion}},
		UpdateMask:       &fieldmaskpb.FieldMask{Paths: []string{"retrieval"}},
	}))
	if err != nil || !proto.Equal(cfg.Msg.GetRetrieval().GetFusion(), fusion) || len(cfg.Msg.GetCustomTopics()) != 1 {
		t.Fatalf("UpdateMemoryBankConfig(retrieval) = %v, %v", cfg, err)
	}
	_, err = c.memories.UpdateMemoryBankConfig(ctx, req(&kiokuv1.UpdateMemoryBankConfigRequest{
		MemoryBankConfig: &kiokuv1.MemoryBankConfig{Name: "apps/demo/memoryBankConfig", Retrieval: &kiokuv1.RetrievalConfig{Fusion: &kiokuv1.FusionConfig{RrfK: 5000}}},
		UpdateMask:       &fieldmaskpb.FieldMask{Paths: []string{"retrieval"}},
	}))
	if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), "retrieval.fusion.rrf_k") {
		t.Fatalf("rrf_k out of range: %v", err)
	}

	// forget_memories on DeleteSession removes what only s1 supported.
	if _, err := c.sessions.DeleteSession(ctx, req(&kiokuv1.DeleteSessionRequest{Name: "apps/demo/users/ann/sessions/s1", ForgetMemories: true})); err != nil {
		t.Fatal(err)
	}
	left, _ := c.memories.ListMemories(ctx, req(&kiokuv1.ListMemoriesRequest{Parent: "apps/demo"}))
	for _, m := range left.Msg.GetMemories() {
		if strings.Contains(m.GetFact(), "Sapporo") {
			t.Fatalf("memory derived only from the deleted session survived: %v", m)
		}
	}
}

func TestMemoryErrorsOverConnect(t *testing.T) {
	c, _ := startNode(t, false)
	ctx := t.Context()
	for _, tc := range []struct {
		name string
		call func() error
		code connect.Code
		msg  string
	}{
		{"generate from a session without a model", func() error {
			_, err := c.memories.GenerateMemories(ctx, req(&kiokuv1.GenerateMemoriesRequest{Parent: "apps/demo",
				Source: &kiokuv1.GenerateMemoriesRequest_SessionSource{SessionSource: &kiokuv1.SessionSource{Session: "apps/demo/users/u/sessions/s"}}}))
			return err
		}, connect.CodeFailedPrecondition, "GEMINI_API_KEY"},
		{"bad parent", func() error {
			_, err := c.memories.CreateMemory(ctx, req(&kiokuv1.CreateMemoryRequest{Parent: "demo", Memory: &kiokuv1.Memory{Fact: "x"}}))
			return err
		}, connect.CodeInvalidArgument, "apps/{app}"},
		{"missing scope", func() error {
			_, err := c.memories.CreateMemory(ctx, req(&kiokuv1.CreateMemoryRequest{Parent: "apps/demo", Memory: &kiokuv1.Memory{Fact: "x"}}))
			return err
		}, connect.CodeInvalidArgument, "memory.scope"},
		{"unknown memory", func() error {
			_, err := c.memories.GetMemory(ctx, req(&kiokuv1.GetMemoryRequest{Name: "apps/demo/memories/nope"}))
			return err
		}, connect.CodeNotFound, "not found"},
		{"too many facts", func() error {
			var facts []*kiokuv1.DirectMemory
			for range 101 {
				facts = append(facts, &kiokuv1.DirectMemory{Fact: "f"})
			}
			_, err := c.memories.GenerateMemories(ctx, req(&kiokuv1.GenerateMemoriesRequest{Parent: "apps/demo", Scope: map[string]string{"user_id": "u"},
				Source: &kiokuv1.GenerateMemoriesRequest_DirectMemoriesSource{DirectMemoriesSource: &kiokuv1.DirectMemoriesSource{Memories: facts}}}))
			return err
		}, connect.CodeResourceExhausted, "limit is 100"},
		{"wait on an unknown operation", func() error {
			_, err := c.ops.WaitOperation(ctx, req(&kiokuv1.WaitOperationRequest{Name: "apps/demo/operations/nope"}))
			return err
		}, connect.CodeNotFound, "not found"},
	} {
		err := tc.call()
		if connect.CodeOf(err) != tc.code || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: %v, want %v with %q", tc.name, err, tc.code, tc.msg)
		}
	}
	// Direct facts work without a model; the same fact twice is one memory,
	// and the second generation says which memory held it already.
	var results []*kiokuv1.GeneratedMemory
	for range 2 {
		op, err := c.memories.GenerateMemories(ctx, req(&kiokuv1.GenerateMemoriesRequest{Parent: "apps/demo", Scope: map[string]string{"user_id": "u"},
			Source: &kiokuv1.GenerateMemoriesRequest_DirectMemoriesSource{DirectMemoriesSource: &kiokuv1.DirectMemoriesSource{Memories: []*kiokuv1.DirectMemory{{Fact: "The user is left-handed."}}}}}))
		if err != nil {
			t.Fatal(err)
		}
		done := wait(t, c, op.Msg)
		if done.GetError() != nil {
			t.Fatalf("direct facts failed: %v", done.GetError())
		}
		var res kiokuv1.GenerateMemoriesResponse
		if err := done.GetResponse().UnmarshalTo(&res); err != nil || len(res.GetGeneratedMemories()) != 1 {
			t.Fatalf("generation result %v (%v), want one memory", &res, err)
		}
		results = append(results, res.GetGeneratedMemories()[0])
	}
	if results[0].GetAction() != kiokuv1.MemoryAction_MEMORY_ACTION_CREATED || results[1].GetAction() != kiokuv1.MemoryAction_MEMORY_ACTION_UNCHANGED ||
		results[1].GetMemory().GetName() != results[0].GetMemory().GetName() || results[1].GetMemory().GetFact() != "The user is left-handed." {
		t.Fatalf("the same fact twice: %v then %v, want CREATED then UNCHANGED of the same memory", results[0], results[1])
	}
	list, _ := c.memories.ListMemories(ctx, req(&kiokuv1.ListMemoriesRequest{Parent: "apps/demo"}))
	if len(list.Msg.GetMemories()) != 1 {
		t.Fatalf("the same direct fact twice gave %d memories", len(list.Msg.GetMemories()))
	}
}

// TestGenerateWithOpenAICompatible runs generation and retrieval on an
// OpenAI-compatible server (as Ollama or vLLM would be), for both the
// model and the embeddings.
func TestGenerateWithOpenAICompatible(t *testing.T) {
	fake := modeltest.NewOpenAI(t)
	_, url := nodetest.Serve(t, node.Config{Models: model.Config{
		Provider: "openai", Model: "llama3.1", Embedder: "openai", EmbedModel: "nomic-embed-text", EmbedDims: fake.Dims,
		OpenAIBaseURL: fake.URL, OpenAIAPIKey: "test-key", Retry: modeltest.FastRetry,
	}})
	mc := kiokuv1connect.NewMemoryBankServiceClient(http.DefaultClient, url)
	oc := kiokuv1connect.NewOperationServiceClient(http.DefaultClient, url)
	ctx := t.Context()
	fake.ReplyText(`{"facts":[{"fact":"The user keeps bees.","topic":"USER_PERSONAL_INFO","events":[1]}]}`)
	op, err := mc.GenerateMemories(ctx, req(&kiokuv1.GenerateMemoriesRequest{
		Parent: "apps/demo", Scope: map[string]string{"user_id": "u"},
		Source: &kiokuv1.GenerateMemoriesRequest_EventsSource{EventsSource: &kiokuv1.EventsSource{Events: []*kiokuv1.Event{
			{Author: "user", Content: &kiokuv1.Content{Role: "user", Parts: []*kiokuv1.Part{{Text: "My bees made honey this year."}}}},
		}}},
	}))
	if err != nil {
		t.Fatal(err)
	}
	done, err := oc.WaitOperation(ctx, req(&kiokuv1.WaitOperationRequest{Name: op.Msg.GetName(), Timeout: durationpb.New(20 * time.Second)}))
	if err != nil || done.Msg.GetError() != nil || !done.Msg.GetDone() {
		t.Fatalf("operation = %v, %v", done, err)
	}
	if call := fake.Calls()[0]; call.Model != "llama3.1" || !strings.Contains(call.Text(), "My bees made honey") || call.Schema == nil {
		t.Fatalf("extraction request = %+v", call)
	}
	res, err := mc.RetrieveMemories(ctx, req(&kiokuv1.RetrieveMemoriesRequest{Parent: "apps/demo", Scope: map[string]string{"user_id": "u"},
		Method: &kiokuv1.RetrieveMemoriesRequest_SimilaritySearch{SimilaritySearch: &kiokuv1.SimilaritySearch{Query: "does the user keep bees?"}}}))
	if err != nil || len(res.Msg.GetRetrievedMemories()) != 1 {
		t.Fatalf("retrieval = %v, %v", res, err)
	}
	if fake.EmbedRequests() < 2 {
		t.Fatalf("embeddings did not go to the OpenAI-compatible server (%d requests)", fake.EmbedRequests())
	}
}

// TestFarFutureExpiryRefused: an expire_time or ttl past the times kioku
// stores is INVALID_ARGUMENT naming the field and the range, on memories,
// the memory bank's configuration and sessions alike, and changes nothing;
// the latest storable expiry works and keeps the memory visible.
func TestFarFutureExpiryRefused(t *testing.T) {
	c, _ := startNode(t, false)
	ctx := t.Context()
	scope := map[string]string{"user_id": "u"}
	farTime := timestamppb.New(time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC))
	want := func(what string, err error, msgs ...string) {
		t.Helper()
		if connect.CodeOf(err) != connect.CodeInvalidArgument {
			t.Fatalf("%s: %v, want INVALID_ARGUMENT", what, err)
		}
		for _, m := range msgs {
			if !strings.Contains(err.Error(), m) {
				t.Fatalf("%s: %v, want it to say %q", what, err, m)
			}
		}
	}
	create := func(id string, m *kiokuv1.Memory) error {
		m.Fact, m.Scope = "Likes tea.", scope
		_, err := c.memories.CreateMemory(ctx, req(&kiokuv1.CreateMemoryRequest{Parent: "apps/a", MemoryId: id, Memory: m}))
		return err
	}
	want("memory expire_time in 9999", create("m1", &kiokuv1.Memory{Expiration: &kiokuv1.Memory_ExpireTime{ExpireTime: farTime}}), "expire_time 9999-12-31", "years 1678 to 2261")
	want("memory ttl of 10,000 years", create("m2", &kiokuv1.Memory{Expiration: &kiokuv1.Memory_Ttl{Ttl: &durationpb.Duration{Seconds: 315576000000}}}), "memory.ttl 315576000000s is too long", "years 1678 to 2261")
	want("memory ttl of 250 years", create("m3", &kiokuv1.Memory{Expiration: &kiokuv1.Memory_Ttl{Ttl: durationpb.New(250 * 365 * 24 * time.Hour)}}), "ttl 2190000h0m0s puts the expiry in 22", "past the times kioku stores")
	for _, id := range []string{"m1", "m2", "m3"} {
		if _, err := c.memories.GetMemory(ctx, req(&kiokuv1.GetMemoryRequest{Name: "apps/a/memories/" + id})); connect.CodeOf(err) != connect.CodeNotFound {
			t.Fatalf("memory %s after a refused create: %v", id, err)
		}
	}

	// The latest storable expiry is kept, and the memory stays visible.
	late := time.Date(2261, 6, 1, 0, 0, 0, 0, time.UTC)
	if err := create("late", &kiokuv1.Memory{Expiration: &kiokuv1.Memory_ExpireTime{ExpireTime: timestamppb.New(late)}}); err != nil {
		t.Fatal(err)
	}
	update := func(m *kiokuv1.Memory, path string) error {
		m.Name = "apps/a/memories/late"
		_, err := c.memories.UpdateMemory(ctx, req(&kiokuv1.UpdateMemoryRequest{Memory: m, UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{path}}}))
		return err
	}
	want("updating to 9999", update(&kiokuv1.Memory{Expiration: &kiokuv1.Memory_ExpireTime{ExpireTime: farTime}}, "expire_time"), "years 1678 to 2261")
	want("updating to a ttl of 10,000 years", update(&kiokuv1.Memory{Expiration: &kiokuv1.Memory_Ttl{Ttl: &durationpb.Duration{Seconds: 315576000000}}}, "ttl"), "memory.ttl 315576000000s is too long")
	got, err := c.memories.GetMemory(ctx, req(&kiokuv1.GetMemoryRequest{Name: "apps/a/memories/late"}))
	if err != nil || !got.Msg.GetExpireTime().AsTime().Equal(late) {
		t.Fatalf("the memory after refused updates: %v, %v; want it visible, expiring %v", got, err, late)
	}
	list, err := c.memories.ListMemories(ctx, req(&kiokuv1.ListMemoriesRequest{Parent: "apps/a", Scope: scope}))
	if err != nil || len(list.Msg.GetMemories()) != 1 {
		t.Fatalf("ListMemories: %v, %v; want the memory", list, err)
	}

	// The configuration's TTLs.
	config := func(c2 *kiokuv1.MemoryBankConfig, path string) error {
		c2.Name = "apps/a/memoryBankConfig"
		_, err := c.memories.UpdateMemoryBankConfig(ctx, req(&kiokuv1.UpdateMemoryBankConfigRequest{MemoryBankConfig: c2, UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{path}}}))
		return err
	}
	want("memory_ttl of 10,000 years", config(&kiokuv1.MemoryBankConfig{MemoryTtl: &durationpb.Duration{Seconds: 315576000000}}, "memory_ttl"), "memory_bank_config.memory_ttl 315576000000s is too long")
	want("memory_ttl of 101 years", config(&kiokuv1.MemoryBankConfig{MemoryTtl: durationpb.New(101 * 365 * 24 * time.Hour)}, "memory_ttl"), "memory_ttl 884760h0m0s is longer than")
	want("revision_ttl of 101 years", config(&kiokuv1.MemoryBankConfig{RevisionTtl: durationpb.New(101 * 365 * 24 * time.Hour)}, "revision_ttl"), "revision_ttl")

	// Sessions: a ttl too long names ttl, not expire_time.
	_, err = c.sessions.CreateSession(ctx, req(&kiokuv1.CreateSessionRequest{Parent: "apps/a/users/u", Session: &kiokuv1.Session{Expiration: &kiokuv1.Session_Ttl{Ttl: durationpb.New(250 * 365 * 24 * time.Hour)}}}))
	want("session ttl of 250 years", err, "ttl 2190000h0m0s puts the expiry in 22")
	_, err = c.sessions.CreateSession(ctx, req(&kiokuv1.CreateSessionRequest{Parent: "apps/a/users/u", Session: &kiokuv1.Session{Expiration: &kiokuv1.Session_Ttl{Ttl: &durationpb.Duration{Seconds: 315576000000}}}}))
	want("session ttl of 10,000 years", err, "session.ttl 315576000000s is too long")
}

// TestMemoryTimesOverConnect: event and stated times go in on create and
// update, come back on reads and revisions, filter retrieval, and a
// preferred period that is no range is refused.
func TestMemoryTimesOverConnect(t *testing.T) {
	c, _ := startNode(t, false)
	ctx := t.Context()
	may := time.Date(2023, 5, 20, 0, 0, 0, 0, time.UTC)
	created, err := c.memories.CreateMemory(ctx, req(&kiokuv1.CreateMemoryRequest{Parent: "apps/demo", Memory: &kiokuv1.Memory{
		Fact: "Ann ran a charity race.", Scope: map[string]string{"user_id": "ann"},
		EventTime: timestamppb.New(may), StatedTime: timestamppb.New(may.AddDate(0, 0, 3)),
	}}))
	if err != nil || !created.Msg.GetEventTime().AsTime().Equal(may) || !created.Msg.GetStatedTime().AsTime().Equal(may.AddDate(0, 0, 3)) {
		t.Fatalf("CreateMemory = %v, %v", created, err)
	}
	if _, err := c.memories.CreateMemory(ctx, req(&kiokuv1.CreateMemoryRequest{Parent: "apps/demo", Memory: &kiokuv1.Memory{
		Fact: "Ann ran a marathon.", Scope: map[string]string{"user_id": "ann"},
	}})); err != nil {
		t.Fatal(err)
	}
	retrieve := func(filter string, prefer *kiokuv1.TimeRange) ([]string, error) {
		res, err := c.memories.RetrieveMemories(ctx, req(&kiokuv1.RetrieveMemoriesRequest{Parent: "apps/demo", Scope: map[string]string{"user_id": "ann"}, Filter: filter,
			Method: &kiokuv1.RetrieveMemoriesRequest_SimilaritySearch{SimilaritySearch: &kiokuv1.SimilaritySearch{Query: "What did Ann run?", TopK: 5, PreferTime: prefer}}}))
		if err != nil {
			return nil, err
		}
		var facts []string
		for _, r := range res.Msg.GetRetrievedMemories() {
			facts = append(facts, r.GetMemory().GetFact())
		}
		return facts, nil
	}
	if got, err := retrieve(`event_time >= "2023-05-01" AND event_time < "2023-06-01"`, nil); err != nil || len(got) != 1 || got[0] != "Ann ran a charity race." {
		t.Fatalf("filtered by event_time = %v, %v", got, err)
	}
	if _, err := retrieve("", &kiokuv1.TimeRange{StartTime: timestamppb.New(may), EndTime: timestamppb.New(may)}); connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), "similarity_search.prefer_time") {
		t.Fatalf("an empty preferred period: %v", err)
	}
	// Cleared by an update that names it; the revision records it.
	upd, err := c.memories.UpdateMemory(ctx, req(&kiokuv1.UpdateMemoryRequest{Memory: &kiokuv1.Memory{Name: created.Msg.GetName()}, UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"event_time"}}}))
	if err != nil || upd.Msg.GetEventTime() != nil || upd.Msg.GetStatedTime() == nil {
		t.Fatalf("UpdateMemory(event_time) = %v, %v", upd, err)
	}
	revs, err := c.memories.ListMemoryRevisions(ctx, req(&kiokuv1.ListMemoryRevisionsRequest{Parent: created.Msg.GetName()}))
	if err != nil || len(revs.Msg.GetMemoryRevisions()) != 2 || revs.Msg.GetMemoryRevisions()[1].GetEventTime() == nil || revs.Msg.GetMemoryRevisions()[0].GetEventTime() != nil {
		t.Fatalf("revisions = %v, %v", revs, err)
	}
	if _, err := c.memories.CreateMemory(ctx, req(&kiokuv1.CreateMemoryRequest{Parent: "apps/demo", Memory: &kiokuv1.Memory{
		Fact: "x", Scope: map[string]string{"user_id": "ann"}, EventTime: timestamppb.New(time.Date(1500, 1, 1, 0, 0, 0, 0, time.UTC)),
	}})); connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), "memory.event_time") {
		t.Fatalf("an event time out of range: %v", err)
	}
}

// TestTypedMetadataOverConnect: kioku.v1's typed_metadata round-trips with
// its types, metadata shows the same values as text (and old clients'
// string metadata still works), display names and descriptions are kept,
// a generation applies its metadata, and filters compare typed values.
func TestTypedMetadataOverConnect(t *testing.T) {
	c, _ := startNode(t, false)
	ctx := t.Context()
	ann := map[string]string{"user_id": "ann"}
	at := time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC)
	created, err := c.memories.CreateMemory(ctx, req(&kiokuv1.CreateMemoryRequest{Parent: "apps/demo", MemoryId: "tea", Memory: &kiokuv1.Memory{
		Fact: "Ann prefers green tea.", Scope: ann, DisplayName: "tea", Description: "What Ann drinks.",
		Metadata: map[string]string{"source": "chat"},
		TypedMetadata: map[string]*kiokuv1.MetadataValue{
			"score":  {Value: &kiokuv1.MetadataValue_DoubleValue{DoubleValue: 2}},
			"pinned": {Value: &kiokuv1.MetadataValue_BoolValue{BoolValue: true}},
			"seen":   {Value: &kiokuv1.MetadataValue_TimestampValue{TimestampValue: timestamppb.New(at)}},
		},
	}}))
	if err != nil {
		t.Fatal(err)
	}
	m := created.Msg
	tm := m.GetTypedMetadata()
	if m.GetDisplayName() != "tea" || m.GetDescription() != "What Ann drinks." || tm["source"].GetStringValue() != "chat" || tm["score"].GetDoubleValue() != 2 ||
		!tm["pinned"].GetBoolValue() || !tm["seen"].GetTimestampValue().AsTime().Equal(at) {
		t.Fatalf("created %v", m)
	}
	if got := m.GetMetadata(); got["score"] != "2" || got["pinned"] != "true" || got["seen"] != "2026-05-06T07:08:09Z" || got["source"] != "chat" {
		t.Fatalf("metadata as text: %v", got)
	}

	// A key given twice, differently, is refused naming the field.
	_, err = c.memories.CreateMemory(ctx, req(&kiokuv1.CreateMemoryRequest{Parent: "apps/demo", Memory: &kiokuv1.Memory{Fact: "x", Scope: ann,
		Metadata: map[string]string{"k": "1"}, TypedMetadata: map[string]*kiokuv1.MetadataValue{"k": {Value: &kiokuv1.MetadataValue_DoubleValue{DoubleValue: 1}}}}}))
	if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), "typed_metadata") {
		t.Fatalf("a key in metadata and typed_metadata: %v", err)
	}

	// Updates by path.
	up, err := c.memories.UpdateMemory(ctx, req(&kiokuv1.UpdateMemoryRequest{
		Memory:     &kiokuv1.Memory{Name: m.GetName(), DisplayName: "green tea", TypedMetadata: map[string]*kiokuv1.MetadataValue{"score": {Value: &kiokuv1.MetadataValue_DoubleValue{DoubleValue: 0.5}}}},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"display_name", "typed_metadata"}},
	}))
	if err != nil || up.Msg.GetDisplayName() != "green tea" || up.Msg.GetDescription() != "What Ann drinks." || len(up.Msg.GetTypedMetadata()) != 1 || up.Msg.GetMetadata()["score"] != "0.5" {
		t.Fatalf("UpdateMemory = %v, %v", up, err)
	}
	revs, err := c.memories.ListMemoryRevisions(ctx, req(&kiokuv1.ListMemoryRevisionsRequest{Parent: m.GetName()}))
	if err != nil || len(revs.Msg.GetMemoryRevisions()) != 2 || revs.Msg.GetMemoryRevisions()[1].GetTypedMetadata()["pinned"].GetBoolValue() != true {
		t.Fatalf("revisions = %v, %v", revs, err)
	}

	// A generation of direct facts with metadata: created with it.
	op, err := c.memories.GenerateMemories(ctx, req(&kiokuv1.GenerateMemoriesRequest{Parent: "apps/demo", Scope: ann,
		Source:                &kiokuv1.GenerateMemoriesRequest_DirectMemoriesSource{DirectMemoriesSource: &kiokuv1.DirectMemoriesSource{Memories: []*kiokuv1.DirectMemory{{Fact: "Ann rides a bike."}}}},
		Metadata:              map[string]*kiokuv1.MetadataValue{"source": {Value: &kiokuv1.MetadataValue_StringValue{StringValue: "form"}}, "score": {Value: &kiokuv1.MetadataValue_DoubleValue{DoubleValue: 9}}},
		MetadataMergeStrategy: kiokuv1.MetadataMergeStrategy_METADATA_MERGE_STRATEGY_MERGE,
	}))
	if err != nil {
		t.Fatal(err)
	}
	done := wait(t, c, op.Msg)
	var resp kiokuv1.GenerateMemoriesResponse
	if err := done.GetResponse().UnmarshalTo(&resp); err != nil || len(resp.GetGeneratedMemories()) != 1 ||
		resp.GetGeneratedMemories()[0].GetMemory().GetTypedMetadata()["score"].GetDoubleValue() != 9 {
		t.Fatalf("generated %v, %v (%v)", &resp, err, done)
	}

	// Filters compare typed values: an OR selects exactly.
	for filter, want := range map[string]int{
		`metadata.score > 5 OR metadata.source = "chat"`:   1, // the bike; tea's source went with the update
		`metadata.score >= 0.5 AND metadata.score < 1`:     1,
		`display_name = "green tea" OR metadata.score = 9`: 2,
		`NOT metadata:source`:                              1,
	} {
		list, err := c.memories.ListMemories(ctx, req(&kiokuv1.ListMemoriesRequest{Parent: "apps/demo", Filter: filter}))
		if err != nil || len(list.Msg.GetMemories()) != want {
			t.Errorf("ListMemories(%s) = %v, %v; want %d", filter, list, err, want)
		}
	}
	_, err = c.memories.GenerateMemories(ctx, req(&kiokuv1.GenerateMemoriesRequest{Parent: "apps/demo", Scope: ann,
		Source:                &kiokuv1.GenerateMemoriesRequest_DirectMemoriesSource{DirectMemoriesSource: &kiokuv1.DirectMemoriesSource{Memories: []*kiokuv1.DirectMemory{{Fact: "x"}}}},
		MetadataMergeStrategy: 7,
	}))
	if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), "metadata_merge_strategy") {
		t.Fatalf("an unknown strategy: %v", err)
	}
}

// TestWatchMemoriesResumes: a watcher that disconnects and comes back
// with its last cursor gets every change made meanwhile, in order, and
// none it had; a live watcher is woken by a change; bad cursors are
// refused naming start_cursor.
func TestWatchMemoriesResumes(t *testing.T) {
	_, url := serveNode(t, nil)
	c := client.New(url, client.WithHTTPClient(h2cClient()))
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	u1, u2 := map[string]string{"user_id": "u1"}, map[string]string{"user_id": "u2"}
	create := func(id string, scope map[string]string) {
		t.Helper()
		if _, err := c.CreateMemory(ctx, &kiokuv1.CreateMemoryRequest{Parent: "apps/w", MemoryId: id, Memory: &kiokuv1.Memory{Fact: "Fact " + id + ".", Scope: scope}}); err != nil {
			t.Fatal(err)
		}
	}
	// line is what the test compares of a change.
	line := func(r *kiokuv1.WatchMemoriesResponse) string {
		return r.GetCursor() + " " + r.GetAction().String() + " " + r.GetMemory().GetName() + " " + r.GetRevision()
	}
	// take reads n changes of a new stream from cursor.
	take := func(scope map[string]string, cursor string, n int) []string {
		t.Helper()
		var got []string
		for r, err := range c.WatchMemories(ctx, &kiokuv1.WatchMemoriesRequest{Parent: "apps/w", Scope: scope, StartCursor: cursor}) {
			if err != nil {
				t.Fatalf("watching from %q: %v (after %v)", cursor, err, got)
			}
			got = append(got, line(r))
			if len(got) == n {
				break
			}
		}
		return got
	}
	create("a", u1)
	create("b", u2)
	create("c", u1)
	first := take(u1, "0", 1)
	if diff := cmp.Diff([]string{"1 MEMORY_ACTION_CREATED apps/w/memories/a apps/w/memories/a/revisions/1"}, first); diff != "" {
		t.Fatalf("first change of u1 (-want +got):\n%s", diff)
	}
	// Disconnected after cursor 1: changes happen.
	fact := "Fact a, changed."
	if _, err := c.UpdateMemory(ctx, &kiokuv1.UpdateMemoryRequest{Memory: &kiokuv1.Memory{Name: "apps/w/memories/a", Fact: fact}, UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"fact"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteMemory(ctx, &kiokuv1.DeleteMemoryRequest{Name: "apps/w/memories/c"}); err != nil {
		t.Fatal(err)
	}
	create("d", u1) // the sentinel: the last change
	want := []string{
		"3 MEMORY_ACTION_CREATED apps/w/memories/c apps/w/memories/c/revisions/1",
		"4 MEMORY_ACTION_UPDATED apps/w/memories/a apps/w/memories/a/revisions/2",
		"5 MEMORY_ACTION_DELETED apps/w/memories/c apps/w/memories/c/revisions/2",
		"6 MEMORY_ACTION_CREATED apps/w/memories/d apps/w/memories/d/revisions/1",
	}
	if diff := cmp.Diff(want, take(u1, "1", 4)); diff != "" {
		t.Fatalf("resumed after cursor 1 (-want +got):\n%s", diff)
	}
	// The whole app, from the start: u2's change too.
	if got := take(nil, "0", 2); got[1] != "2 MEMORY_ACTION_CREATED apps/w/memories/b apps/w/memories/b/revisions/1" {
		t.Fatalf("app-wide watch = %v, want b's creation second", got)
	}
	// A live watcher, from now, is woken by the next change, with the
	// memory as it is.
	live := make(chan *kiokuv1.WatchMemoriesResponse, 1)
	go func() {
		for r, err := range c.WatchMemories(ctx, &kiokuv1.WatchMemoriesRequest{Parent: "apps/w", Scope: u2}) {
			if err == nil {
				live <- r
			}
			return
		}
	}()
	// The watch may start after this change or before it; either way it
	// sees the one after.
	for i := 0; ; i++ {
		if i == 10 {
			t.Fatal("the live watcher saw none of 10 changes")
		}
		create("e"+string(rune('0'+i)), u2)
		select {
		case r := <-live:
			if r.GetAction() != kiokuv1.MemoryAction_MEMORY_ACTION_CREATED || r.GetMemory().GetFact() == "" || r.GetMemory().GetScope()["user_id"] != "u2" {
				t.Fatalf("live change = %v", r)
			}
		case <-time.After(2 * time.Second):
			continue
		}
		break
	}
	for _, bad := range []string{"x", "-1", "1000"} {
		for _, err := range c.WatchMemories(ctx, &kiokuv1.WatchMemoriesRequest{Parent: "apps/w", StartCursor: bad}) {
			if connect.CodeOf(err) != connect.CodeInvalidArgument {
				t.Errorf("start_cursor %q: %v, want INVALID_ARGUMENT", bad, err)
			}
			break
		}
	}
}
