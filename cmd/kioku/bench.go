package main

import (
	"context"
	"fmt"
	"os"
)

const benchUsage = `Usage: kioku bench SCENARIO [flags]

Scenarios:
  sessions    session throughput and read latency over loopback RPC
`

func bench(ctx context.Context, args []string) error {
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, benchUsage)
		return fmt.Errorf("bench needs a scenario")
	}
	switch args[0] {
	case "sessions":
		return benchSessions(ctx, args[1:])
	}
	fmt.Fprint(os.Stderr, benchUsage)
	return fmt.Errorf("unknown bench scenario %q", args[0])
}
