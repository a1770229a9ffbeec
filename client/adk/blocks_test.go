package adk_test

import (
	"strings"
	"testing"

	"google.golang.org/adk/v2/agent"
	"google.golang.org/adk/v2/agent/llmagent"
	"google.golang.org/adk/v2/model/gemini"
	"google.golang.org/adk/v2/runner"
	"google.golang.org/adk/v2/session"
	"google.golang.org/genai"

	"github.com/kioku-ai/kioku/client/adk"
	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/model/modeltest"
)

// TestCoreMemoryInstruction runs an ADK llmagent whose instruction is
// CoreMemoryInstruction: its system instruction holds the app's persona
// block and the user's human block, and the next run shows a block's new
// value once it changed in kioku.
func TestCoreMemoryInstruction(t *testing.T) {
	fake := modeltest.NewGemini(t)
	c := startKioku(t, fake)
	ctx := t.Context()
	update := func(name, value string) {
		t.Helper()
		if _, err := c.UpdateBlock(ctx, &kiokuv1.UpdateBlockRequest{Block: &kiokuv1.Block{Name: name, Value: value}}); err != nil {
			t.Fatal(err)
		}
	}
	update("apps/companion/blocks/persona", "I am Hana.")
	update("apps/companion/users/alice/blocks/human", "Name: Alice.")
	llm, err := gemini.NewModel(ctx, "gemini-test", &genai.ClientConfig{APIKey: "k", HTTPOptions: genai.HTTPOptions{BaseURL: fake.URL}})
	if err != nil {
		t.Fatal(err)
	}
	a, err := llmagent.New(llmagent.Config{Name: "companion", Model: llm, InstructionProvider: adk.CoreMemoryInstruction(c, "You are a friendly companion.")})
	if err != nil {
		t.Fatal(err)
	}
	sessions := adk.NewSessionService(c)
	r, err := runner.New(runner.Config{AppName: "companion", Agent: a, SessionService: sessions})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sessions.Create(ctx, &session.CreateRequest{AppName: "companion", UserID: "alice", SessionID: "s"}); err != nil {
		t.Fatal(err)
	}
	say := func(text string) string {
		t.Helper()
		fake.ReplyText("Hi.")
		for _, err := range r.Run(ctx, "alice", "s", genai.NewContentFromText(text, genai.RoleUser), agent.RunConfig{}) {
			if err != nil {
				t.Fatalf("run: %v", err)
			}
		}
		calls := fake.Calls()
		return calls[len(calls)-1].System
	}
	system := say("Hello.")
	for _, want := range []string{"You are a friendly companion.", "<persona ", "I am Hana.", "<human ", "Name: Alice."} {
		if !strings.Contains(system, want) {
			t.Fatalf("the system instruction lacks %q: %q", want, system)
		}
	}
	update("apps/companion/users/alice/blocks/human", "Name: Alice. Lives in Kyoto.")
	if system := say("I moved."); !strings.Contains(system, "Name: Alice. Lives in Kyoto.") {
		t.Fatalf("the next run's system instruction: %q", system)
	}
}
