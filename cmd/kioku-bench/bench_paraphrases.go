package main

import (
	"context"
	"fmt"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/internal/cli"
	"github.com/kioku-ai/kioku/internal/node"
)

const benchParaphrasesUsage = `Usage: kioku-bench paraphrases [--json] [model flags]

Consolidation of paraphrases: kioku runs in-process on loopback with a
fresh temporary store and the generation model the flags choose (the
offline extractor unless --model-provider says otherwise; none: no model,
near-duplicate detection only). Fifteen facts, three paraphrases of each
of five ("Ann lives in Sapporo." / "Ann is living in Sapporo." / "Ann's
home is in Sapporo.", ...), are given one at a time as direct facts
(GenerateMemories with direct_memories_source, each waited for), round
after round, in one scope; the report is how many memories they leave.
Five is each fact once; fifteen is every paraphrase kept as a memory of
its own.

With --json the last line is
  {"provider":..., "paraphrases":15, "facts":5, "memories":N}

Flags:
`

// paraphrases are five facts about Ann, each said three ways.
var paraphrases = [][]string{
	{"Ann lives in Sapporo.", "Ann is living in Sapporo.", "Ann's home is in Sapporo."},
	{"Ann prefers tea.", "Ann likes tea.", "Tea is Ann's favourite drink."},
	{"Ann works as a nurse.", "Ann is a nurse.", "Ann's job is nursing."},
	{"Ann has a dog called Pochi.", "Ann owns a dog named Pochi.", "Pochi is Ann's dog."},
	{"Ann's birthday is on 3 May.", "Ann was born on 3 May.", "Ann celebrates her birthday on May 3."},
}

func benchParaphrases(ctx context.Context, args []string) error {
	fs := cli.NewFlagSet("kioku-bench paraphrases", "KIOKU_", benchParaphrasesUsage)
	asJSON := fs.Bool("json", false, "print the results as one JSON object on the last line")
	flags := cli.RegisterModelFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	models, err := flags.Config()
	if err != nil {
		return err
	}
	env, err := startBenchNode(ctx, "sqlite", "", func(c *node.Config) { c.Models = models })
	if err != nil {
		return err
	}
	defer env.close()
	provider := models.Provider
	if provider == "" {
		provider = "offline"
	}
	fmt.Fprintf(stdout, "kioku-bench paraphrases: model provider %s, embedder %s\n", provider, env.node.Memories.EmbedderName())
	mc := env.memories()
	oc := env.operations()
	scope := map[string]string{"user_id": "ann"}
	n := 0
	for round := range paraphrases[0] {
		for _, p := range paraphrases {
			n++
			res, err := mc.GenerateMemories(ctx, connect.NewRequest(&kiokuv1.GenerateMemoriesRequest{
				Parent: "apps/bench", Scope: scope,
				Source: &kiokuv1.GenerateMemoriesRequest_DirectMemoriesSource{DirectMemoriesSource: &kiokuv1.DirectMemoriesSource{
					Memories: []*kiokuv1.DirectMemory{{Fact: p[round]}}}},
			}))
			if err != nil {
				return err
			}
			done, err := oc.WaitOperation(ctx, connect.NewRequest(&kiokuv1.WaitOperationRequest{Name: res.Msg.GetName(), Timeout: durationpb.New(time.Minute)}))
			if err != nil {
				return err
			}
			if e := done.Msg.GetError(); e != nil {
				return fmt.Errorf("generating from %q: %s", p[round], e.GetMessage())
			}
		}
	}
	list, err := mc.ListMemories(ctx, connect.NewRequest(&kiokuv1.ListMemoriesRequest{Parent: "apps/bench", PageSize: 100}))
	if err != nil {
		return err
	}
	memories := list.Msg.GetMemories()
	for _, m := range memories {
		fmt.Fprintf(stdout, "  %s\n", m.GetFact())
	}
	fmt.Fprintf(stdout, "memories   %d from %d paraphrases of %d facts\n", len(memories), n, len(paraphrases))
	if *asJSON {
		r := &benchReport{}
		r.set("provider", provider)
		r.set("paraphrases", n)
		r.set("facts", len(paraphrases))
		r.set("memories", len(memories))
		return r.printJSON(stdout)
	}
	return nil
}
