package vertex_test

import (
	"testing"
	"time"

	aiplatform "cloud.google.com/go/aiplatform/apiv1beta1"
	"cloud.google.com/go/aiplatform/apiv1beta1/aiplatformpb"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/kioku-ai/kioku/client"
	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/internal/prototest"
)

// engineID is the id of engine, the kioku app its sessions live in.
const engineID = "1491331942182813696"

// bothSurfaces checks that a session written through the Vertex AI API is
// the same session through kioku.v1, and the reverse: same user, state and
// events.
func bothSurfaces(t *testing.T, v *aiplatform.SessionClient, k *client.Client) {
	ctx := t.Context()
	at := time.Date(2026, 5, 6, 7, 8, 9, 123456000, time.UTC)

	// Vertex AI -> kioku.v1.
	op, err := v.CreateSession(ctx, &aiplatformpb.CreateSessionRequest{Parent: engine, SessionId: "from-vertex", Session: &aiplatformpb.Session{
		UserId: "ann", DisplayName: "via vertex", SessionState: prototest.Struct(t, map[string]any{"a": 1.0, "user:b": "two"}),
	}})
	if err != nil {
		t.Fatal(err)
	}
	vs, err := op.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.AppendEvent(ctx, &aiplatformpb.AppendEventRequest{Name: vs.GetName(), Event: &aiplatformpb.SessionEvent{
		Author: "model", InvocationId: "inv-1", Timestamp: timestamppb.New(at),
		Content: &aiplatformpb.Content{Role: "model", Parts: []*aiplatformpb.Part{
			{Data: &aiplatformpb.Part_Text{Text: "Hello, Ann."}},
			{Data: &aiplatformpb.Part_FunctionCall{FunctionCall: &aiplatformpb.FunctionCall{Id: "c1", Name: "remember", Args: prototest.Struct(t, map[string]any{"fact": "likes tea"})}}},
		}},
		Actions:       &aiplatformpb.EventActions{StateDelta: prototest.Struct(t, map[string]any{"app:c": true})},
		EventMetadata: &aiplatformpb.EventMetadata{TurnComplete: true, CustomMetadata: prototest.Struct(t, map[string]any{"k": "v"})},
	}}); err != nil {
		t.Fatal(err)
	}
	ks, err := k.GetSession(ctx, &kiokuv1.GetSessionRequest{Name: "apps/" + engineID + "/users/ann/sessions/from-vertex"})
	if err != nil {
		t.Fatalf("kioku.v1 GetSession of a Vertex AI session: %v", err)
	}
	if diff := cmp.Diff(map[string]any{"a": 1.0, "user:b": "two", "app:c": true}, ks.GetState().AsMap()); diff != "" || ks.GetDisplayName() != "via vertex" {
		t.Fatalf("kioku.v1 sees %q with state (-want +got):\n%s", ks.GetDisplayName(), diff)
	}
	if len(ks.GetEvents()) != 1 {
		t.Fatalf("kioku.v1 sees %d events, want 1", len(ks.GetEvents()))
	}
	ke := ks.GetEvents()[0]
	wantContent := &kiokuv1.Content{Role: "model", Parts: []*kiokuv1.Part{
		{Text: "Hello, Ann."},
		{FunctionCall: &kiokuv1.FunctionCall{Id: "c1", Name: "remember", Args: prototest.Struct(t, map[string]any{"fact": "likes tea"})}},
	}}
	if diff := cmp.Diff(wantContent, ke.GetContent(), protocmp.Transform()); diff != "" {
		t.Errorf("kioku.v1 event content (-want +got):\n%s", diff)
	}
	if ke.GetAuthor() != "model" || ke.GetInvocationId() != "inv-1" || !ke.GetTimestamp().AsTime().Equal(at) || !ke.GetTurnComplete() ||
		ke.GetCustomMetadata().AsMap()["k"] != "v" || ke.GetActions().GetStateDelta().AsMap()["app:c"] != true {
		t.Errorf("kioku.v1 event = %v", ke)
	}

	// kioku.v1 -> Vertex AI.
	if _, err := k.CreateSession(ctx, &kiokuv1.CreateSessionRequest{Parent: "apps/" + engineID + "/users/bob", SessionId: "from-kioku", Session: &kiokuv1.Session{
		State: prototest.Struct(t, map[string]any{"x": "y"}), Labels: map[string]string{"src": "kioku"},
	}}); err != nil {
		t.Fatal(err)
	}
	if _, err := k.AppendEvent(ctx, &kiokuv1.AppendEventRequest{Name: "apps/" + engineID + "/users/bob/sessions/from-kioku", Event: &kiokuv1.Event{
		Id: "e1", Author: "user", InvocationId: "inv-2", Timestamp: timestamppb.New(at),
		Content: &kiokuv1.Content{Role: "user", Parts: []*kiokuv1.Part{{Text: "I am Bob."}}},
		Actions: &kiokuv1.EventActions{StateDelta: prototest.Struct(t, map[string]any{"user:name": "Bob"})},
	}}); err != nil {
		t.Fatal(err)
	}
	got, err := v.GetSession(ctx, &aiplatformpb.GetSessionRequest{Name: engine + "/sessions/from-kioku"})
	if err != nil {
		t.Fatalf("Vertex AI GetSession of a kioku.v1 session: %v", err)
	}
	if diff := cmp.Diff(map[string]any{"x": "y", "user:name": "Bob", "app:c": true}, got.GetSessionState().AsMap()); diff != "" || got.GetUserId() != "bob" || got.GetLabels()["src"] != "kioku" {
		t.Fatalf("Vertex AI sees user %q labels %v, state (-want +got):\n%s", got.GetUserId(), got.GetLabels(), diff)
	}
	events := allEvents(t, v, &aiplatformpb.ListEventsRequest{Parent: got.GetName()})
	want := &aiplatformpb.SessionEvent{
		Name: got.GetName() + "/events/e1", Author: "user", InvocationId: "inv-2", Timestamp: timestamppb.New(at),
		Content:       &aiplatformpb.Content{Role: "user", Parts: []*aiplatformpb.Part{{Data: &aiplatformpb.Part_Text{Text: "I am Bob."}}}},
		Actions:       &aiplatformpb.EventActions{StateDelta: prototest.Struct(t, map[string]any{"user:name": "Bob"})},
		EventMetadata: &aiplatformpb.EventMetadata{},
	}
	if len(events) != 1 {
		t.Fatalf("Vertex AI sees %d events, want 1", len(events))
	}
	if diff := cmp.Diff(want, events[0], protocmp.Transform()); diff != "" {
		t.Errorf("Vertex AI event (-want +got):\n%s", diff)
	}
}

func TestBothSurfacesGRPC(t *testing.T) {
	k := startKioku(t, nil)
	v := googleClient(t, aiplatform.NewSessionClient, k.grpcOptions())
	bothSurfaces(t, v, client.New(k.url))
}

// TestBothSurfacesREST: a session created over Vertex AI's REST API is
// kioku.v1's, and the reverse.
func TestBothSurfacesREST(t *testing.T) {
	k := startKioku(t, nil)
	v := googleClient(t, aiplatform.NewSessionRESTClient, k.restOptions())
	bothSurfaces(t, v, client.New(k.url))
}
