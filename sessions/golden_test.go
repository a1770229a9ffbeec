package sessions_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kioku-ai/kioku/internal/golden"
	"github.com/kioku-ai/kioku/sessions/sessiondriver"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
)

// TestEventGolden: the stored form of an event with every field set is
// testdata/event.json, and that file decodes to the event. A diff is a
// change of the format both stores keep events in.
func TestEventGolden(t *testing.T) {
	e := &sessiontype.Event{
		ID: "e1", InvocationID: "i1", Author: "model",
		Content: &sessiontype.Content{Role: "model", Parts: []sessiontype.Part{
			{Text: "Here you are.", Thought: true, ThoughtSignature: []byte{1, 2}},
			{InlineData: &sessiontype.Blob{MIMEType: "image/png", Data: []byte{0x89, 'P'}, DisplayName: "p.png"}},
			{FileData: &sessiontype.FileData{MIMEType: "application/pdf", FileURI: "gs://b/f.pdf", DisplayName: "f"}},
			{FunctionCall: &sessiontype.FunctionCall{ID: "c1", Name: "lookup", Args: map[string]any{"q": "tea"}}},
			{FunctionResponse: &sessiontype.FunctionResponse{ID: "c1", Name: "lookup", Response: map[string]any{"ok": true}}, Extensions: map[string]any{"x": 1.0}},
		}},
		Actions: sessiontype.Actions{StateDelta: map[string]any{"user:drink": "tea", "n": 2.0, "gone": nil}, ArtifactDelta: map[string]int64{"a.txt": 3},
			TransferToAgent: "helper", Escalate: true, SkipSummarization: true},
		Timestamp: time.Date(2026, 1, 2, 3, 4, 5, 600, time.UTC), TurnComplete: true, ErrorCode: "E", ErrorMessage: "m",
		CustomMetadata: map[string]any{"k": "v"}, Sequence: 7, Branch: "a.b", Interrupted: true, LongRunningToolIDs: []string{"c1"},
		UsageMetadata: map[string]any{"tokens": 3.0}, GroundingMetadata: map[string]any{"g": "x"}, CitationMetadata: map[string]any{"c": "y"},
		FinishReason: "STOP", ModelVersion: "gemini-x", Extensions: map[string]any{"y": "z"},
	}
	got, err := e.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	want := golden.Check(t, filepath.Join("testdata", "event.json"), got)
	back, err := sessiondriver.UnmarshalEvent(want)
	if err != nil {
		t.Fatal(err)
	}
	if back.Size != len(want) {
		t.Errorf("decoded size %d, want the encoding's %d", back.Size, len(want))
	}
	e.Size = back.Size
	if diff := cmp.Diff(e, back); diff != "" {
		t.Errorf("decoded (-sample +golden):\n%s", diff)
	}
}
