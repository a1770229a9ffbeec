package vertex_test

import (
	"fmt"
	"testing"
	"time"

	aiplatform "cloud.google.com/go/aiplatform/apiv1beta1"
	"cloud.google.com/go/aiplatform/apiv1beta1/aiplatformpb"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/kioku-ai/kioku/model/modeltest"
	"github.com/kioku-ai/kioku/sessions"
)

// TestCompactionInCustomMetadata: a kioku compaction reads through Vertex
// AI's API with the compaction in custom_metadata, where ADK Python keeps
// its own; ADK Python's own compaction round-trips.
func TestCompactionInCustomMetadata(t *testing.T) {
	fake := modeltest.NewGemini(t)
	fake.SetResponder(func(modeltest.Call) modeltest.Reply { return modeltest.Reply{Text: "Ann said four things."} })
	k := startKioku(t, fake)
	ctx := t.Context()
	c, err := aiplatform.NewSessionClient(ctx, k.grpcOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	op, err := c.CreateSession(ctx, &aiplatformpb.CreateSessionRequest{Parent: engine, SessionId: "long", Session: &aiplatformpb.Session{UserId: "ann"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := op.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 7, 8, 9, 0, 0, 0, time.UTC)
	python := mustStruct(t, map[string]any{"_compaction": map[string]any{
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
	key := sessions.Key{App: "1491331942182813696", User: "ann", ID: "long"}
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
