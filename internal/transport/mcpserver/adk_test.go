package mcpserver_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/adk/v2/agent"
	"google.golang.org/adk/v2/agent/llmagent"
	"google.golang.org/adk/v2/model/gemini"
	"google.golang.org/adk/v2/runner"
	"google.golang.org/adk/v2/session"
	"google.golang.org/adk/v2/tool"
	"google.golang.org/adk/v2/tool/mcptoolset"
	"google.golang.org/genai"

	kagent "github.com/kioku-ai/kioku/agent"
	"github.com/kioku-ai/kioku/client"
	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/internal/node"
	"github.com/kioku-ai/kioku/internal/node/nodetest"
	"github.com/kioku-ai/kioku/model"
	"github.com/kioku-ai/kioku/model/modeltest"
	"github.com/kioku-ai/kioku/resource"
)

// TestADKAgentWithMCPToolset: an ADK-Go agent whose only tools are ADK's
// MCP toolset pointed at kioku's /mcp with ann's key, on a fake Gemini
// endpoint, calls load_memory and answers from what kioku returns.
func TestADKAgentWithMCPToolset(t *testing.T) {
	k := serveKeyed(t)
	ctx := t.Context()
	if _, err := client.New(k.url, client.WithAuthToken(k.app)).CreateMemory(ctx, &kiokuv1.CreateMemoryRequest{
		Parent: resource.AppName("a"), Memory: &kiokuv1.Memory{Fact: "Ann's favourite tea is genmaicha.", Scope: client.Scope("ann")},
	}); err != nil {
		t.Fatal(err)
	}

	fake := modeltest.NewGemini(t)
	llm, err := gemini.NewModel(ctx, "gemini-test", &genai.ClientConfig{APIKey: "k", HTTPOptions: genai.HTTPOptions{BaseURL: fake.URL}})
	if err != nil {
		t.Fatal(err)
	}
	kioku, err := mcptoolset.New(mcptoolset.Config{Transport: &mcp.StreamableClientTransport{
		Endpoint: k.url + "/mcp", HTTPClient: &http.Client{Transport: bearer{k.ann}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	a, err := llmagent.New(llmagent.Config{Name: "companion", Model: llm, Instruction: "You are a friendly companion.", Toolsets: []tool.Toolset{kioku}})
	if err != nil {
		t.Fatal(err)
	}
	sessions := session.InMemoryService()
	r, err := runner.New(runner.Config{AppName: "companion", Agent: a, SessionService: sessions})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sessions.Create(ctx, &session.CreateRequest{AppName: "companion", UserID: "ann", SessionID: "s1"}); err != nil {
		t.Fatal(err)
	}

	fake.Reply(modeltest.Reply{Parts: []map[string]any{{"functionCall": map[string]any{"name": "load_memory", "args": map[string]any{"query": "favourite tea"}}}}})
	fake.SetResponder(func(call modeltest.Call) modeltest.Reply {
		if strings.Contains(call.Text(), "genmaicha") {
			return modeltest.Reply{Text: "You like genmaicha."}
		}
		return modeltest.Reply{Text: "I don't know."}
	})
	var reply string
	for ev, err := range r.Run(ctx, "ann", "s1", genai.NewContentFromText("Which tea do I like?", genai.RoleUser), agent.RunConfig{}) {
		if err != nil {
			t.Fatalf("run: %v", err)
		}
		if ev.Content != nil && ev.IsFinalResponse() {
			for _, p := range ev.Content.Parts {
				reply += p.Text
			}
		}
	}
	if reply != "You like genmaicha." {
		t.Fatalf("reply %q", reply)
	}
	calls := fake.Calls()
	if len(calls) != 2 {
		t.Fatalf("%d model calls, want 2 (load_memory, then the answer)", len(calls))
	}
	var offered []string
	for _, d := range calls[0].Tools {
		offered = append(offered, fmt.Sprint(d["name"]))
	}
	slices.Sort(offered)
	if want := []string{"core_memory_append", "core_memory_replace", "load_memory", "memory", "retrieve_profiles", "save_to_memory", "search_conversation"}; !slices.Equal(offered, want) {
		t.Errorf("the model was offered %v, want %v", offered, want)
	}
	if got := calls[1].Text(); !strings.Contains(got, "response load_memory") || !strings.Contains(got, "Ann's favourite tea is genmaicha.") {
		t.Fatalf("load_memory's result did not reach the model: %q", got)
	}
}

// TestSameToolsAsTheAgent: the tools the MCP server lists are the ones
// kioku's agent runtime declares to its model (package memorytools): the
// same names, descriptions and input schemas.
func TestSameToolsAsTheAgent(t *testing.T) {
	fake := modeltest.NewGemini(t)
	_, url := nodetest.ServeH2C(t, node.Config{Models: nodetest.Gemini(fake)})
	ctx := t.Context()
	c := client.New(url)
	sess, err := c.CreateSession(ctx, &kiokuv1.CreateSessionRequest{Parent: resource.UserName("a", "ann")})
	if err != nil {
		t.Fatal(err)
	}
	// A block, so that the agent offers the core memory tools too.
	if _, err := c.UpdateBlock(ctx, &kiokuv1.UpdateBlockRequest{Block: &kiokuv1.Block{Name: "apps/a/users/ann/blocks/human", Value: "Name: Ann."}}); err != nil {
		t.Fatal(err)
	}
	fake.ReplyText("Hello.")
	a := &kagent.Agent{Kioku: c, Model: &model.Gemini{Client: fake.Client(t), Model: "gemini-test"}, MemoryFiles: true}
	if _, err := a.Turn(ctx, sess.GetName(), "Hi."); err != nil {
		t.Fatal(err)
	}
	declared := map[string]map[string]any{}
	for _, d := range fake.Calls()[0].Tools {
		declared[fmt.Sprint(d["name"])] = d
	}

	s := mustSession(t, url+"/mcp/apps/a/users/ann", "")
	tools, err := s.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	shared := 0
	for _, tool := range tools.Tools {
		d, ok := declared[tool.Name]
		if !ok {
			continue // retrieve_profiles: the agent preloads the profile instead
		}
		shared++
		var schema any
		b, _ := json.Marshal(tool.InputSchema)
		json.Unmarshal(b, &schema)
		params := d["parametersJsonSchema"]
		if d["description"] != tool.Description || !reflect.DeepEqual(params, schema) {
			t.Errorf("%s: the agent declares %v %v, MCP lists %q %v", tool.Name, d["description"], params, tool.Description, schema)
		}
	}
	if shared != 6 {
		t.Fatalf("%d tools in common with the agent's %v, want 6", shared, slices.Sorted(maps.Keys(declared)))
	}
}
