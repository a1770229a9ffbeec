package vertex_test

import (
	"testing"
	"time"

	aiplatform "cloud.google.com/go/aiplatform/apiv1beta1"

	aiplatformv1pb "cloud.google.com/go/aiplatform/apiv1/aiplatformpb"
	"cloud.google.com/go/aiplatform/apiv1beta1/aiplatformpb"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/kioku-ai/kioku/internal/prototest"
)

// TestEventRoundTripsEveryField appends an event with every field of
// Vertex AI's SessionEvent set and reads it back the same, raw_event and
// custom_metadata exactly as sent.
func TestEventRoundTripsEveryField(t *testing.T) {
	k := startKioku(t, nil)
	ctx := t.Context()
	c := googleClient(t, aiplatform.NewSessionClient, k.grpcOptions())
	createSession(t, c, "rich", "ann")
	token := ""
	ev := &aiplatformpb.SessionEvent{
		Author:       "helper",
		InvocationId: "inv-9",
		Timestamp:    timestamppb.New(time.Date(2026, 7, 8, 9, 10, 11, 120000000, time.UTC)),
		ErrorCode:    "SAFETY",
		ErrorMessage: "blocked",
		Content: &aiplatformpb.Content{Role: "model", Parts: []*aiplatformpb.Part{
			{Data: &aiplatformpb.Part_Text{Text: "hmm"}, Thought: true, ThoughtSignature: []byte("sig")},
			{Data: &aiplatformpb.Part_InlineData{InlineData: &aiplatformpb.Blob{MimeType: "image/png", Data: []byte{0x89, 'P', 'N', 'G'}}}},
			{Data: &aiplatformpb.Part_FileData{FileData: &aiplatformpb.FileData{MimeType: "application/pdf", FileUri: "gs://b/o.pdf"}}},
			{Data: &aiplatformpb.Part_FunctionResponse{FunctionResponse: &aiplatformpb.FunctionResponse{Id: "c1", Name: "f", Response: prototest.Struct(t, map[string]any{"ok": true})}}},
			{Data: &aiplatformpb.Part_ExecutableCode{ExecutableCode: &aiplatformpb.ExecutableCode{Language: aiplatformpb.ExecutableCode_PYTHON, Code: "1+1"}}},
		}},
		Actions: &aiplatformpb.EventActions{
			SkipSummarization:    true,
			StateDelta:           prototest.Struct(t, map[string]any{"k": []any{1.0, "two"}, "user:u": map[string]any{"nested": nil}}),
			ArtifactDelta:        map[string]int32{"report.pdf": 2},
			Escalate:             true,
			RequestedAuthConfigs: prototest.Struct(t, map[string]any{"call-1": map[string]any{"authScheme": "oauth2"}}),
			TransferAgent:        "billing",
		},
		EventMetadata: &aiplatformpb.EventMetadata{
			GroundingMetadata: &aiplatformpb.GroundingMetadata{
				WebSearchQueries:             []string{"tea"},
				GoogleMapsWidgetContextToken: &token,
				SearchEntryPoint:             &aiplatformpb.SearchEntryPoint{RenderedContent: "<div/>"},
			},
			TurnComplete:        true,
			Interrupted:         true,
			LongRunningToolIds:  []string{"t1", "t2"},
			Branch:              "root.helper",
			CustomMetadata:      prototest.Struct(t, map[string]any{"n": 1.5, "list": []any{true, nil}, "deep": map[string]any{"a": "b"}}),
			InputTranscription:  &aiplatformpb.Transcription{Text: "hello", Finished: true},
			OutputTranscription: &aiplatformpb.Transcription{Text: "hi"},
		},
		RawEvent: prototest.Struct(t, map[string]any{"id": "adk-1", "author": "helper", "nodeInfo": map[string]any{"path": "wf/step@1"}}),
	}
	if _, err := c.AppendEvent(ctx, &aiplatformpb.AppendEventRequest{Name: engine + "/sessions/rich", Event: ev}); err != nil {
		t.Fatal(err)
	}
	events := allEvents(t, c, &aiplatformpb.ListEventsRequest{Parent: engine + "/sessions/rich"})
	if len(events) != 1 {
		t.Fatalf("%d events, want 1", len(events))
	}
	got := events[0]
	if len(got.GetName()) <= len(engine+"/sessions/rich/events/") {
		t.Fatalf("event name %q", got.GetName())
	}
	ev.Name = got.GetName()
	if diff := cmp.Diff(ev, got, protocmp.Transform()); diff != "" {
		t.Fatalf("event round trip (-sent +got):\n%s", diff)
	}
}

// TestV1MessagesAreV1beta1s checks what the v1 service relies on: every
// message its methods use, at any depth, has v1beta1's fields with the
// same numbers, names and kinds (the few fields one version lacks are
// listed; they pass as unknown fields).
func TestV1MessagesAreV1beta1s(t *testing.T) {
	lacking := map[string]bool{
		"google.cloud.aiplatform.v1.FunctionCall.id":                     true, // v1 lacks
		"google.cloud.aiplatform.v1.FunctionResponse.id":                 true,
		"google.cloud.aiplatform.v1.RagChunk.file_id":                    true,
		"google.cloud.aiplatform.v1.RagChunk.chunk_id":                   true,
		"google.cloud.aiplatform.v1.GroundingMetadata.retrieval_queries": true,
		"google.cloud.aiplatform.v1.Part.media_resolution":               true, // v1beta1 lacks
		"google.cloud.aiplatform.v1.VideoMetadata.fps":                   true,
	}
	seen := map[protoreflect.FullName]bool{}
	var compare func(a, b protoreflect.MessageDescriptor)
	compare = func(a, b protoreflect.MessageDescriptor) {
		if seen[a.FullName()] || a.FullName().Parent() == "google.protobuf" {
			return
		}
		seen[a.FullName()] = true
		for i := 0; i < a.Fields().Len(); i++ {
			fa := a.Fields().Get(i)
			fb := b.Fields().ByNumber(fa.Number())
			if fb == nil {
				if !lacking[string(fa.FullName())] {
					t.Errorf("%s (%d) is not in v1beta1", fa.FullName(), fa.Number())
				}
				continue
			}
			if fa.Name() != fb.Name() || fa.Kind() != fb.Kind() || fa.Cardinality() != fb.Cardinality() || fa.IsMap() != fb.IsMap() {
				t.Errorf("%s differs from %s", fa.FullName(), fb.FullName())
			}
			if fa.Message() != nil && fb.Message() != nil {
				compare(fa.Message(), fb.Message())
			}
		}
		for i := 0; i < b.Fields().Len(); i++ {
			fb := b.Fields().Get(i)
			if a.Fields().ByNumber(fb.Number()) == nil && !lacking["google.cloud.aiplatform.v1."+string(a.Name())+"."+string(fb.Name())] {
				t.Errorf("%s (%d) is not in v1", fb.FullName(), fb.Number())
			}
		}
	}
	sa := aiplatformv1pb.File_google_cloud_aiplatform_v1_session_service_proto.Services().ByName("SessionService")
	sb := aiplatformpb.File_google_cloud_aiplatform_v1beta1_session_service_proto.Services().ByName("SessionService")
	for i := 0; i < sa.Methods().Len(); i++ {
		ma := sa.Methods().Get(i)
		mb := sb.Methods().ByName(ma.Name())
		if mb == nil {
			t.Fatalf("v1beta1 has no %s", ma.Name())
		}
		compare(ma.Input(), mb.Input())
		compare(ma.Output(), mb.Output())
	}
	for _, name := range []string{"CreateSessionOperationMetadata", "DeleteOperationMetadata"} {
		a := aiplatformv1pb.File_google_cloud_aiplatform_v1_session_service_proto.Messages().ByName(protoreflect.Name(name))
		if a == nil {
			a = aiplatformv1pb.File_google_cloud_aiplatform_v1_operation_proto.Messages().ByName(protoreflect.Name(name))
		}
		b := aiplatformpb.File_google_cloud_aiplatform_v1beta1_session_service_proto.Messages().ByName(protoreflect.Name(name))
		if b == nil {
			b = aiplatformpb.File_google_cloud_aiplatform_v1beta1_operation_proto.Messages().ByName(protoreflect.Name(name))
		}
		if a == nil || b == nil {
			t.Fatalf("%s: v1 %v, v1beta1 %v", name, a, b)
		}
		compare(a, b)
	}
	if len(seen) < 40 {
		t.Fatalf("compared only %d messages", len(seen))
	}
}

// TestAppendWithAnEventNameIsIdempotent: an event named by its caller gets
// that id, and appending it again stores nothing twice; the same name with
// other content is refused.
func TestAppendWithAnEventNameIsIdempotent(t *testing.T) {
	k := startKioku(t, nil)
	ctx := t.Context()
	c := googleClient(t, aiplatform.NewSessionClient, k.grpcOptions())
	s := createSession(t, c, "retry", "ann")
	ev := func(text string) *aiplatformpb.SessionEvent {
		return &aiplatformpb.SessionEvent{Name: s.GetName() + "/events/e-1", Author: "user", InvocationId: "i", Timestamp: timestamppb.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)),
			Content: &aiplatformpb.Content{Role: "user", Parts: []*aiplatformpb.Part{{Data: &aiplatformpb.Part_Text{Text: text}}}},
			Actions: &aiplatformpb.EventActions{StateDelta: prototest.Struct(t, map[string]any{"n": 1.0})}}
	}
	for range 2 {
		if _, err := c.AppendEvent(ctx, &aiplatformpb.AppendEventRequest{Name: s.GetName(), Event: ev("once")}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.AppendEvent(ctx, &aiplatformpb.AppendEventRequest{Name: s.GetName(), Event: ev("other")}); codeOf(err) != codes.AlreadyExists {
		t.Errorf("the same name, other content: %v, want ALREADY_EXISTS", err)
	}
	bad := ev("x")
	bad.Name = engine + "/sessions/other/events/e-2"
	if _, err := c.AppendEvent(ctx, &aiplatformpb.AppendEventRequest{Name: s.GetName(), Event: bad}); codeOf(err) != codes.InvalidArgument {
		t.Errorf("an event name of another session: %v, want INVALID_ARGUMENT", err)
	}
	events := allEvents(t, c, &aiplatformpb.ListEventsRequest{Parent: s.GetName()})
	if len(events) != 1 || events[0].GetName() != s.GetName()+"/events/e-1" {
		t.Fatalf("events %v, want the one named e-1", events)
	}
}
