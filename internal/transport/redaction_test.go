package transport_test

import (
	"encoding/json"
	"fmt"
	"path"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/internal/node"
	"github.com/kioku-ai/kioku/model"
	"github.com/kioku-ai/kioku/model/modeltest"
)

// wireFake is what the Gemini and the OpenAI-compatible fakes record.
type wireFake interface {
	Calls() []modeltest.Call
	EmbeddedTexts() []string
	SetResponder(func(modeltest.Call) modeltest.Reply)
}

// The personal data of the conversation, and what replaces it.
var (
	wireSecrets      = []string{"ann@example.com", "555-0199", "4111", "Baker Street", "０９０－１２３４－５６７８"}
	wirePlaceholders = []string{"[EMAIL]", "[PHONE]", "[CARD]", "[ADDRESS]", "携帯は[PHONE]です。"}
	// wireForms are the other forms of the secrets that the model might
	// be sent (a number made ASCII).
	wireForms = []string{"090-1234-5678", "09012345678"}
)

// TestPIIRedactionOnTheWire: with pii_redaction on for an app, a session
// holding an e-mail address, phone numbers (one Japanese, in full-width
// digits), a card number and a street address is turned into memories and
// compacted, and the model's side of the wire (the fake Gemini API and the
// fake OpenAI-compatible server, through the real clients) receives none
// of them, anywhere in the request bodies of the extraction, the
// consolidation and the compaction, or in the embeddings; what kioku keeps of
// the model's replies (memories, the summary) holds placeholders even
// where the model wrote the data back; the session's events are stored as
// given.
func TestPIIRedactionOnTheWire(t *testing.T) {
	for _, provider := range []string{"gemini", "openai"} {
		t.Run(provider, func(t *testing.T) {
			var fake wireFake
			var models model.Config
			if provider == "gemini" {
				g := modeltest.NewGemini(t)
				fake, models = g, model.Config{Provider: "gemini", GeminiAPIKey: "k", GeminiBaseURL: g.URL, Embedder: "gemini", Retry: modeltest.FastRetry}
			} else {
				o := modeltest.NewOpenAI(t)
				fake, models = o, model.Config{Provider: "openai", Model: "chat-test", OpenAIBaseURL: o.URL, OpenAIAPIKey: "test-key",
					Embedder: "openai", EmbedModel: "embed-test", EmbedDims: o.Dims, Retry: modeltest.FastRetry}
			}
			c, _ := startNode(t, true, func(cfg *node.Config) { cfg.Models = models })
			testRedactionOnTheWire(t, c, fake)
		})
	}
}

func testRedactionOnTheWire(t *testing.T, c *clients, fake wireFake) {
	ctx := t.Context()
	const session = "apps/a/users/ann/sessions/s1"
	// The model answers each call, writing the personal data back.
	fake.SetResponder(func(call modeltest.Call) modeltest.Reply {
		switch {
		case strings.Contains(call.System, "list the facts"):
			return modeltest.Reply{Text: `{"facts":[{"fact":"Ann's email address is ann@example.com.","topic":"USER_PERSONAL_INFO","events":[1]},` +
				`{"fact":"Ann pays with the card 4111 1111 1111 1111.","topic":"USER_PERSONAL_INFO","events":[2]}]}`}
		case strings.Contains(call.System, "Compare each new fact"):
			return modeltest.Reply{Text: `{"actions":[{"candidate":1,"action":"UPDATE","memory":1,"fact":"Ann's email address is ann@example.com; call her on (212) 555-0199."},` +
				`{"candidate":2,"action":"CREATE","memory":0,"fact":"Ann pays with 4111-1111-1111-1111 and lives at 221B Baker Street."}]}`}
		case strings.Contains(call.System, "running summary"):
			return modeltest.Reply{Text: "Ann (ann@example.com, +1 212 555 0199) lives at 221B Baker Street."}
		}
		return modeltest.Reply{Status: 400}
	})

	pii := &kiokuv1.PiiRedaction{Enabled: true}
	if _, err := c.memories.UpdateMemoryBankConfig(ctx, req(&kiokuv1.UpdateMemoryBankConfigRequest{
		MemoryBankConfig: &kiokuv1.MemoryBankConfig{Name: "apps/a/memoryBankConfig", PiiRedaction: pii},
		UpdateMask:       &fieldmaskpb.FieldMask{Paths: []string{"pii_redaction"}},
	})); err != nil {
		t.Fatal(err)
	}
	got, err := c.memories.GetMemoryBankConfig(ctx, req(&kiokuv1.GetMemoryBankConfigRequest{Name: "apps/a/memoryBankConfig"}))
	if err != nil || !proto.Equal(got.Msg.GetPiiRedaction(), pii) {
		t.Fatalf("stored pii_redaction %v, %v", got.Msg.GetPiiRedaction(), err)
	}
	// A memory to consolidate with, given directly: stored redacted.
	old, err := c.memories.CreateMemory(ctx, req(&kiokuv1.CreateMemoryRequest{Parent: "apps/a",
		Memory: &kiokuv1.Memory{Fact: "Ann's email address was ann.old@example.com.", Scope: map[string]string{"user_id": "ann"}}}))
	if err != nil || old.Msg.GetFact() != "Ann's email address was [EMAIL]." {
		t.Fatalf("CreateMemory: %v, %v", old.Msg, err)
	}

	generateFrom(t, c, session,
		"Hi, I'm Ann. Mail me at ann@example.com or call +1 (212) 555-0199.",
		"My card is 4111 1111 1111 1111, and I live at 221B Baker Street. 携帯は０９０－１２３４－５６７８です。",
		"Thanks!")
	compact, err := c.sessions.CompactSession(ctx, req(&kiokuv1.CompactSessionRequest{Name: session, KeepRecentEvents: 1}))
	if err != nil {
		t.Fatal(err)
	}
	if done := wait(t, c, compact.Msg); done.GetError() != nil {
		t.Fatalf("compaction failed: %v", done.GetError())
	}

	// The model's side of the wire.
	calls := fake.Calls()
	if len(calls) != 3 {
		t.Fatalf("%d model calls, want extraction, consolidation and compaction", len(calls))
	}
	for i, call := range calls {
		what := []string{"extraction", "consolidation", "compaction"}[i]
		sent := call.System + "\n" + call.Text()
		body, err := json.Marshal(call.Raw)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range append(wireSecrets, wireForms...) {
			if strings.Contains(string(body), s) {
				t.Errorf("the %s call sent %q:\n%s", what, s, body)
			}
		}
		if want := map[string][]string{
			"extraction":    wirePlaceholders,
			"consolidation": {"[1] Ann's email address was [EMAIL].", "(1) Ann's email address is [EMAIL].", "(2) Ann pays with the card [CARD]."},
			"compaction":    wirePlaceholders,
		}[what]; !containsAll(sent, want) {
			t.Errorf("the %s call lacks %q:\n%s", what, want, sent)
		}
	}
	embedded := strings.Join(fake.EmbeddedTexts(), "\n")
	if embedded == "" {
		t.Fatal("nothing was embedded by the model")
	}
	for _, s := range append(wireSecrets, wireForms...) {
		if strings.Contains(embedded, s) {
			t.Errorf("an embedding request sent %q:\n%s", s, embedded)
		}
	}

	// What kioku kept of the replies.
	facts := factsOf(t, c, "apps/a")
	all := strings.Join(facts, "\n")
	if want := []string{"Ann's email address is [EMAIL]; call her on [PHONE].", "Ann pays with [CARD] and lives at [ADDRESS]."}; len(facts) != 2 || !containsAll(all, want) {
		t.Errorf("memories %q, want %q", facts, want)
	}
	full, err := c.sessions.GetSession(ctx, req(&kiokuv1.GetSessionRequest{Name: session}))
	if err != nil {
		t.Fatal(err)
	}
	var summary, events string
	for _, e := range full.Msg.GetEvents() {
		if e.GetActions().GetCompaction() != nil {
			summary = e.GetContent().GetParts()[0].GetText()
		} else {
			events += e.GetContent().GetParts()[0].GetText() + "\n"
		}
	}
	if summary != "Ann ([EMAIL], [PHONE]) lives at [ADDRESS]." {
		t.Errorf("the compaction stored %q", summary)
	}
	if !containsAll(events, wireSecrets) {
		t.Errorf("the session's events are not stored as given:\n%s", events)
	}
}

// generateFrom creates a session of ann in app a with the user's texts
// as events and generates memories from it.
func generateFrom(t *testing.T, c *clients, session string, texts ...string) {
	t.Helper()
	ctx := t.Context()
	if _, err := c.sessions.CreateSession(ctx, req(&kiokuv1.CreateSessionRequest{Parent: "apps/a/users/ann", SessionId: path.Base(session)})); err != nil {
		t.Fatal(err)
	}
	for i, text := range texts {
		if _, err := c.sessions.AppendEvent(ctx, req(&kiokuv1.AppendEventRequest{Name: session, Event: &kiokuv1.Event{
			Id: fmt.Sprint("e", i+1), Author: "user", Content: &kiokuv1.Content{Role: "user", Parts: []*kiokuv1.Part{{Text: text}}},
		}})); err != nil {
			t.Fatal(err)
		}
	}
	gen, err := c.memories.GenerateMemories(ctx, req(&kiokuv1.GenerateMemoriesRequest{Parent: "apps/a",
		Source: &kiokuv1.GenerateMemoriesRequest_SessionSource{SessionSource: &kiokuv1.SessionSource{Session: session}}}))
	if err != nil {
		t.Fatal(err)
	}
	if done := wait(t, c, gen.Msg); done.GetError() != nil {
		t.Fatalf("generation failed: %v", done.GetError())
	}
}

// factsOf lists the facts of the memories of app.
func factsOf(t *testing.T, c *clients, app string) []string {
	t.Helper()
	list, err := c.memories.ListMemories(t.Context(), req(&kiokuv1.ListMemoriesRequest{Parent: app}))
	if err != nil {
		t.Fatal(err)
	}
	var facts []string
	for _, m := range list.Msg.GetMemories() {
		facts = append(facts, m.GetFact())
	}
	return facts
}

func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// TestPIIRedactionOfflineExtractor: the offline extractor, which reads the
// prompts the memory bank sends any model, extracts facts from redacted
// conversations, in English and Japanese: its facts keep the
// placeholders, not the values.
func TestPIIRedactionOfflineExtractor(t *testing.T) {
	c, _ := startNode(t, true, func(cfg *node.Config) { cfg.Models = model.Config{} })
	ctx := t.Context()
	const session = "apps/a/users/ann/sessions/s1"
	if _, err := c.memories.UpdateMemoryBankConfig(ctx, req(&kiokuv1.UpdateMemoryBankConfigRequest{
		MemoryBankConfig: &kiokuv1.MemoryBankConfig{Name: "apps/a/memoryBankConfig", PiiRedaction: &kiokuv1.PiiRedaction{Enabled: true}},
		UpdateMask:       &fieldmaskpb.FieldMask{Paths: []string{"pii_redaction"}},
	})); err != nil {
		t.Fatal(err)
	}
	generateFrom(t, c, session,
		"I live at 221B Baker Street, London. My email is ann@example.com.",
		"私は東京都千代田区千代田1-1に住んでいます。電話は090-1234-5678です。")
	facts := factsOf(t, c, "apps/a")
	all := strings.Join(facts, "\n")
	if want := []string{"The user lives at [ADDRESS], London.", "ユーザーは[ADDRESS]に住んでいます。"}; !containsAll(all, want) {
		t.Errorf("memories %q, want %q among them", facts, want)
	}
	for _, s := range []string{"Baker", "ann@example.com", "千代田1-1", "090-1234-5678"} {
		if strings.Contains(all, s) {
			t.Errorf("a memory holds %q: %q", s, facts)
		}
	}
}
