package transport_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/kioku-ai/kioku/client"
	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/internal/node"
	"github.com/kioku-ai/kioku/internal/node/nodetest"
	"github.com/kioku-ai/kioku/internal/transport/auth"
	"github.com/kioku-ai/kioku/resource"
)

// mcpPost sends one MCP JSON-RPC request to endpoint over Streamable HTTP
// (the server is stateless: no initialize needed) and returns the HTTP
// status and the decoded answer (nil when it is not JSON).
func mcpPost(t *testing.T, endpoint, key, method string, params any) (int, map[string]any) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var m map[string]any
	json.Unmarshal(b, &m)
	return resp.StatusCode, m
}

// mcpSucceeded reports whether an MCP answer is a success: a result that
// is not a tool error.
func mcpSucceeded(status int, m map[string]any) bool {
	res, ok := m["result"].(map[string]any)
	return status == http.StatusOK && ok && res["isError"] != true
}

// TestMCPAttackMatrix makes every MCP tool call (every tool the server
// lists: a new tool fails the test until it has a case), resources/list,
// resources/read and the preload prompt against ann's memory with another
// user's key, another app's key, no key, a garbage key and an expired key:
// none succeeds, each is refused with its HTTP status before anything
// runs, and the store is exactly as before. A tool's arguments naming
// another user are refused too. Then each call goes through with ann's
// key, so the refusals were not for malformed requests.
func TestMCPAttackMatrix(t *testing.T) {
	keys, annKey, bobKey, appKey, otherKey, expiredKey, opKey := attackKeys(t)
	_, url := serveNode(t, func(c *node.Config) { c.Keys = keys })
	app, op := client.New(url, client.WithAuthToken(appKey)), client.New(url, client.WithAuthToken(opKey))
	ctx := t.Context()

	// Ann's memory, session and memory file, and bob's.
	for _, u := range []string{"ann", "bob"} {
		if _, err := app.CreateMemory(ctx, &kiokuv1.CreateMemoryRequest{Parent: "apps/a", Memory: &kiokuv1.Memory{Fact: u + " likes green tea.", Scope: client.Scope(u)}}); err != nil {
			t.Fatal(err)
		}
		s, err := app.CreateSession(ctx, &kiokuv1.CreateSessionRequest{Parent: resource.UserName("a", u)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := app.AppendEvent(ctx, &kiokuv1.AppendEventRequest{Name: s.GetName(), Event: &kiokuv1.Event{Author: "user", InvocationId: "i1", Content: client.Text("user", "I like green tea.")}}); err != nil {
			t.Fatal(err)
		}
		if _, err := app.UpdateBlock(ctx, &kiokuv1.UpdateBlockRequest{Block: &kiokuv1.Block{Name: resource.UserName("a", u) + "/blocks/human", Value: u + " likes green tea."}}); err != nil {
			t.Fatal(err)
		}
		input, _ := structpb.NewStruct(map[string]any{"command": "create", "path": "/memories/" + u + ".md", "file_text": u + "'s notes\n"})
		if _, err := app.Execute(ctx, &kiokuv1.ExecuteRequest{Parent: resource.UserName("a", u), Input: input}); err != nil {
			t.Fatal(err)
		}
	}
	files, err := app.ListMemoryFiles(ctx, &kiokuv1.ListMemoryFilesRequest{Parent: "apps/a/users/ann"})
	if err != nil || len(files.GetMemoryFiles()) != 1 {
		t.Fatalf("ann's files: %v, %v", files, err)
	}
	annFile := "kioku:///memoryFiles/" + files.GetMemoryFiles()[0].GetName()[strings.LastIndexByte(files.GetMemoryFiles()[0].GetName(), '/')+1:]

	// Every tool's call, and what else reaches a user's memory.
	args := map[string]map[string]any{
		"load_memory":         {"query": "green tea"},
		"save_to_memory":      {"fact": "Ann's password hint is tea."},
		"search_conversation": {"query": "green tea"},
		"memory":              {"command": "create", "path": "/memories/evil.md", "file_text": "x"},
		"retrieve_profiles":   {},
		"core_memory_append":  {"label": "human", "content": "Ann's password hint is tea."},
		"core_memory_replace": {"label": "human", "old_content": "green tea", "new_content": "green tea and jasmine"},
	}
	status, listed := mcpPost(t, url+"/mcp", annKey, "tools/list", map[string]any{})
	if status != http.StatusOK {
		t.Fatalf("tools/list: %d %v", status, listed)
	}
	type request struct {
		method string
		params map[string]any
	}
	var requests []request
	for _, tool := range listed["result"].(map[string]any)["tools"].([]any) {
		name := tool.(map[string]any)["name"].(string)
		a, ok := args[name]
		if !ok {
			t.Fatalf("the tool %s has no case in the MCP attack matrix", name)
		}
		requests = append(requests, request{"tools/call", map[string]any{"name": name, "arguments": a}})
	}
	if len(requests) != len(args) {
		t.Fatalf("%d tools listed, %d cases: a case for a tool that no longer exists?", len(requests), len(args))
	}
	requests = append(requests,
		request{"resources/list", map[string]any{}},
		request{"resources/read", map[string]any{"uri": annFile}},
		request{"resources/read", map[string]any{"uri": "kioku:///profile"}},
		request{"prompts/get", map[string]any{"name": "preload", "arguments": map[string]any{"query": "tea"}}},
	)

	before := snapshot(t, app, op)
	attackers := []struct {
		name, path, key string
		status          int
	}{
		{"another user's key", "/mcp/apps/a/users/ann", bobKey, http.StatusForbidden},
		{"another app's key", "/mcp/apps/a/users/ann", otherKey, http.StatusForbidden},
		{"another app's key at /mcp", "/mcp", otherKey, http.StatusForbidden},
		{"no key", "/mcp/apps/a/users/ann", "", http.StatusUnauthorized},
		{"no key at /mcp", "/mcp", "", http.StatusUnauthorized},
		{"a garbage key", "/mcp/apps/a/users/ann", "kioku_" + strings.Repeat("x", 43), http.StatusUnauthorized},
		{"an expired key", "/mcp", expiredKey, http.StatusUnauthorized},
		{"an expired key at its user's path", "/mcp/apps/a/users/ann", expiredKey, http.StatusUnauthorized},
	}
	succeeded, calls := 0, 0
	for _, a := range attackers {
		for _, r := range requests {
			status, m := mcpPost(t, url+a.path, a.key, r.method, r.params)
			calls++
			if mcpSucceeded(status, m) {
				succeeded++
			}
			if status != a.status || m["result"] != nil {
				t.Errorf("%s %v with %s: %d %v; want %d", r.method, r.params["name"], a.name, status, m, a.status)
			}
		}
	}
	// Arguments cannot name a user: the schemas allow no other field.
	for _, extra := range []map[string]any{{"fact": "x.", "user_id": "bob"}, {"fact": "x.", "scope": map[string]any{"user_id": "bob"}}} {
		status, m := mcpPost(t, url+"/mcp", annKey, "tools/call", map[string]any{"name": "save_to_memory", "arguments": extra})
		calls++
		if mcpSucceeded(status, m) {
			succeeded++
			t.Errorf("save_to_memory with %v: %v", extra, m)
		}
	}
	if after := snapshot(t, app, op); !bytes.Equal(before.bytes, after.bytes) {
		t.Fatalf("the store changed under %d refused MCP calls:\nbefore %s\nafter  %s", calls, before.text, after.text)
	}
	if succeeded != 0 {
		t.Fatalf("%d of %d attacking MCP calls succeeded", succeeded, calls)
	}
	t.Logf("%d refused MCP calls; the store is unchanged", calls)
	metrics, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	scraped, _ := io.ReadAll(metrics.Body)
	metrics.Body.Close()
	for _, reason := range []string{"no_key", "unknown_key", "expired_key"} {
		if want := `kioku_rpc_refused_total{procedure="MCP",reason="` + reason + `"}`; !strings.Contains(string(scraped), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	// With ann's key each goes through, and reaches ann's memory only.
	for _, r := range requests {
		status, m := mcpPost(t, url+"/mcp", annKey, r.method, r.params)
		if !mcpSucceeded(status, m) {
			t.Errorf("%s %v with ann's key: %d %v", r.method, r.params["name"], status, m)
		}
		if b, _ := json.Marshal(m); strings.Contains(string(b), "bob") {
			t.Errorf("%s %v with ann's key shows bob's: %s", r.method, r.params["name"], b)
		}
	}
}

// TestMCPRateLimitAndBodyBound: an MCP request takes one token of its
// key's rate limit (the kioku.v1 calls a tool makes in process take none),
// a request over the limit is refused 429 before its body is read, and a
// body over the server's message limit is refused.
func TestMCPRateLimitAndBodyBound(t *testing.T) {
	key, entry := auth.NewKey("slow", "a", "ann")
	entry.RateLimit = &auth.RateLimit{PerSecond: 0.01, Burst: 2}
	_, url := serveNode(t, func(c *node.Config) { c.Keys = nodetest.Keys(t, entry) })
	load := map[string]any{"name": "load_memory", "arguments": map[string]any{"query": "tea"}}
	for i := range 2 {
		if status, m := mcpPost(t, url+"/mcp", key, "tools/call", load); !mcpSucceeded(status, m) {
			t.Fatalf("call %d within the burst: %d %v", i, status, m)
		}
	}
	status, m := mcpPost(t, url+"/mcp", key, "tools/call", load)
	refusal, _ := m["error"].(map[string]any)
	if msg, _ := refusal["message"].(string); status != http.StatusTooManyRequests || !strings.Contains(msg, "rate limit") {
		t.Fatalf("over the limit: %d %v", status, m)
	}

	_, open := serveNode(t, nil)
	huge := map[string]any{"name": "save_to_memory", "arguments": map[string]any{"fact": strings.Repeat("x", 17<<20)}}
	status, m = mcpPost(t, open+"/mcp/apps/a/users/ann", "", "tools/call", huge)
	if status != http.StatusRequestEntityTooLarge || m["result"] != nil {
		t.Fatalf("a 17 MiB body: %d %v", status, m)
	}
}
