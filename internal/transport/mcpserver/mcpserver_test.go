package mcpserver_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/kioku-ai/kioku/client"
	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/internal/node"
	"github.com/kioku-ai/kioku/internal/node/nodetest"
	"github.com/kioku-ai/kioku/internal/transport/auth"
	"github.com/kioku-ai/kioku/resource"
)

// keyed is a kioku behind API keys: ann's and bob's user keys and an app
// key of app a.
type keyed struct {
	url                  string
	ann, bob, app, other string
}

func serveKeyed(t *testing.T) keyed {
	t.Helper()
	ann, annEntry := auth.NewKey("ann", "a", "ann")
	bob, bobEntry := auth.NewKey("bob", "a", "bob")
	app, appEntry := auth.NewKey("backend of a", "a", "")
	other, otherEntry := auth.NewKey("backend of b", "b", "")
	_, url := nodetest.ServeH2C(t, node.Config{Keys: nodetest.Keys(t, annEntry, bobEntry, appEntry, otherEntry)})
	return keyed{url: url, ann: ann, bob: bob, app: app, other: other}
}

// bearer adds an API key to every request.
type bearer struct{ key string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if b.key != "" {
		r.Header.Set("Authorization", "Bearer "+b.key)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// connectMCP connects the Go SDK's client to endpoint over Streamable HTTP
// with key (none when empty).
func connectMCP(t *testing.T, endpoint, key string) (*mcp.ClientSession, error) {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, nil)
	s, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: &http.Client{Transport: bearer{key}}}, nil)
	if err == nil {
		t.Cleanup(func() { s.Close() })
	}
	return s, err
}

func mustSession(t *testing.T, endpoint, key string) *mcp.ClientSession {
	t.Helper()
	s, err := connectMCP(t, endpoint, key)
	if err != nil {
		t.Fatalf("connecting to %s: %v", endpoint, err)
	}
	return s
}

// call calls a tool and returns its structured result, failing the test
// on an error result.
func call(t *testing.T, s *mcp.ClientSession, tool string, args any) map[string]any {
	t.Helper()
	res, err := s.CallTool(t.Context(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	if res.IsError {
		t.Fatalf("%s: error result %s", tool, text(res))
	}
	m, ok := res.StructuredContent.(map[string]any)
	if !ok {
		t.Fatalf("%s: structuredContent %T %v", tool, res.StructuredContent, res.StructuredContent)
	}
	return m
}

// text is the text of a tool result's content.
func text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// waitSaved waits for the operation a save_to_memory result names.
func waitSaved(t *testing.T, kioku *client.Client, saved map[string]any) {
	t.Helper()
	name, _ := saved["operation"].(string)
	if saved["saved"] != true || name == "" {
		t.Fatalf("save_to_memory: %v", saved)
	}
	op, err := kioku.WaitOperation(t.Context(), name)
	if err != nil || op.GetError() != nil || !op.GetDone() {
		t.Fatalf("waiting for %s: %v, %v", name, op, err)
	}
}

// TestToolsOverStreamableHTTP: the Go SDK's client, with ann's user key at
// /mcp, lists the tools with their schemas, saves a fact and finds it
// again once its operation is done, runs the memory file tool, and
// searches the conversation; bob's key finds none of ann's memories.
func TestToolsOverStreamableHTTP(t *testing.T) {
	k := serveKeyed(t)
	ann := mustSession(t, k.url+"/mcp", k.ann)
	ctx := t.Context()

	// Nothing is announced later, so no request is held open for it.
	if caps := ann.InitializeResult().Capabilities; caps.Tools == nil || caps.Tools.ListChanged || caps.Resources == nil || caps.Resources.Subscribe || caps.Resources.ListChanged || caps.Prompts == nil || caps.Prompts.ListChanged {
		t.Errorf("capabilities %+v", caps)
	}
	tools, err := ann.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
		in, _ := json.Marshal(tool.InputSchema)
		out, _ := json.Marshal(tool.OutputSchema)
		if !strings.Contains(string(in), `"type":"object"`) || !strings.Contains(string(out), `"type":"object"`) {
			t.Errorf("%s: inputSchema %s, outputSchema %s", tool.Name, in, out)
		}
	}
	slices.Sort(names)
	if want := []string{"core_memory_append", "core_memory_replace", "load_memory", "memory", "retrieve_profiles", "save_to_memory", "search_conversation"}; !slices.Equal(names, want) {
		t.Fatalf("tools %v, want %v", names, want)
	}

	appClient := client.New(k.url, client.WithAuthToken(k.app))
	waitSaved(t, appClient, call(t, ann, "save_to_memory", map[string]any{"fact": "Ann's favourite tea is genmaicha."}))
	got := call(t, ann, "load_memory", map[string]any{"query": "favourite tea"})
	if mems, _ := json.Marshal(got["memories"]); !strings.Contains(string(mems), "genmaicha") {
		t.Fatalf("load_memory found %v", got)
	}
	mems, err := appClient.ListMemories(ctx, &kiokuv1.ListMemoriesRequest{Parent: resource.AppName("a")})
	if err != nil || len(mems.GetMemories()) != 1 || mems.GetMemories()[0].GetScope()["user_id"] != "ann" {
		t.Fatalf("the app's memories: %v, %v", mems, err)
	}

	call(t, ann, "memory", map[string]any{"command": "create", "path": "/memories/tea.md", "file_text": "genmaicha\nsencha\n"})
	call(t, ann, "memory", map[string]any{"command": "insert", "path": "/memories/tea.md", "insert_line": 0, "insert_text": "# Teas"})
	view := call(t, ann, "memory", map[string]any{"command": "view", "path": "/memories/tea.md"})
	if out, _ := view["output"].(string); !strings.Contains(out, "1\t# Teas") || !strings.Contains(out, "genmaicha") {
		t.Fatalf("view: %q", out)
	}
	res, err := ann.CallTool(ctx, &mcp.CallToolParams{Name: "memory", Arguments: map[string]any{"command": "view", "path": "/memories/none.md"}})
	if err != nil || !res.IsError {
		t.Fatalf("viewing a missing file: %v, %v", res, err)
	}

	sess, err := appClient.CreateSession(ctx, &kiokuv1.CreateSessionRequest{Parent: resource.UserName("a", "ann")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := appClient.AppendEvent(ctx, &kiokuv1.AppendEventRequest{Name: sess.GetName(), Event: &kiokuv1.Event{
		Author: "user", InvocationId: "i1", Content: client.Text("user", "My sister lives in Sapporo."),
	}}); err != nil {
		t.Fatal(err)
	}
	found := call(t, ann, "search_conversation", map[string]any{"query": "sister Sapporo"})
	if b, _ := json.Marshal(found["results"]); !strings.Contains(string(b), "Sapporo") {
		t.Fatalf("search_conversation found %v", found)
	}

	bob := mustSession(t, k.url+"/mcp", k.bob)
	if got := call(t, bob, "load_memory", map[string]any{"query": "favourite tea"}); len(got["memories"].([]any)) != 0 {
		t.Fatalf("bob's load_memory found ann's memories: %v", got)
	}
	if got := call(t, bob, "search_conversation", map[string]any{"query": "sister Sapporo"}); len(got["results"].([]any)) != 0 {
		t.Fatalf("bob's search found ann's events: %v", got)
	}
	if res, err := bob.CallTool(ctx, &mcp.CallToolParams{Name: "memory", Arguments: map[string]any{"command": "view", "path": "/memories/tea.md"}}); err != nil || !res.IsError {
		t.Fatalf("bob viewed ann's file: %v, %v", text(res), err)
	}
}

// TestEndpointIdentity: the endpoint decides whose memory a request
// reaches: a user key at /mcp or at its own path; an app key only at a
// path of its app; another user's path, an app key at /mcp, no key, and a
// keyless server's /mcp are refused before anything runs.
func TestEndpointIdentity(t *testing.T) {
	k := serveKeyed(t)
	for _, tc := range []struct {
		name, path, key string
	}{
		{"ann's key at ann's path", "/mcp/apps/a/users/ann", k.ann},
		{"the app key at ann's path", "/mcp/apps/a/users/ann", k.app},
	} {
		s, err := connectMCP(t, k.url+tc.path, tc.key)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		call(t, s, "memory", map[string]any{"command": "view", "path": "/memories"})
	}
	for _, tc := range []struct {
		name, path, key, want string
	}{
		{"bob's key at ann's path", "/mcp/apps/a/users/ann", k.bob, "Forbidden"},
		{"the app key at /mcp", "/mcp", k.app, "Forbidden"},
		{"another app's key", "/mcp/apps/a/users/ann", k.other, "Forbidden"},
		{"no key", "/mcp/apps/a/users/ann", "", "Unauthorized"},
		{"a garbage key", "/mcp", "garbage", "Unauthorized"},
	} {
		if _, err := connectMCP(t, k.url+tc.path, tc.key); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: connected (%v), want %s", tc.name, err, tc.want)
		}
	}

	_, open := nodetest.ServeH2C(t, node.Config{})
	if _, err := connectMCP(t, open+"/mcp", ""); err == nil || !strings.Contains(err.Error(), "Forbidden") {
		t.Errorf("a keyless server's /mcp: %v", err)
	}
	s := mustSession(t, open+"/mcp/apps/a/users/ann", "")
	call(t, s, "memory", map[string]any{"command": "create", "path": "/memories/a.md", "file_text": "x"})
	if _, err := connectMCP(t, open+"/mcp/apps/a/users/bad%20user", ""); err == nil || !strings.Contains(err.Error(), "Bad Request") {
		t.Errorf("a malformed user in the path: %v", err)
	}
}

// TestResourcesAndPreload: the user's memory files are listed and read as
// resources, the profile is one, and the preload prompt renders the
// user's memories as the agent's preload does; bob lists none of ann's
// files and cannot read them.
func TestResourcesAndPreload(t *testing.T) {
	k := serveKeyed(t)
	ctx := t.Context()
	ann := mustSession(t, k.url+"/mcp", k.ann)
	call(t, ann, "memory", map[string]any{"command": "create", "path": "/memories/plans/trip.md", "file_text": "Kyoto in April\n"})
	waitSaved(t, client.New(k.url, client.WithAuthToken(k.app)), call(t, ann, "save_to_memory", map[string]any{"fact": "Ann is planning a trip to Kyoto."}))

	list, err := ann.ListResources(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var file *mcp.Resource
	var uris []string
	for _, r := range list.Resources {
		uris = append(uris, r.URI)
		if r.Name == "/memories/plans/trip.md" {
			file = r
		}
	}
	if file == nil || !slices.Contains(uris, "kioku:///profile") || list.CacheScope != "private" {
		t.Fatalf("resources %v (cache scope %q)", uris, list.CacheScope)
	}
	read, err := ann.ReadResource(ctx, &mcp.ReadResourceParams{URI: file.URI})
	if err != nil || len(read.Contents) != 1 || read.Contents[0].Text != "Kyoto in April\n" || read.CacheScope != "private" {
		t.Fatalf("reading %s: %v, %v", file.URI, read, err)
	}
	profile, err := ann.ReadResource(ctx, &mcp.ReadResourceParams{URI: "kioku:///profile"})
	if err != nil || len(profile.Contents) != 1 || profile.Contents[0].Text != `{"profiles":{}}` {
		t.Fatalf("reading the profile: %v, %v", profile, err)
	}

	prompt, err := ann.GetPrompt(ctx, &mcp.GetPromptParams{Name: "preload", Arguments: map[string]string{"query": "trip"}})
	if err != nil || len(prompt.Messages) != 1 {
		t.Fatalf("preload: %v, %v", prompt, err)
	}
	got := prompt.Messages[0].Content.(*mcp.TextContent).Text
	if !strings.HasPrefix(got, "What you remember about the user from earlier conversations, each with its date") || !strings.Contains(got, "] Ann is planning a trip to Kyoto.\n") {
		t.Fatalf("preload rendered %q", got)
	}

	bob := mustSession(t, k.url+"/mcp", k.bob)
	list, err = bob.ListResources(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range list.Resources {
		if r.URI != "kioku:///profile" {
			t.Errorf("bob lists %s (%s)", r.URI, r.Name)
		}
	}
	if read, err := bob.ReadResource(ctx, &mcp.ReadResourceParams{URI: file.URI}); err == nil {
		t.Fatalf("bob read ann's file: %v", read.Contents[0].Text)
	}
	prompt, err = bob.GetPrompt(ctx, &mcp.GetPromptParams{Name: "preload", Arguments: map[string]string{"query": "trip"}})
	if err != nil || strings.Contains(prompt.Messages[0].Content.(*mcp.TextContent).Text, "Kyoto") {
		t.Fatalf("bob's preload: %v, %v", prompt, err)
	}
}
