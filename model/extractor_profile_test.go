package model_test

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kioku-ai/kioku/model"
)

// profileField is a profile field in the extraction reply's schema, as
// memorybank's profile_generation.go declares it: {value, events}.
type profileField[T any] struct {
	Value  T     `json:"value"`
	Events []int `json:"events"`
}

type profileExtractionReply struct {
	extractionReply
	Profile struct {
		UserProfile struct {
			PreferredLanguage profileField[string] `json:"preferred_language"`
			Tone              struct {
				Value  string `json:"value" jsonschema:"enum=succinct,enum=detailed"`
				Events []int  `json:"events"`
			} `json:"tone"`
			Age        profileField[int]    `json:"age"`
			Vegetarian profileField[bool]   `json:"is_vegetarian"`
			Hometown   profileField[string] `json:"hometown"`
		} `json:"user-profile"`
	} `json:"profile"`
}

// TestOfflineExtractorFillsProfiles: when the extraction's response
// schema asks for profile fields, the offline extractor fills those the
// user states, each with the event that states it and in the field's
// JSON type, the last statement winning; what another speaker says fills
// nothing, and a field nobody states is left out.
func TestOfflineExtractorFillsProfiles(t *testing.T) {
	req := &model.GenerateRequest{
		System: "You maintain the long-term memory of an assistant about its user. ...",
		Messages: []model.Message{{Role: "user", Text: `The conversation:
[1] user: My preferred language is Python. I'm 34. (2026-05-08 09:00)
[2] hana: My preferred language is Rust and I'm from Osaka. (2026-05-08 09:00)
[3] user: I prefer succinct answers, and I'm vegetarian. (2026-05-08 09:01)
[4] user: Well, my preferred language is Go. (2026-05-08 09:02)
`}},
		Schema: model.SchemaFor(&profileExtractionReply{}),
	}
	resp, err := model.OfflineExtractor{}.Generate(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(resp.Text), &got); err != nil {
		t.Fatalf("reply %q: %v", resp.Text, err)
	}
	want := map[string]any{"user-profile": map[string]any{
		"preferred_language": map[string]any{"value": "Go", "events": []any{4.0}},
		"age":                map[string]any{"value": 34.0, "events": []any{1.0}},
		"tone":               map[string]any{"value": "succinct", "events": []any{3.0}},
		"is_vegetarian":      map[string]any{"value": true, "events": []any{3.0}},
	}}
	if diff := cmp.Diff(want, got["profile"]); diff != "" {
		t.Fatalf("profile (-want +got):\n%s\nreply: %s", diff, resp.Text)
	}
	if _, ok := got["facts"].([]any); !ok {
		t.Fatalf("the reply has no facts list: %s", resp.Text)
	}
}
