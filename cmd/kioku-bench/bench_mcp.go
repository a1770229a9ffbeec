package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"time"

	"connectrpc.com/connect"
	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/internal/cli"
	"github.com/kioku-ai/kioku/memorybank"
	"github.com/kioku-ai/kioku/memorybank/memorytype"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const benchMCPUsage = `Usage: kioku-bench mcp [--json] [--memories N] [--calls N]

Starts kioku in-process on loopback with a fresh temporary store and the
offline embedder, puts --memories memories in one user's scope, and
measures one tool call over MCP beside the same work over Connect, each
--calls times in sequence, over HTTP/2 on loopback:

  mcp_load_memory_p50_ms    load_memory {query} over MCP (Streamable HTTP,
  mcp_load_memory_p95_ms    the Go SDK's client, tools/call at
                            /mcp/apps/bench/users/ann): a RetrieveMemories
                            of the top 5 made by the server in process
  connect_retrieve_p50_ms   the same RetrieveMemories (similarity, top_k 5)
  connect_retrieve_p95_ms   over Connect (binary protobuf)

With --json the last line of output is one JSON object with those keys.

Flags:
`

func benchMCP(ctx context.Context, args []string) error {
	fs := cli.NewFlagSet("kioku-bench mcp", "KIOKU_", benchMCPUsage)
	asJSON := fs.Bool("json", false, "print the results as one JSON object on the last line")
	memories := fs.Int("memories", 1000, "memories in the user's scope")
	calls := fs.Int("calls", 500, "calls measured on each surface")
	if err := fs.ParseNoArgs(args); err != nil {
		return err
	}
	if *memories < 5 || *calls < 1 {
		return fmt.Errorf("--memories must be at least 5 and --calls at least 1")
	}
	env, err := startBenchNode(ctx, "sqlite", "")
	if err != nil {
		return err
	}
	defer env.close()
	say := func(format string, a ...any) { fmt.Fprintf(stdout, format+"\n", a...) }
	say("kioku-bench mcp: store sqlite, embedder %s, %d memories in the scope, %d calls each", env.node.Memories.EmbedderName(), *memories, *calls)
	rng := rand.New(rand.NewPCG(3, 4))
	scope := memorytype.Scope{"user_id": "ann"}
	if err := parallel(ctx, 16, *memories, func(ctx context.Context, i int) error {
		_, err := env.node.Memories.CreateMemory(ctx, "bench", memorybank.MemoryInput{Fact: syntheticFact(rand.New(rand.NewPCG(5, uint64(i)))), Scope: scope})
		return err
	}); err != nil {
		return err
	}

	c := mcp.NewClient(&mcp.Implementation{Name: "kioku-bench", Version: "v0"}, nil)
	session, err := c.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint: env.url + "/mcp/apps/bench/users/ann", HTTPClient: &http.Client{Transport: benchTransport()}, DisableStandaloneSSE: true,
	}, nil)
	if err != nil {
		return err
	}
	defer session.Close()
	mcpLat, err := measureLatency(ctx, *calls, func(ctx context.Context) error {
		res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "load_memory", Arguments: map[string]any{"query": syntheticFact(rng)}})
		if err != nil {
			return err
		}
		var out struct{ Memories []string }
		b, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(b, &out); err != nil || res.IsError || len(out.Memories) != 5 {
			return fmt.Errorf("load_memory: %s (error %v)", b, res.IsError)
		}
		return nil
	})
	if err != nil {
		return err
	}
	mc := env.memories()
	connectLat, err := measureLatency(ctx, *calls, func(ctx context.Context) error {
		res, err := mc.RetrieveMemories(ctx, connect.NewRequest(&kiokuv1.RetrieveMemoriesRequest{
			Parent: "apps/bench", Scope: scope,
			Method: &kiokuv1.RetrieveMemoriesRequest_SimilaritySearch{SimilaritySearch: &kiokuv1.SimilaritySearch{Query: syntheticFact(rng), TopK: 5}},
		}))
		if err == nil && len(res.Msg.GetRetrievedMemories()) != 5 {
			err = fmt.Errorf("retrieved %d memories, want 5", len(res.Msg.GetRetrievedMemories()))
		}
		return err
	})
	if err != nil {
		return err
	}
	r := &benchReport{}
	for _, s := range []struct {
		key, label string
		lat        []time.Duration
	}{{"mcp_load_memory", "MCP load_memory", mcpLat}, {"connect_retrieve", "Connect RetrieveMemories", connectLat}} {
		p50, p95 := ms(percentile(s.lat, 0.5)), ms(percentile(s.lat, 0.95))
		r.set(s.key+"_p50_ms", p50)
		r.set(s.key+"_p95_ms", p95)
		say("%-26s p50 %6.2f ms   p95 %6.2f ms", s.label, p50, p95)
	}
	if *asJSON {
		return r.printJSON(stdout)
	}
	return nil
}
