// Command kioku-bench measures kioku: session throughput, retrieval
// latency and recall, question answering, memory footprint, export and
// MCP, each a scenario (kioku-bench -h lists them; docs/benchmarks.md
// shows their figures). It runs kioku in-process, or against a running
// server where a scenario takes --target, and lives apart from cmd/kioku
// so that the production binary carries no benchmark harness.
//
// Usage:
//
//	kioku-bench SCENARIO [flags]
//
// Unless GOGC or GOMEMLIMIT is set, the collector is tuned as kioku serve
// tunes it (node.TuneGC, node.LimitMemory), so the figures are those of a
// served node.
package main

import (
	"runtime/debug"

	"github.com/kioku-ai/kioku/internal/cli"
	"github.com/kioku-ai/kioku/internal/node"
)

func main() {
	node.TuneGC()
	cli.Main("kioku-bench", bench)
}

// version names the build in the archives bench export writes.
func version() string {
	v := "(unknown build)"
	if info, ok := debug.ReadBuildInfo(); ok {
		v = info.Main.Version
	}
	return "kioku-bench " + v
}
