package main_test

import (
	"encoding/json"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/kioku-ai/kioku/client"
	"github.com/kioku-ai/kioku/internal/node"
	"github.com/kioku-ai/kioku/internal/node/nodetest"
	"github.com/kioku-ai/kioku/internal/transport/auth"
)

// mcpStdio starts the built `kioku mcp ARGS` and connects the Go SDK's
// client to it over stdin and stdout.
func mcpStdio(t *testing.T, args ...string) (*mcp.ClientSession, error) {
	t.Helper()
	cmd := exec.Command(kiokuBinary(t), append([]string{"mcp"}, args...)...)
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, nil)
	s, err := c.Connect(t.Context(), &mcp.CommandTransport{Command: cmd}, nil)
	if err == nil {
		t.Cleanup(func() { s.Close() })
	}
	return s, err
}

// toolResult calls a tool and returns its structured result, failing
// the test on an error result.
func toolResult(t *testing.T, s *mcp.ClientSession, name string, args map[string]any) map[string]any {
	t.Helper()
	res, err := s.CallTool(t.Context(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if res.IsError {
		b, _ := json.Marshal(res.Content)
		t.Fatalf("%s: error result %s", name, b)
	}
	return res.StructuredContent.(map[string]any)
}

// TestMCPStdio: kioku mcp, started as an MCP host starts a server, bridges
// the Go SDK's client to a running kioku: with ann's user key it lists the
// tools, saves a fact and finds it once its operation is done, and runs
// the memory file tool; with --user and an app key it reaches ann's
// memory too; ann's key naming bob, and bob's key, get none of it.
func TestMCPStdio(t *testing.T) {
	t.Parallel()
	annKey, annEntry := auth.NewKey("ann", "a", "ann")
	bobKey, bobEntry := auth.NewKey("bob", "a", "bob")
	appKey, appEntry := auth.NewKey("backend of a", "a", "")
	_, url := nodetest.ServeH2C(t, node.Config{Keys: nodetest.Keys(t, annEntry, bobEntry, appEntry)})

	ann, err := mcpStdio(t, "--server", url, "--key", annKey)
	if err != nil {
		t.Fatal(err)
	}
	tools, err := ann.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	if want := []string{"core_memory_append", "core_memory_replace", "load_memory", "memory", "retrieve_profiles", "save_to_memory", "search_conversation"}; !slices.Equal(names, want) {
		t.Fatalf("tools %v, want %v", names, want)
	}
	saved := toolResult(t, ann, "save_to_memory", map[string]any{"fact": "Ann plays the cello."})
	op, err := client.New(url, client.WithAuthToken(appKey)).WaitOperation(t.Context(), saved["operation"].(string))
	if err != nil || op.GetError() != nil {
		t.Fatalf("waiting for the save: %v, %v", op, err)
	}
	if got, _ := json.Marshal(toolResult(t, ann, "load_memory", map[string]any{"query": "cello"})); !strings.Contains(string(got), "Ann plays the cello.") {
		t.Fatalf("load_memory: %s", got)
	}
	toolResult(t, ann, "memory", map[string]any{"command": "create", "path": "/memories/music.md", "file_text": "cello\n"})
	if got := toolResult(t, ann, "memory", map[string]any{"command": "view", "path": "/memories/music.md"}); !strings.Contains(got["output"].(string), "cello") {
		t.Fatalf("view: %v", got)
	}

	app, err := mcpStdio(t, "--server", url, "--key", appKey, "--user", "apps/a/users/ann")
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := json.Marshal(toolResult(t, app, "load_memory", map[string]any{"query": "cello"})); !strings.Contains(string(got), "cello") {
		t.Fatalf("the app key at ann's path: %s", got)
	}

	if _, err := mcpStdio(t, "--server", url, "--key", annKey, "--user", "apps/a/users/bob"); err == nil || !strings.Contains(err.Error(), "may reach user \"ann\" only") {
		t.Fatalf("ann's key naming bob: %v", err)
	}
	bob, err := mcpStdio(t, "--server", url, "--key", bobKey)
	if err != nil {
		t.Fatal(err)
	}
	if got := toolResult(t, bob, "load_memory", map[string]any{"query": "cello"}); len(got["memories"].([]any)) != 0 {
		t.Fatalf("bob found ann's memories: %v", got)
	}
	if res, err := bob.CallTool(t.Context(), &mcp.CallToolParams{Name: "memory", Arguments: map[string]any{"command": "view", "path": "/memories/music.md"}}); err != nil || !res.IsError {
		t.Fatalf("bob viewed ann's file: %v, %v", res, err)
	}
}
