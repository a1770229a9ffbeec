// Command kioku runs the kioku sessions and memory bank service.
//
// Usage:
//
//	kioku serve [flags]        run the server (see kioku serve -h)
//	kioku bench <scenario>     measure the service (see kioku bench -h)
//	kioku key --app APP        make an API key for serve --auth-keys
//	kioku backup --out FILE    copy the embedded store, even while it serves
//	kioku export --out FILE    write an installation, app or user to an archive
//	kioku import --in FILE     load an archive into a store
//	kioku encryption new-key|rotate
//	                           make a master key; re-wrap the store's data keys
//	kioku metadata-server      a stand-in GCE metadata server on loopback
//	                           (Google's auth libraries find a token there)
//	kioku mcp --server URL     an MCP server on stdin/stdout, bridged to a
//	                           running kioku (see docs/mcp.md)
//	kioku version              print the build's version
//	kioku sessions|users|state|memories|ops|config|files SUBCOMMAND ARG
//	                           operate a running server (see kioku sessions -h)
//
// Every flag of serve has an environment variable of the same name in upper
// case with a KIOKU_ prefix (--data-dir is KIOKU_DATA_DIR); a flag given on
// the command line wins over the variable.
//
// Unless the GOGC environment variable is set, kioku runs its garbage
// collector at GOGC=400 (see tuneGC); unless GOMEMLIMIT is set, serve and
// the benchmarks give it a soft limit of the vector cache's budget plus
// 48 MiB (see limitMemory).
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
)

// defaultGCPercent is the GOGC kioku runs with when the environment sets
// none. kioku's Go heap stays small (a few MB live under load: the SQLite
// page cache lives outside it, and nothing else is cached), so at Go's
// default of 100 the collector's 4 MB minimum goal makes it run about a
// hundred times a second under load and take over a tenth of the CPU. At
// 400 the heap grows by a few MB and appends gain about a fifth in
// throughput (docs/benchmarks.md, Sessions). A deployment that holds a large heap can
// set GOGC (and GOMEMLIMIT) as for any Go program.
const defaultGCPercent = 400

// tuneGC applies defaultGCPercent unless GOGC is set.
func tuneGC() {
	if _, ok := os.LookupEnv("GOGC"); !ok {
		debug.SetGCPercent(defaultGCPercent)
	}
}

// memoryHeadroom is what kioku's Go heap may hold beyond its vector cache
// before the collector works harder (limitMemory).
const memoryHeadroom = 48 << 20

// limitMemory sets the Go runtime's soft memory limit to the vector
// cache's budget plus memoryHeadroom, unless GOMEMLIMIT is set: at
// defaultGCPercent a heap holding a full cache could otherwise grow to five
// times the cache before a collection. The limit leaves defaultGCPercent
// in charge while the heap is small.
func limitMemory(vectorCacheBytes int64) {
	if _, ok := os.LookupEnv("GOMEMLIMIT"); !ok {
		debug.SetMemoryLimit(max(vectorCacheBytes, 0) + memoryHeadroom)
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	tuneGC()
	if err := run(ctx, os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			// Help was asked for (-h) and printed: not a failure.
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "kioku:", err)
		os.Exit(2)
	}
}

const usage = `kioku: sessions and memory bank service for LLM agents

Usage:
  kioku serve [flags]      run the server
  kioku bench SCENARIO     run a benchmark (kioku bench -h lists them)
  kioku key --app APP      make an API key for kioku serve --auth-keys
  kioku backup --out FILE  copy the embedded store, even while it serves
  kioku export --out FILE  write everything, an app (--app) or a user (--user)
                           to a portable archive, from either store
  kioku import --in FILE   load an archive into either store
  kioku encryption new-key FILE | rotate --new-key-file NEW
                           make a master key for --encryption-key-file;
                           re-wrap the encrypted store's data keys under a new one
  kioku metadata-server    a stand-in GCE metadata server on loopback, for
                           Vertex AI clients that insist on Google credentials
  kioku mcp --server URL [--key KEY] [--user apps/APP/users/USER]
                           an MCP server on stdin/stdout for hosts that start
                           one as a process, bridged to a running kioku
  kioku version            print the build's version

Operating a running server (--server URL, --key KEY, --json; tables by default):
  kioku sessions list|get|events|delete     sessions and their events
  kioku users delete                        erase a user (an app key)
  kioku state get|set                       user: and app: state
  kioku memories list|get|revisions|retrieve|delete
  kioku ops list|get|wait|cancel            memory operations
  kioku config get|set                      an app's memory bank configuration
  kioku files list|cat|view|revisions|rm    a user's memory files

Run "kioku serve -h" for the server's flags, "kioku sessions -h" (and the
others) for their subcommands.
`

func run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, usage)
		return errors.New("a command is needed")
	}
	switch args[0] {
	case "serve":
		return serve(ctx, args[1:])
	case "bench":
		return bench(ctx, args[1:])
	case "key":
		return key(args[1:], os.Stdout)
	case "backup":
		return backup(ctx, args[1:], os.Stdout)
	case "export":
		return export(ctx, args[1:], os.Stdout)
	case "import":
		return importArchive(ctx, args[1:], os.Stdin, os.Stdout)
	case "encryption":
		return encryption(ctx, args[1:], os.Stdout)
	case "sessions", "users", "state", "memories", "ops", "config", "files":
		return operator(ctx, args[0], args[1:], os.Stdout, os.Stderr)
	case "mcp":
		return runMCP(ctx, args[1:], os.Stdin, os.Stdout, os.Stderr)
	case "metadata-server":
		return metadataServer(ctx, args[1:], os.Stdout)
	case "version", "--version":
		return printVersion(os.Stdout)
	case "help", "-h", "--help":
		fmt.Fprint(os.Stdout, usage)
		return nil
	default:
		fmt.Fprint(os.Stderr, usage)
		return fmt.Errorf("unknown command %q", args[0])
	}
}
