package agent_test

import (
	"strings"
	"testing"

	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/resource"
)

// TestMemoryFileTool: a model (the fake Gemini, through the real genai
// client) is offered the memory tool with Anthropic's parameters, views
// the user's empty directory, writes a note and edits it; the files are
// the session user's in kioku, whatever user the arguments name, a path
// outside /memories comes back as an error, and the next turn sees the
// note.
func TestMemoryFileTool(t *testing.T) {
	e := setup(t)
	e.agent.MemoryFiles = true
	e.fake.Reply(
		call("memory", map[string]any{"command": "view", "path": "/memories"}),
		call("memory", map[string]any{"command": "create", "path": "/memories/ann.md", "file_text": "Drinks tea.\n", "user": "bob", "parent": "apps/app/users/bob"}),
		call("memory", map[string]any{"command": "str_replace", "path": "/memories/ann.md", "old_str": "tea", "new_str": "green tea"}),
		call("memory", map[string]any{"command": "create", "path": "/memories/../../etc/passwd", "file_text": "x"}),
	)
	e.fake.ReplyText("Noted: green tea.")
	s := e.session(t, "ann", "s1")
	res := e.turn(t, s, "I drink green tea, remember that.")
	if res.Text != "Noted: green tea." || res.ModelCalls != 5 {
		t.Fatalf("result %q after %d calls", res.Text, res.ModelCalls)
	}
	calls := e.fake.Calls()
	// The declaration: Anthropic's name and parameters.
	var decl map[string]any
	for _, d := range calls[0].Tools {
		if d["name"] == "memory" {
			decl = d
		}
	}
	params, _ := decl["parametersJsonSchema"].(map[string]any)
	props, _ := params["properties"].(map[string]any)
	for _, p := range []string{"command", "path", "view_range", "file_text", "old_str", "new_str", "insert_line", "insert_text", "old_path", "new_path"} {
		if props[p] == nil {
			t.Errorf("the memory tool's parameters lack %q: %v", p, params)
		}
	}
	if cmd, _ := props["command"].(map[string]any); cmd == nil || len(cmd["enum"].([]any)) != 6 || params["required"].([]any)[0] != "command" {
		t.Errorf("the memory tool's command parameter: %v", props["command"])
	}
	if !strings.Contains(calls[0].System, "/memories") {
		t.Errorf("the instruction does not mention the memory directory: %q", calls[0].System)
	}
	// The model read kioku's answers.
	for i, want := range []string{
		`response memory {"output":"Here're the files and directories up to 2 levels deep in /memories, excluding hidden items and node_modules:\n0B\t/memories"}`,
		`response memory {"output":"File created successfully at: /memories/ann.md"}`,
		`response memory {"output":"The memory file has been edited. Here is the snippet showing the change (with line numbers):\n     1\tDrinks green tea."}`,
		`response memory {"error":"Error: The path \"/memories/../../etc/passwd\" is not allowed: it has a \"..\" segment; paths are never resolved, name the file directly."}`,
	} {
		if got := calls[i+1].Text(); !strings.Contains(got, want) {
			t.Errorf("model call %d saw\n%s\nwithout\n%s", i+2, got, want)
		}
	}
	// The file is ann's, not bob's.
	got, err := e.kioku.ListMemoryFiles(t.Context(), &kiokuv1.ListMemoryFilesRequest{Parent: resource.UserName("app", "ann"), ShowDeleted: true})
	if err != nil || len(got.GetMemoryFiles()) != 1 || got.GetMemoryFiles()[0].GetPath() != "/memories/ann.md" {
		t.Fatalf("ann's memory files: %v, %v", got, err)
	}
	bob, err := e.kioku.ListMemoryFiles(t.Context(), &kiokuv1.ListMemoryFilesRequest{Parent: resource.UserName("app", "bob"), ShowDeleted: true})
	if err != nil || len(bob.GetMemoryFiles()) != 0 {
		t.Fatalf("bob's memory files: %v, %v", bob, err)
	}
	file, err := e.kioku.GetMemoryFile(t.Context(), &kiokuv1.GetMemoryFileRequest{Name: got.GetMemoryFiles()[0].GetName()})
	if err != nil || file.GetContent() != "Drinks green tea.\n" {
		t.Fatalf("the note: %v, %v", file, err)
	}

	// Another session of ann's: the model views the note it kept.
	e.fake.Reply(call("memory", map[string]any{"command": "view", "path": "/memories/ann.md"}))
	e.fake.ReplyText("You drink green tea.")
	if _, err := e.agent.Turn(t.Context(), e.session(t, "ann", "s2"), "What do I drink?"); err != nil {
		t.Fatal(err)
	}
	if got := e.fake.Calls()[6].Text(); !strings.Contains(got, `Here's the content of /memories/ann.md with line numbers:\n     1\tDrinks green tea.`) {
		t.Errorf("the next session's view saw %s", got)
	}

	// Without MemoryFiles, no memory tool is offered.
	e.agent.MemoryFiles = false
	e.fake.ReplyText("Hi.")
	if _, err := e.agent.Turn(t.Context(), e.session(t, "ann", "s3"), "Hello"); err != nil {
		t.Fatal(err)
	}
	for _, d := range e.fake.Calls()[7].Tools {
		if d["name"] == "memory" {
			t.Error("the memory tool is offered without MemoryFiles")
		}
	}
}
