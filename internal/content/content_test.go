package content_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/genai"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/kioku-ai/kioku/internal/content"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
)

// richGenai is genai content with every kind of part and fields the domain
// does not type.
func richGenai() *genai.Content {
	type weather struct {
		City  string  `json:"city"`
		TempC float64 `json:"temp_c"`
	}
	fps := 2.0
	return &genai.Content{Role: "model", Parts: []*genai.Part{
		{Text: "thinking...", Thought: true, ThoughtSignature: []byte{1, 2, 3}},
		{Text: "Here you are."},
		{InlineData: &genai.Blob{MIMEType: "image/png", Data: []byte("png bytes"), DisplayName: "cat.png"}},
		{FileData: &genai.FileData{MIMEType: "application/pdf", FileURI: "gs://b/o.pdf", DisplayName: "o.pdf"}},
		{FunctionCall: &genai.FunctionCall{ID: "c1", Name: "get_weather", Args: map[string]any{"where": weather{City: "Sapporo", TempC: -3}}, WillContinue: new(true)}},
		{FunctionResponse: &genai.FunctionResponse{ID: "c1", Name: "get_weather", Response: map[string]any{"output": weather{City: "Sapporo", TempC: -3}}}},
		{ExecutableCode: &genai.ExecutableCode{Code: "print(1)", Language: genai.LanguagePython}},
		{CodeExecutionResult: &genai.CodeExecutionResult{Outcome: genai.OutcomeOK, Output: "1\n"}},
		{FileData: &genai.FileData{FileURI: "gs://b/v.mp4", MIMEType: "video/mp4"}, VideoMetadata: &genai.VideoMetadata{StartOffset: 2 * time.Second, EndOffset: 5 * time.Second, FPS: &fps}},
	}}
}

func jsonOf(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestGenaiRoundTripsEveryField(t *testing.T) {
	in := richGenai()
	d, err := content.FromGenai(in)
	if err != nil {
		t.Fatal(err)
	}
	// The typed fields come out typed; the rest sits in the extensions.
	if d.Parts[0].Text != "thinking..." || !d.Parts[0].Thought || string(d.Parts[0].ThoughtSignature) != "\x01\x02\x03" {
		t.Fatalf("thought part = %+v", d.Parts[0])
	}
	if fc := d.Parts[4].FunctionCall; fc == nil || fc.Name != "get_weather" || fc.Args["where"].(map[string]any)["city"] != "Sapporo" {
		t.Fatalf("function call = %+v", d.Parts[4].FunctionCall)
	}
	if diff := cmp.Diff(map[string]any{"functionCall": map[string]any{"willContinue": true}}, d.Parts[4].Extensions); diff != "" {
		t.Fatalf("function call extensions (-want +got):\n%s", diff)
	}
	if d.Parts[6].Extensions["executableCode"] == nil {
		t.Fatalf("executable code not kept: %+v", d.Parts[6])
	}
	// Through kioku.v1 and back, then to genai: the same JSON as the input.
	kv, err := content.ToKioku(d)
	if err != nil {
		t.Fatal(err)
	}
	out, err := content.ToGenai(content.FromKioku(kv))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(jsonOf(t, in), jsonOf(t, out)); diff != "" {
		t.Fatalf("genai -> domain -> kioku.v1 -> domain -> genai (-in +out):\n%s", diff)
	}
	// The convenience forms agree.
	kv2, err := content.GenaiToKioku(in)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(kv, kv2, protocmp.Transform()); diff != "" {
		t.Fatalf("GenaiToKioku (-want +got):\n%s", diff)
	}
	out2, err := content.KiokuToGenai(kv2)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(jsonOf(t, in), jsonOf(t, out2)); diff != "" {
		t.Fatalf("KiokuToGenai (-in +out):\n%s", diff)
	}
}

func TestNilAndEmpty(t *testing.T) {
	if c, err := content.FromGenai(nil); c != nil || err != nil {
		t.Fatalf("FromGenai(nil) = %v, %v", c, err)
	}
	if c, err := content.ToGenai(nil); c != nil || err != nil {
		t.Fatalf("ToGenai(nil) = %v, %v", c, err)
	}
	if c := content.FromKioku(nil); c != nil {
		t.Fatalf("FromKioku(nil) = %v", c)
	}
	if c, err := content.ToKioku(nil); c != nil || err != nil {
		t.Fatalf("ToKioku(nil) = %v, %v", c, err)
	}
	// A domain part that is only text has no extensions in any form.
	d := &sessiontype.Content{Role: "user", Parts: []sessiontype.Part{{Text: "hi"}}}
	kv, err := content.ToKioku(d)
	if err != nil || kv.GetParts()[0].GetExtensions() != nil {
		t.Fatalf("ToKioku = %v, %v; want no extensions", kv, err)
	}
	g, err := content.ToGenai(d)
	if err != nil || g.Parts[0].Text != "hi" || g.Role != "user" {
		t.Fatalf("ToGenai = %+v, %v", g, err)
	}
	back, err := content.FromGenai(g)
	if err != nil || back.Parts[0].Extensions != nil {
		t.Fatalf("FromGenai(text) = %+v, %v; want no extensions", back, err)
	}
}
