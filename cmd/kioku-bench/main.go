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
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/kioku-ai/kioku/internal/node"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	node.TuneGC()
	if err := bench(ctx, os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0) // help was asked for and printed
		}
		fmt.Fprintln(os.Stderr, "kioku-bench:", err)
		os.Exit(2)
	}
}

// version names the build in the archives bench export writes.
func version() string {
	v := "(unknown build)"
	if info, ok := debug.ReadBuildInfo(); ok {
		v = info.Main.Version
	}
	return "kioku-bench " + v
}
