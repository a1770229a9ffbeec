package transport_test

import (
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
)

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
