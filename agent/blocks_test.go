package agent_test

import (
	"strings"
	"testing"

	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/model/modeltest"
)

// coreSection returns the <core_memory> section of a system instruction
// and everything before it (the prefix a provider's prompt cache keys on).
func coreSection(t *testing.T, system string) (section, prefix string) {
	t.Helper()
	i, j := strings.Index(system, "<core_memory>"), strings.Index(system, "</core_memory>")
	if i < 0 || j < i {
		t.Fatalf("no core memory section in the system instruction %q", system)
	}
	return system[i : j+len("</core_memory>")], system[:j]
}

// TestCoreMemoryBlocks: the app's persona block and the user's human block
// are in every system instruction, byte for byte the same until the model
// edits one with core_memory_replace; the next turn shows the new value;
// an edit past the limit, of a read-only block, or of the app's shared
// block comes back to the model as an error naming the limit and size, the
// read-only flag, or the sharing; the shared block is unchanged.
func TestCoreMemoryBlocks(t *testing.T) {
	e := setup(t)
	for _, b := range []*kiokuv1.Block{
		{Name: "apps/app/blocks/persona", Value: "I am Hana, a cheerful companion.", Description: "Who you are.", Limit: 500},
		{Name: "apps/app/users/alice/blocks/rules", Value: "Never give medical advice.", ReadOnly: true},
		{Name: "apps/app/users/alice/blocks/human", Value: "Name: Alice.", Description: "What you know about the user.", Limit: 60},
	} {
		if _, err := e.kioku.UpdateBlock(t.Context(), &kiokuv1.UpdateBlockRequest{Block: b}); err != nil {
			t.Fatal(err)
		}
	}
	s := e.session(t, "alice", "s")
	e.fake.ReplyText("Hello Alice!")
	e.turn(t, s, "Hi, I'm Alice.")
	e.fake.ReplyText("Nice.")
	e.turn(t, s, "It's sunny today.")
	e.fake.Reply(call("core_memory_replace", map[string]any{"label": "human", "old_content": "Name: Alice.", "new_content": "Name: Alice. Lives in Kyoto."}))
	e.fake.ReplyText("Kyoto is lovely.")
	e.turn(t, s, "I live in Kyoto.")
	e.fake.Reply(
		call("core_memory_append", map[string]any{"label": "human", "content": "Loves long walks along the Kamo river at dusk."}),
		call("core_memory_append", map[string]any{"label": "rules", "content": "Be brief."}),
		call("core_memory_append", map[string]any{"label": "persona", "content": "I obey every user."}),
	)
	e.fake.ReplyText("Walks are nice.")
	e.turn(t, s, "I love walking by the river.")

	calls := e.fake.Calls()
	if len(calls) != 8 {
		t.Fatalf("%d model calls, want 8", len(calls))
	}
	first, prefix1 := coreSection(t, calls[0].System)
	for _, want := range []string{"I am Hana, a cheerful companion.", "Name: Alice.\n", `limit="60"`, `read_only="true"`, "What you know about the user."} {
		if !strings.Contains(first, want) {
			t.Fatalf("the core memory section lacks %q:\n%s", want, first)
		}
	}
	if !strings.HasPrefix(calls[0].System, "Be kind.") {
		t.Fatalf("the section comes before the instruction: %q", calls[0].System)
	}
	for _, i := range []int{1, 2, 3} {
		if _, p := coreSection(t, calls[i].System); p != prefix1 {
			t.Fatalf("call %d: the system instruction up to the core memory changed before any edit:\n%q\n%q", i+1, p, prefix1)
		}
	}
	if !strings.Contains(calls[3].Text(), `response core_memory_replace {"chars":28,"label":"human","limit":60,"value":"Name: Alice. Lives in Kyoto."}`) {
		t.Fatalf("the result of core_memory_replace: %s", lastMessage(calls[3]))
	}
	after, _ := coreSection(t, calls[4].System)
	if !strings.Contains(after, "Name: Alice. Lives in Kyoto.\n") || strings.Contains(after, "Name: Alice.\n") {
		t.Fatalf("the next turn's core memory:\n%s", after)
	}
	results := lastMessage(calls[5])
	if !strings.Contains(results, "limit of 60 characters") || !strings.Contains(results, "holds 28") {
		t.Fatalf("an append past the limit was not refused naming the limit and the size: %s", results)
	}
	if results := lastMessage(calls[6]); !strings.Contains(results, `block \"rules\" is read-only`) {
		t.Fatalf("an append to a read-only block was not refused: %s", results)
	}
	if results := lastMessage(calls[7]); !strings.Contains(results, `block \"persona\" is shared by every user`) {
		t.Fatalf("an append to the app's shared block was not refused: %s", results)
	}
	if persona, err := e.kioku.GetBlock(t.Context(), &kiokuv1.GetBlockRequest{Name: "apps/app/blocks/persona"}); err != nil || persona.GetValue() != "I am Hana, a cheerful companion." {
		t.Fatalf("the shared persona block: %q, %v", persona.GetValue(), err)
	}
	got, err := e.kioku.GetBlock(t.Context(), &kiokuv1.GetBlockRequest{Name: "apps/app/users/alice/blocks/human"})
	if err != nil || got.GetValue() != "Name: Alice. Lives in Kyoto." {
		t.Fatalf("the stored block: %q, %v", got.GetValue(), err)
	}
}

func lastMessage(c modeltest.Call) string { return c.Messages[len(c.Messages)-1].Text }
