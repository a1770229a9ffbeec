package vertexcontent_test

import (
	"testing"

	"cloud.google.com/go/aiplatform/apiv1beta1/aiplatformpb"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/genai"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/kioku-ai/kioku/internal/content"
	"github.com/kioku-ai/kioku/internal/content/vertexcontent"
	"github.com/kioku-ai/kioku/internal/prototest"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
)

func TestVertexRoundTripsEveryPart(t *testing.T) {
	in := &aiplatformpb.Content{Role: "model", Parts: []*aiplatformpb.Part{
		{Data: &aiplatformpb.Part_Text{Text: "thinking"}, Thought: true, ThoughtSignature: []byte{9, 8}},
		{Data: &aiplatformpb.Part_InlineData{InlineData: &aiplatformpb.Blob{MimeType: "image/png", Data: []byte("png")}}},
		{Data: &aiplatformpb.Part_FileData{FileData: &aiplatformpb.FileData{MimeType: "video/mp4", FileUri: "gs://b/v.mp4"}},
			Metadata: &aiplatformpb.Part_VideoMetadata{VideoMetadata: &aiplatformpb.VideoMetadata{StartOffset: durationpb.New(2e9)}}},
		{Data: &aiplatformpb.Part_FunctionCall{FunctionCall: &aiplatformpb.FunctionCall{Id: "c1", Name: "f", Args: prototest.Struct(t, map[string]any{"x": 1.0}), WillContinue: true,
			PartialArgs: []*aiplatformpb.PartialArg{{JsonPath: "$.x", Delta: &aiplatformpb.PartialArg_NumberValue{NumberValue: 1}}}}}},
		{Data: &aiplatformpb.Part_FunctionResponse{FunctionResponse: &aiplatformpb.FunctionResponse{Id: "c1", Name: "f", Response: prototest.Struct(t, map[string]any{"y": "z"}),
			Parts: []*aiplatformpb.FunctionResponsePart{{Data: &aiplatformpb.FunctionResponsePart_InlineData{InlineData: &aiplatformpb.FunctionResponseBlob{MimeType: "text/plain", Data: []byte("r")}}}}}}},
		{Data: &aiplatformpb.Part_ExecutableCode{ExecutableCode: &aiplatformpb.ExecutableCode{Language: aiplatformpb.ExecutableCode_PYTHON, Code: "print(1)"}}},
		{Data: &aiplatformpb.Part_CodeExecutionResult{CodeExecutionResult: &aiplatformpb.CodeExecutionResult{Outcome: aiplatformpb.CodeExecutionResult_OUTCOME_OK, Output: "1"}}},
	}}
	d, err := vertexcontent.FromVertex(in)
	if err != nil {
		t.Fatal(err)
	}
	if d.Parts[3].FunctionCall == nil || d.Parts[3].FunctionCall.Args["x"] != 1.0 {
		t.Fatalf("function call = %+v", d.Parts[3])
	}
	out, err := vertexcontent.ToVertex(d)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(in, out, protocmp.Transform()); diff != "" {
		t.Fatalf("Vertex -> domain -> Vertex (-in +out):\n%s", diff)
	}

	// Vertex's executable code reaches genai through the domain, and back.
	g, err := content.ToGenai(d)
	if err != nil {
		t.Fatal(err)
	}
	if c := g.Parts[5].ExecutableCode; c == nil || c.Code != "print(1)" || c.Language != genai.LanguagePython {
		t.Fatalf("genai part = %+v, want the executable code", g.Parts[5])
	}
	if v := g.Parts[2].VideoMetadata; v == nil || v.StartOffset != 2e9 {
		t.Fatalf("genai part = %+v, want the video metadata", g.Parts[2])
	}
	back, err := content.FromGenai(g)
	if err != nil {
		t.Fatal(err)
	}
	out2, err := vertexcontent.ToVertex(back)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(in, out2, protocmp.Transform()); diff != "" {
		t.Fatalf("Vertex -> genai -> Vertex (-in +out):\n%s", diff)
	}
}

func TestToVertexKeepsOneDataMember(t *testing.T) {
	d := &sessiontype.Content{Role: "model", Parts: []sessiontype.Part{
		{Text: "both", FunctionCall: &sessiontype.FunctionCall{Name: "f"}},
		// An extension that is not Vertex AI's shape is dropped, the rest kept.
		{Text: "odd", Extensions: map[string]any{"videoMetadata": "not an object", "mediaResolution": map[string]any{"level": "HIGH"}}},
		{Thought: true},
	}}
	out, err := vertexcontent.ToVertex(d)
	if err != nil {
		t.Fatal(err)
	}
	want := &aiplatformpb.Content{Role: "model", Parts: []*aiplatformpb.Part{
		{Data: &aiplatformpb.Part_Text{Text: "both"}},
		{Data: &aiplatformpb.Part_Text{Text: "odd"}},
		{Thought: true},
	}}
	if diff := cmp.Diff(want, out, protocmp.Transform()); diff != "" {
		t.Fatalf("ToVertex (-want +got):\n%s", diff)
	}
	if c, err := vertexcontent.ToVertex(nil); c != nil || err != nil {
		t.Fatalf("ToVertex(nil) = %v, %v", c, err)
	}
	if c, err := vertexcontent.FromVertex(nil); c != nil || err != nil {
		t.Fatalf("FromVertex(nil) = %v, %v", c, err)
	}
}
