package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
)

// stdout receives the benchmarks' report (tests replace it).
var stdout io.Writer = os.Stdout

const benchUsage = `Usage: kioku-bench SCENARIO [flags]

Scenarios:
  sessions    session throughput and read latency over loopback RPC
  memories    memory retrieval latency and generation throughput
  footprint   resident memory and vector cache hit rate over many scopes
  locomo      LoCoMo retrieval recall
  qa          question answering on LoCoMo or LongMemEval: retrieve, answer, judge
  paraphrases memories left by paraphrases of the same facts (consolidation)
  recall      event search (SearchEvents): LoCoMo recall and latency per user
  export      kioku export and import of a large store: time and peak memory
  mcp         a tool call over MCP beside the same call over Connect: latency
  cluster     several kioku serve processes on the Firestore emulator, one killed
  webhooks    append latency and generation time with a webhook receiver that hangs

Run "kioku-bench SCENARIO -h" for a scenario's flags.
`

// benchScenarios runs each scenario with its arguments.
var benchScenarios = map[string]func(context.Context, []string) error{
	"sessions":    benchSessions,
	"memories":    benchMemories,
	"footprint":   benchFootprint,
	"locomo":      benchLocomo,
	"qa":          benchQA,
	"recall":      benchRecall,
	"paraphrases": benchParaphrases,
	"export":      benchExport,
	"mcp":         benchMCP,
	"cluster":     benchCluster,
	"webhooks":    benchWebhooks,
}

func bench(ctx context.Context, args []string) error {
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, benchUsage)
		return fmt.Errorf("bench needs a scenario")
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, benchUsage)
		return flag.ErrHelp
	}
	if run, ok := benchScenarios[args[0]]; ok {
		return run(ctx, args[1:])
	}
	fmt.Fprint(os.Stderr, benchUsage)
	return fmt.Errorf("unknown bench scenario %q", args[0])
}
