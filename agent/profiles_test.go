package agent_test

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/fieldmaskpb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/kioku-ai/kioku/client"
	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/resource"
)

// TestPreloadIncludesProfile: the preload puts the session user's
// structured profile in the instruction, one stable line per profile with
// its fields in the schema's order, and another user's turn sees none of
// it.
func TestPreloadIncludesProfile(t *testing.T) {
	e := setup(t)
	ctx := t.Context()
	schema, err := structpb.NewStruct(map[string]any{"type": "object", "properties": map[string]any{
		"preferred_language": map[string]any{"type": "string"},
		"age":                map[string]any{"type": "integer"},
		"vegetarian":         map[string]any{"type": "boolean"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.kioku.UpdateMemoryBankConfig(ctx, &kiokuv1.UpdateMemoryBankConfigRequest{
		MemoryBankConfig: &kiokuv1.MemoryBankConfig{Name: resource.MemoryBankConfigName("app"), ProfileSchemas: []*kiokuv1.ProfileSchemaConfig{{SchemaId: "user-profile", JsonSchema: schema}}},
		UpdateMask:       &fieldmaskpb.FieldMask{Paths: []string{"profile_schemas"}},
	}); err != nil {
		t.Fatal(err)
	}
	// The extraction call fills the profile (the fake model answers it).
	e.fake.ReplyText(`{"facts": [], "profile": {"user-profile": {"preferred_language": {"value": "Python", "events": [1]},
		"age": {"value": 34, "events": [1]}, "vegetarian": {"value": true, "events": [1]}}}}`)
	op, err := e.kioku.GenerateMemories(ctx, &kiokuv1.GenerateMemoriesRequest{Parent: resource.AppName("app"), Scope: client.Scope("alice"),
		Source: client.FromEvents(&kiokuv1.Event{Author: "user", InvocationId: "i1", Content: client.Text("user", "I'm 34, vegetarian, and I code in Python.")})})
	if err != nil {
		t.Fatal(err)
	}
	if op, err = e.kioku.WaitOperation(ctx, op.GetName()); err != nil || op.GetError() != nil {
		t.Fatalf("generation: %v, %v", op, err)
	}

	e.fake.ReplyText("Hi Alice.")
	if _, err := e.agent.Turn(ctx, e.session(t, "alice", "s1"), "Hello!"); err != nil {
		t.Fatal(err)
	}
	calls := e.fake.Calls()
	want := "The user's profile (use it when it helps; do not recite it):\n- user-profile: age = 34; preferred_language = Python; vegetarian = true\n"
	if !strings.Contains(calls[len(calls)-1].System, want) {
		t.Fatalf("the instruction lacks the profile %q:\n%s", want, calls[len(calls)-1].System)
	}

	e.fake.ReplyText("Hi.")
	if _, err := e.agent.Turn(ctx, e.session(t, "bob", "s2"), "Hello!"); err != nil {
		t.Fatal(err)
	}
	calls = e.fake.Calls()
	if last := calls[len(calls)-1].System; strings.Contains(last, "user-profile") || strings.Contains(last, "Python") {
		t.Fatalf("bob's turn saw alice's profile:\n%s", last)
	}
}
