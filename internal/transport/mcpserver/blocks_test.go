package mcpserver_test

import (
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/kioku-ai/kioku/client"
	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
)

// TestCoreMemoryTools: ann's key edits her human block with
// core_memory_replace and core_memory_append; an append past the limit and
// an edit of the app's shared persona block (never edited from a
// conversation) are
// error results; bob's edits of "human" never reach ann's block.
func TestCoreMemoryTools(t *testing.T) {
	k := serveKeyed(t)
	ctx := t.Context()
	appClient := client.New(k.url, client.WithAuthToken(k.app))
	for _, b := range []*kiokuv1.Block{
		{Name: "apps/a/blocks/persona", Value: "I am Hana."},
		{Name: "apps/a/users/ann/blocks/human", Value: "Name: Ann.", Limit: 40},
	} {
		if _, err := appClient.UpdateBlock(ctx, &kiokuv1.UpdateBlockRequest{Block: b}); err != nil {
			t.Fatal(err)
		}
	}
	ann := mustSession(t, k.url+"/mcp", k.ann)
	got := call(t, ann, "core_memory_replace", map[string]any{"label": "human", "old_content": "Ann.", "new_content": "Ann, in Kyoto."})
	if got["value"] != "Name: Ann, in Kyoto." || got["limit"] != float64(40) {
		t.Fatalf("core_memory_replace: %v", got)
	}
	call(t, ann, "core_memory_append", map[string]any{"label": "human", "content": "Likes tea."})
	for _, tc := range []struct {
		args map[string]any
		want string
	}{
		{map[string]any{"label": "human", "content": "Walks by the Kamo river every evening."}, "limit of 40"},
		{map[string]any{"label": "persona", "content": "I like tea too."}, "shared by every user"},
	} {
		res, err := ann.CallTool(ctx, &mcp.CallToolParams{Name: "core_memory_append", Arguments: tc.args})
		if err != nil || !res.IsError || !strings.Contains(text(res), tc.want) {
			t.Fatalf("core_memory_append %v: %q, %v; want an error with %q", tc.args, text(res), err, tc.want)
		}
	}
	bob := mustSession(t, k.url+"/mcp", k.bob)
	if res, err := bob.CallTool(ctx, &mcp.CallToolParams{Name: "core_memory_replace", Arguments: map[string]any{"label": "human", "old_content": "Ann", "new_content": "Bob"}}); err != nil || !res.IsError {
		t.Fatalf("bob's replace: %q, %v", text(res), err)
	}
	b, err := appClient.GetBlock(ctx, &kiokuv1.GetBlockRequest{Name: "apps/a/users/ann/blocks/human"})
	if err != nil || b.GetValue() != "Name: Ann, in Kyoto.\nLikes tea." {
		t.Fatalf("ann's block: %q, %v", b.GetValue(), err)
	}
}
