package sessiontype

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"
	"time"
)

// trickyStrings are strings whose JSON escaping has rules of its own.
var trickyStrings = []string{
	"", "plain", `quote " and \ backslash`, "tab\tnew\nline\rreturn", "\b\f\x00\x01\x1f\x7f",
	"<b>&amp;</b>", "東京 Zürich 🍵", "bad \xff\xfe utf-8 \xe2\x82", "line\u2028para\u2029sep",
	"\u00e9\u0301", "\xed\xa0\x80 surrogate", "a\u2027b\u202ac",
}

// randomString draws a string of pieces of trickyStrings and random runes.
func randomString(r *rand.Rand) string {
	var b []byte
	for range r.IntN(4) {
		if r.IntN(2) == 0 {
			b = append(b, trickyStrings[r.IntN(len(trickyStrings))]...)
		} else {
			b = append(b, string(rune(r.IntN(0x2100)))...)
		}
	}
	return string(b)
}

// randomEvent draws an event that sets a random choice of fields.
func randomEvent(r *rand.Rand) *Event {
	s := func() string {
		if r.IntN(3) == 0 {
			return ""
		}
		return randomString(r)
	}
	m := func() map[string]any {
		switch r.IntN(4) {
		case 0:
			return nil
		case 1:
			return map[string]any{}
		}
		return map[string]any{s(): s(), "n": r.Float64() * 1e6, "nested": map[string]any{"<k>": []any{true, nil, 3.0, s()}}}
	}
	ts := func() time.Time {
		if r.IntN(3) == 0 {
			return time.Time{}
		}
		return time.Unix(r.Int64N(4e9), r.Int64N(1e9)).In(time.FixedZone("z", r.IntN(20)*1800-36000))
	}
	e := &Event{
		ID: s(), InvocationID: s(), Author: s(), Timestamp: ts(), Partial: r.IntN(2) == 0, TurnComplete: r.IntN(2) == 0,
		ErrorCode: s(), ErrorMessage: s(), CustomMetadata: m(), Sequence: r.Int64N(3) * r.Int64N(1e12), Branch: s(),
		Interrupted: r.IntN(2) == 0, UsageMetadata: m(), GroundingMetadata: m(), CitationMetadata: m(),
		FinishReason: s(), ModelVersion: s(), Extensions: m(),
		KeepZeroTimestamp: r.IntN(2) == 0, Size: r.IntN(100),
		Actions: Actions{StateDelta: m(), TransferToAgent: s(), Escalate: r.IntN(2) == 0, SkipSummarization: r.IntN(2) == 0},
	}
	if r.IntN(2) == 0 {
		e.LongRunningToolIDs = []string{}
		for range r.IntN(3) {
			e.LongRunningToolIDs = append(e.LongRunningToolIDs, s())
		}
	}
	if r.IntN(2) == 0 {
		e.Actions.ArtifactDelta = map[string]int64{s(): r.Int64N(9), "f.txt": -1}
	}
	if r.IntN(3) == 0 {
		e.Actions.Compaction = &Compaction{StartSequence: r.Int64N(5), EndSequence: r.Int64N(50), StartTime: ts(), EndTime: ts(), Model: s(), PromptVersion: s()}
	}
	if r.IntN(4) != 0 {
		e.Content = &Content{Role: s()}
		for range r.IntN(4) {
			p := Part{Text: s(), Thought: r.IntN(3) == 0, Extensions: m()}
			switch r.IntN(6) {
			case 0:
				p.InlineData = &Blob{MIMEType: s(), Data: []byte(s()), DisplayName: s()}
			case 1:
				p.FileData = &FileData{MIMEType: s(), FileURI: s(), DisplayName: s()}
			case 2:
				p.FunctionCall = &FunctionCall{ID: s(), Name: s(), Args: m()}
			case 3:
				p.FunctionResponse = &FunctionResponse{ID: s(), Name: s(), Response: m()}
			}
			if r.IntN(3) == 0 {
				p.ThoughtSignature = []byte(s())
			}
			e.Content.Parts = append(e.Content.Parts, p)
		}
	}
	return e
}

// TestMarshalIsEncodingJSON: Event.Marshal writes what encoding/json
// writes for the event, byte for byte, over events setting random fields
// to strings that need every kind of escape.
func TestMarshalIsEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(26, 1))
	for i := range 5000 {
		e := randomEvent(r)
		want, wantErr := json.Marshal(e)
		got, err := e.Marshal()
		if (err != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
			t.Fatalf("event %d: Marshal = %s, %v\nencoding/json = %s, %v", i, got, err, want, wantErr)
		}
	}
	// A time encoding/json refuses is refused.
	if _, err := (&Event{Timestamp: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}).Marshal(); err == nil {
		t.Error("an event of year 10000 was encoded")
	}
}

// FuzzAppendJSONString: a string is written as encoding/json writes it.
func FuzzAppendJSONString(f *testing.F) {
	for _, s := range trickyStrings {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendJSONString(nil, s); !bytes.Equal(got, want) {
			t.Errorf("appendJSONString(%q) = %s, want %s", s, got, want)
		}
	})
}
