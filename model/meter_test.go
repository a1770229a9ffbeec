package model_test

import (
	"context"
	"errors"
	"testing"

	"github.com/kioku-ai/kioku/model"
)

type scriptedGenerator struct{ fail bool }

func (g scriptedGenerator) Name() string { return "gen-x" }
func (g scriptedGenerator) Generate(context.Context, *model.GenerateRequest) (*model.GenerateResponse, error) {
	if g.fail {
		return nil, errors.New("quota")
	}
	return &model.GenerateResponse{Text: "{}", PromptTokens: 7, OutputTokens: 3}, nil
}

func TestMeter(t *testing.T) {
	m := model.NewMeter()
	ok, bad := m.Generator(scriptedGenerator{}), m.Generator(scriptedGenerator{fail: true})
	emb := m.Embedder(model.Offline{})
	for range 2 {
		if _, err := ok.Generate(t.Context(), &model.GenerateRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := bad.Generate(t.Context(), &model.GenerateRequest{}); err == nil {
		t.Fatal("the failing generator succeeded through the meter")
	}
	if v, err := emb.Embed(t.Context(), []string{"a", "b", "c"}, model.TaskDocument); err != nil || len(v) != 3 {
		t.Fatalf("Embed through the meter: %d vectors, %v", len(v), err)
	}
	if ok.Name() != "gen-x" || emb.Dimensions() != model.OfflineDimensions {
		t.Errorf("the meter changed Name or Dimensions: %q, %d", ok.Name(), emb.Dimensions())
	}
	// The memory bank ranks by the lexical side alone with the offline
	// embedder, metered or not.
	if !model.IsOffline(emb) || !model.IsOffline(model.Offline{}) || model.IsOffline(m.Embedder(&model.GeminiEmbedder{})) {
		t.Errorf("IsOffline: metered offline %v, offline %v, metered Gemini %v (want true, true, false)",
			model.IsOffline(emb), model.IsOffline(model.Offline{}), model.IsOffline(m.Embedder(&model.GeminiEmbedder{})))
	}
	want := []model.Usage{
		{Model: "gen-x", Call: "generate", OK: true, Calls: 2, PromptTokens: 14, OutputTokens: 6},
		{Model: "gen-x", Call: "generate", OK: false, Calls: 1},
		{Model: emb.Name(), Call: "embed", OK: true, Calls: 1, Texts: 3},
	}
	got := m.Usage()
	if len(got) != len(want) {
		t.Fatalf("Usage = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("Usage[%d] = %+v, want %+v", i, got[i], want[i])
		}
	}
}
