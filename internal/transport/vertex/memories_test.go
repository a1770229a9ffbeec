package vertex_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	aiplatform "cloud.google.com/go/aiplatform/apiv1beta1"
	"cloud.google.com/go/aiplatform/apiv1beta1/aiplatformpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/kioku-ai/kioku/model/modeltest"
)

func facts(list []*aiplatformpb.Memory) []string {
	var out []string
	for _, m := range list {
		out = append(out, m.GetFact())
	}
	slices.Sort(out)
	return out
}

func allMemories(t *testing.T, c *aiplatform.MemoryBankClient, req *aiplatformpb.ListMemoriesRequest) []*aiplatformpb.Memory {
	t.Helper()
	return drain(t, fmt.Sprintf("ListMemories(%v)", req), c.ListMemories(t.Context(), req).Next)
}

// memoryScenario runs the memory scenario with Google's Go memory
// bank client, over gRPC or REST: create, get, list, update, delete (each
// an operation waited with the client's Wait), generate from direct
// memories and from a session (operations the client polls itself until
// the memory bank's workers end them), retrieve by similarity and simply.
func memoryScenario(t *testing.T, c *aiplatform.MemoryBankClient, sc *aiplatform.SessionClient, fake *modeltest.Gemini) {
	ctx := t.Context()
	ann := map[string]string{"user_id": "ann"}

	op, err := c.CreateMemory(ctx, &aiplatformpb.CreateMemoryRequest{Parent: engine, MemoryId: "tea", Memory: &aiplatformpb.Memory{Fact: "Ann prefers green tea.", Scope: ann}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(op.Name(), engine+"/memories/tea/operations/") {
		t.Errorf("create operation %q", op.Name())
	}
	tea, err := op.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if tea.GetName() != engine+"/memories/tea" || tea.GetFact() != "Ann prefers green tea." || tea.GetScope()["user_id"] != "ann" {
		t.Fatalf("created %v", tea)
	}
	op, err = c.CreateMemory(ctx, &aiplatformpb.CreateMemoryRequest{Parent: engine, Memory: &aiplatformpb.Memory{Fact: "Bob plays the cello.", Scope: map[string]string{"user_id": "bob"}}})
	if err != nil {
		t.Fatal(err)
	}
	cello, err := op.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}

	got, err := c.GetMemory(ctx, &aiplatformpb.GetMemoryRequest{Name: tea.GetName()})
	if err != nil || got.GetFact() != tea.GetFact() {
		t.Fatalf("GetMemory = %v, %v", got, err)
	}
	if all := allMemories(t, c, &aiplatformpb.ListMemoriesRequest{Parent: engine, PageSize: 1}); len(all) != 2 {
		t.Fatalf("ListMemories: %d memories, want 2", len(all))
	}
	for _, f := range []string{`scope="{\"user_id\": \"bob\"}"`, `scope.user_id="bob"`} {
		if list := allMemories(t, c, &aiplatformpb.ListMemoriesRequest{Parent: engine, Filter: f}); len(list) != 1 || list[0].GetName() != cello.GetName() {
			t.Errorf("ListMemories(filter %s) = %v, want bob's memory", f, facts(list))
		}
	}

	uop, err := c.UpdateMemory(ctx, &aiplatformpb.UpdateMemoryRequest{
		Memory:     &aiplatformpb.Memory{Name: tea.GetName(), Fact: "Ann prefers jasmine tea."},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"fact"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	updated, err := uop.Wait(ctx)
	if err != nil || updated.GetFact() != "Ann prefers jasmine tea." || !updated.GetUpdateTime().AsTime().After(tea.GetUpdateTime().AsTime()) {
		t.Fatalf("UpdateMemory = %v, %v", updated, err)
	}

	dop, err := c.DeleteMemory(ctx, &aiplatformpb.DeleteMemoryRequest{Name: cello.GetName()})
	if err != nil {
		t.Fatal(err)
	}
	if err := dop.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetMemory(ctx, &aiplatformpb.GetMemoryRequest{Name: cello.GetName()}); codeOf(err) != codes.NotFound {
		t.Fatalf("GetMemory after delete: %v, want NOT_FOUND", err)
	}

	// Generate from direct memories: the memory bank's workers run the
	// operation (consolidating through the model); the client's Wait polls
	// it.
	fake.ReplyText(`{"actions":[{"candidate":1,"action":"CREATE","memory":0,"fact":"Ann lives in Sapporo."},{"candidate":2,"action":"CREATE","memory":0,"fact":"Ann has a cat named Mochi."}]}`)
	gop, err := c.GenerateMemories(ctx, &aiplatformpb.GenerateMemoriesRequest{
		Parent: engine, Scope: ann,
		Source: &aiplatformpb.GenerateMemoriesRequest_DirectMemoriesSource_{DirectMemoriesSource: &aiplatformpb.GenerateMemoriesRequest_DirectMemoriesSource{
			DirectMemories: []*aiplatformpb.GenerateMemoriesRequest_DirectMemoriesSource_DirectMemory{{Fact: "Ann lives in Sapporo."}, {Fact: "Ann has a cat named Mochi."}},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(gop.Name(), engine+"/operations/") {
		t.Errorf("generate operation %q", gop.Name())
	}
	gen, err := gop.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(gen.GetGeneratedMemories()) != 2 || gen.GetGeneratedMemories()[0].GetAction() != aiplatformpb.GenerateMemoriesResponse_GeneratedMemory_CREATED {
		t.Fatalf("generated %v", gen)
	}

	// Generate from a session, with a model (the fake Gemini) extracting
	// and consolidating.
	sess := createSession(t, sc, "chat", "ann")
	if _, err := sc.AppendEvent(ctx, &aiplatformpb.AppendEventRequest{Name: sess.GetName(), Event: &aiplatformpb.SessionEvent{
		Author: "user", InvocationId: "i1", Timestamp: timestamppb.New(time.Now()),
		Content: &aiplatformpb.Content{Role: "user", Parts: []*aiplatformpb.Part{{Data: &aiplatformpb.Part_Text{Text: "I started learning the piano."}}}},
	}}); err != nil {
		t.Fatal(err)
	}
	fake.ReplyText(`{"facts":[{"fact":"Ann is learning the piano.","topic":"USER_PERSONAL_INFO","events":[1]}]}`,
		`{"actions":[{"candidate":1,"action":"CREATE","memory":0,"fact":"Ann is learning the piano."}]}`)
	gop, err = c.GenerateMemories(ctx, &aiplatformpb.GenerateMemoriesRequest{
		Parent: engine,
		Source: &aiplatformpb.GenerateMemoriesRequest_VertexSessionSource_{VertexSessionSource: &aiplatformpb.GenerateMemoriesRequest_VertexSessionSource{Session: sess.GetName()}},
	})
	if err != nil {
		t.Fatal(err)
	}
	gen, err = gop.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(gen.GetGeneratedMemories()) != 1 || gen.GetGeneratedMemories()[0].GetMemory().GetFact() != "Ann is learning the piano." ||
		gen.GetGeneratedMemories()[0].GetMemory().GetScope()["user_id"] != "ann" {
		t.Fatalf("generated from the session: %v", gen)
	}

	// Retrieval: by similarity, and simple (paged) retrieval.
	rr, err := c.RetrieveMemories(ctx, &aiplatformpb.RetrieveMemoriesRequest{Parent: engine, Scope: ann,
		RetrievalParams: &aiplatformpb.RetrieveMemoriesRequest_SimilaritySearchParams_{SimilaritySearchParams: &aiplatformpb.RetrieveMemoriesRequest_SimilaritySearchParams{SearchQuery: "Where does Ann live?", TopK: 2}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(rr.GetRetrievedMemories()) != 2 || rr.GetRetrievedMemories()[0].GetMemory().GetFact() != "Ann lives in Sapporo." {
		t.Fatalf("similarity retrieval: %v", rr)
	}
	var simple []*aiplatformpb.Memory
	token := ""
	for page := 0; ; page++ {
		rr, err := c.RetrieveMemories(ctx, &aiplatformpb.RetrieveMemoriesRequest{Parent: engine, Scope: ann,
			RetrievalParams: &aiplatformpb.RetrieveMemoriesRequest_SimpleRetrievalParams_{SimpleRetrievalParams: &aiplatformpb.RetrieveMemoriesRequest_SimpleRetrievalParams{PageSize: 3, PageToken: token}}})
		if err != nil {
			t.Fatal(err)
		}
		if len(rr.GetRetrievedMemories()) > 3 || page > 3 {
			t.Fatalf("page %d: %d memories", page, len(rr.GetRetrievedMemories()))
		}
		for _, m := range rr.GetRetrievedMemories() {
			simple = append(simple, m.GetMemory())
		}
		if token = rr.GetNextPageToken(); token == "" {
			break
		}
	}
	want := []string{"Ann has a cat named Mochi.", "Ann is learning the piano.", "Ann lives in Sapporo.", "Ann prefers jasmine tea."}
	if got := facts(simple); !slices.Equal(got, want) {
		t.Fatalf("simple retrieval = %q, want %q", got, want)
	}
}

func TestMemoryBankClientGRPC(t *testing.T) {
	fake := modeltest.NewGemini(t)
	k := startKioku(t, fake)
	c := googleClient(t, aiplatform.NewMemoryBankClient, k.grpcOptions())
	sc := googleClient(t, aiplatform.NewSessionClient, k.grpcOptions())
	memoryScenario(t, c, sc, fake)
}

func TestMemoryBankClientREST(t *testing.T) {
	fake := modeltest.NewGemini(t)
	k := startKioku(t, fake)
	c := googleClient(t, aiplatform.NewMemoryBankRESTClient, k.restOptions())
	sc := googleClient(t, aiplatform.NewSessionRESTClient, k.restOptions())
	memoryScenario(t, c, sc, fake)
}
