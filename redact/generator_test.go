package redact_test

import (
	"strings"
	"testing"

	"github.com/kioku-ai/kioku/model"
	"github.com/kioku-ai/kioku/model/modeltest"
	"github.com/kioku-ai/kioku/redact"
)

// TestGenerator: what a provider receives through a redacting generator
// holds placeholders, not the personal data, in the system instruction
// and in every message; the reply comes back as the model wrote it.
func TestGenerator(t *testing.T) {
	r, err := redact.New(redact.Rules{})
	if err != nil {
		t.Fatal(err)
	}
	if redact.Generator(model.OfflineExtractor{}, nil) != (model.OfflineExtractor{}) {
		t.Error("without a Redactor the generator is not the one given")
	}
	if !model.IsOfflineExtractor(redact.Generator(model.OfflineExtractor{}, r)) {
		t.Error("a redacting offline extractor is not seen as the offline extractor")
	}
	fake := modeltest.NewOpenAI(t)
	fake.ReplyText("ok ann@example.com")
	g := redact.Generator(model.NewOpenAI(fake.Config(), "m"), r)
	if g.Name() != model.NewOpenAI(fake.Config(), "m").Name() {
		t.Errorf("Name = %q", g.Name())
	}
	req := &model.GenerateRequest{
		System:   "The user's card is 4111 1111 1111 1111.",
		Messages: []model.Message{{Role: "user", Text: "Mail ann@example.com"}, {Role: "model", Text: "noted"}, {Role: "user", Text: "call 090-1234-5678"}},
	}
	resp, err := g.Generate(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text != "ok ann@example.com" {
		t.Errorf("reply %q changed", resp.Text)
	}
	if req.System != "The user's card is 4111 1111 1111 1111." || req.Messages[0].Text != "Mail ann@example.com" {
		t.Errorf("the caller's request was changed: %+v", req)
	}
	calls := fake.Calls()
	if len(calls) != 1 {
		t.Fatalf("%d calls", len(calls))
	}
	sent := calls[0].System + "\n" + calls[0].Text()
	for _, secret := range []string{"4111", "ann@example.com", "090-1234-5678"} {
		if strings.Contains(sent, secret) {
			t.Errorf("the model received %q:\n%s", secret, sent)
		}
	}
	for _, want := range []string{"The user's card is [CARD].", "Mail [EMAIL]", "noted", "call [PHONE]"} {
		if !strings.Contains(sent, want) {
			t.Errorf("the model did not receive %q:\n%s", want, sent)
		}
	}
}
