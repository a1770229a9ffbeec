package transport_test

import (
	"fmt"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/model/modeltest"
)

// TestCompactSession compacts over RPC: the operation, its response, the
// compacted view, its count among the session operations, and the refusal
// without a model.
func TestCompactSession(t *testing.T) {
	c, fake := startNode(t, true)
	ctx := t.Context()
	const name = "apps/a/users/ann/sessions/s1"
	if _, err := c.sessions.CreateSession(ctx, req(&kiokuv1.CreateSessionRequest{Parent: "apps/a/users/ann", SessionId: "s1"})); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 12; i++ {
		_, err := c.sessions.AppendEvent(ctx, req(&kiokuv1.AppendEventRequest{Name: name, Event: &kiokuv1.Event{
			Id: fmt.Sprint("e", i), Author: "user", Content: &kiokuv1.Content{Role: "user", Parts: []*kiokuv1.Part{{Text: fmt.Sprint("message ", i)}}},
		}}))
		if err != nil {
			t.Fatal(err)
		}
	}
	fake.SetResponder(func(call modeltest.Call) modeltest.Reply { return modeltest.Reply{Text: "Ann sent ten messages."} })
	res, err := c.sessions.CompactSession(ctx, req(&kiokuv1.CompactSessionRequest{Name: name, KeepRecentEvents: 2}))
	if err != nil {
		t.Fatal(err)
	}
	done := wait(t, c, res.Msg)
	var out kiokuv1.CompactSessionResponse
	if err := done.GetResponse().UnmarshalTo(&out); err != nil {
		t.Fatalf("response %v: %v", done, err)
	}
	ev := out.GetCompaction()
	if !out.GetCreated() || ev.GetName() != name+"/events/kioku-compaction-10" || ev.GetAuthor() != "kioku" || ev.GetContent().GetParts()[0].GetText() != "Ann sent ten messages." ||
		ev.GetActions().GetCompaction().GetEndSequence() != 10 || ev.GetActions().GetCompaction().GetModel() != "gemini:gemini-2.5-flash" {
		t.Fatalf("CompactSession response %v", &out)
	}
	got, err := c.sessions.GetSession(ctx, req(&kiokuv1.GetSessionRequest{Name: name, View: kiokuv1.SessionView_SESSION_VIEW_COMPACTED}))
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, e := range got.Msg.GetEvents() {
		ids = append(ids, e.GetId())
	}
	if strings.Join(ids, ",") != "kioku-compaction-10,e11,e12" {
		t.Fatalf("compacted view %v", ids)
	}
	full, err := c.sessions.GetSession(ctx, req(&kiokuv1.GetSessionRequest{Name: name}))
	if err != nil || len(full.Msg.GetEvents()) != 13 {
		t.Fatalf("full view: %d events, %v", len(full.Msg.GetEvents()), err)
	}
	// A compaction is the sessions' work: counted as a session operation.
	metrics := scrape(t, c.url)
	if n := metrics[`kioku_session_operations_total{method="CompactSession",state="SUCCEEDED"}`]; n != 1 {
		t.Errorf("succeeded CompactSession operations = %v, want 1", n)
	}
	for series := range metrics {
		if strings.HasPrefix(series, "kioku_memory_operations_total{") && strings.Contains(series, "CompactSession") {
			t.Errorf("a compaction counted as a memory operation: %s", series)
		}
	}
	_, err = c.sessions.CompactSession(ctx, req(&kiokuv1.CompactSessionRequest{Name: name, UpToSequence: 99}))
	if connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Fatalf("up_to beyond the session: %v", err)
	}
	_, err = c.sessions.CompactSession(ctx, req(&kiokuv1.CompactSessionRequest{Name: "apps/a/users/ann/sessions/nope"}))
	if connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("a missing session: %v", err)
	}

	plain, _ := startNode(t, false)
	if _, err := plain.sessions.CreateSession(ctx, req(&kiokuv1.CreateSessionRequest{Parent: "apps/a/users/ann", SessionId: "s1"})); err != nil {
		t.Fatal(err)
	}
	_, err = plain.sessions.CompactSession(ctx, req(&kiokuv1.CompactSessionRequest{Name: name}))
	if connect.CodeOf(err) != connect.CodeFailedPrecondition || !strings.Contains(err.Error(), "--model-provider") {
		t.Fatalf("without a model: %v, want FAILED_PRECONDITION naming the settings", err)
	}
}

// TestCompactionTriggerConfig: the compaction trigger of an app's memory
// bank configuration round-trips, with its update mask, and bad values are
// refused.
func TestCompactionTriggerConfig(t *testing.T) {
	c, _ := startNode(t, true)
	ctx := t.Context()
	const name = "apps/a/memoryBankConfig"
	trig := &kiokuv1.CompactionTrigger{EventCount: 50, EventBytes: 64 << 10, KeepRecentEvents: 8}
	res, err := c.memories.UpdateMemoryBankConfig(ctx, req(&kiokuv1.UpdateMemoryBankConfigRequest{
		MemoryBankConfig: &kiokuv1.MemoryBankConfig{Name: name, CompactionTrigger: trig},
		UpdateMask:       &fieldmaskpb.FieldMask{Paths: []string{"compaction_trigger"}},
	}))
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.memories.GetMemoryBankConfig(ctx, req(&kiokuv1.GetMemoryBankConfigRequest{Name: name}))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(trig, got.Msg.GetCompactionTrigger(), protocmp.Transform()); diff != "" || !proto.Equal(res.Msg.GetCompactionTrigger(), trig) {
		t.Fatalf("stored compaction trigger (-want +got):\n%s", diff)
	}
	_, err = c.memories.UpdateMemoryBankConfig(ctx, req(&kiokuv1.UpdateMemoryBankConfigRequest{
		MemoryBankConfig: &kiokuv1.MemoryBankConfig{Name: name, CompactionTrigger: &kiokuv1.CompactionTrigger{EventCount: -1}},
		UpdateMask:       &fieldmaskpb.FieldMask{Paths: []string{"compaction_trigger"}},
	}))
	if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), "compaction_trigger") {
		t.Fatalf("a negative event count: %v", err)
	}
}
