package vertex_test

import (
	"fmt"
	"testing"
	"time"

	aiplatform "cloud.google.com/go/aiplatform/apiv1beta1"

	"cloud.google.com/go/aiplatform/apiv1beta1/aiplatformpb"
	"cloud.google.com/go/longrunning/autogen/longrunningpb"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/kioku-ai/kioku/internal/prototest"
	"github.com/kioku-ai/kioku/internal/workflow"
	"github.com/kioku-ai/kioku/jobs"
	"github.com/kioku-ai/kioku/model/modeltest"
	"github.com/kioku-ai/kioku/sessions"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
)

// TestCompactionInCustomMetadata: a kioku compaction reads through Vertex
// AI's API with the compaction in custom_metadata, where ADK Python keeps
// its own; ADK Python's own compaction round-trips.
func TestCompactionInCustomMetadata(t *testing.T) {
	fake := modeltest.NewGemini(t)
	fake.SetResponder(func(modeltest.Call) modeltest.Reply { return modeltest.Reply{Text: "Ann said four things."} })
	k := startKioku(t, fake)
	ctx := t.Context()
	c := googleClient(t, aiplatform.NewSessionClient, k.grpcOptions())
	createSession(t, c, "long", "ann")
	at := time.Date(2026, 7, 8, 9, 0, 0, 0, time.UTC)
	python := prototest.Struct(t, map[string]any{"_compaction": map[string]any{
		"start_timestamp": 1.7e9, "end_timestamp": 1.7e9 + 60,
		"compacted_content": map[string]any{"role": "model", "parts": []any{map[string]any{"text": "ADK Python's summary."}}},
	}})
	for i := range 6 {
		ev := &aiplatformpb.SessionEvent{Author: "user", InvocationId: fmt.Sprint("inv-", i), Timestamp: timestamppb.New(at.Add(time.Duration(i) * time.Minute)),
			Content: &aiplatformpb.Content{Role: "user", Parts: []*aiplatformpb.Part{{Data: &aiplatformpb.Part_Text{Text: fmt.Sprint("thing ", i)}}}}}
		if i == 5 {
			ev.EventMetadata = &aiplatformpb.EventMetadata{CustomMetadata: python}
		}
		if _, err := c.AppendEvent(ctx, &aiplatformpb.AppendEventRequest{Name: engine + "/sessions/long", Event: ev}); err != nil {
			t.Fatal(err)
		}
	}
	key := sessiontype.Key{App: "1491331942182813696", User: "ann", ID: "long"}
	if _, err := k.node.Sessions.Compact(ctx, key, sessions.CompactRequest{UpTo: 4}); err != nil {
		t.Fatal(err)
	}
	events := allEvents(t, c, &aiplatformpb.ListEventsRequest{Parent: engine + "/sessions/long"})
	if len(events) != 7 {
		t.Fatalf("%d events, want 6 and the compaction", len(events))
	}
	if diff := cmp.Diff(python.AsMap(), events[5].GetEventMetadata().GetCustomMetadata().AsMap()); diff != "" {
		t.Fatalf("ADK Python's compaction after a round trip (-sent +read):\n%s", diff)
	}
	summary := events[6]
	want := map[string]any{
		"start_timestamp": float64(at.Unix()), "end_timestamp": float64(at.Add(3 * time.Minute).Unix()),
		"compacted_content": map[string]any{"role": "model", "parts": []any{map[string]any{"text": "Ann said four things."}}},
	}
	if diff := cmp.Diff(want, summary.GetEventMetadata().GetCustomMetadata().AsMap()["_compaction"]); diff != "" || summary.GetAuthor() != "kioku" {
		t.Fatalf("kioku's compaction through Vertex AI (author %q; -want +got):\n%s", summary.GetAuthor(), diff)
	}
}

// TestOperationOfAnotherKind: an operation of the app that is not the
// memory bank's (a session's compaction) reads through Vertex AI's
// Operations API by its name, done, with an empty response.
func TestOperationOfAnotherKind(t *testing.T) {
	fake := modeltest.NewGemini(t)
	fake.SetResponder(func(modeltest.Call) modeltest.Reply { return modeltest.Reply{Text: "A summary."} })
	k := startKioku(t, fake)
	ctx := t.Context()
	key := sessiontype.Key{App: "1491331942182813696", User: "ann", ID: "s"}
	if _, err := k.node.Sessions.CreateSession(ctx, sessions.CreateSessionRequest{App: key.App, User: key.User, ID: key.ID}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := k.node.Sessions.AppendEvent(ctx, key, &sessiontype.Event{Author: "user", Content: &sessiontype.Content{Parts: []sessiontype.Part{{Text: "hi"}}}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	op, err := k.node.App.CompactSession(ctx, workflow.CompactRequest{Session: key, UpTo: 2})
	if err != nil {
		t.Fatal(err)
	}
	if done, err := k.node.App.WaitOperation(ctx, key.App, op.ID, 10*time.Second); err != nil || done.State != jobs.Succeeded {
		t.Fatalf("the compaction: %+v, %v", done, err)
	}
	c := googleClient(t, aiplatform.NewMemoryBankClient, k.grpcOptions())
	got, err := c.GetOperation(ctx, &longrunningpb.GetOperationRequest{Name: engine + "/operations/" + op.ID})
	if err != nil || !got.GetDone() || got.GetError() != nil {
		t.Fatalf("GetOperation = %v, %v; want it done without error", got, err)
	}
	var resp aiplatformpb.GenerateMemoriesResponse
	if err := got.GetResponse().UnmarshalTo(&resp); err != nil || len(resp.GetGeneratedMemories()) != 0 {
		t.Fatalf("response = %v, %v; want no memories", &resp, err)
	}
}
