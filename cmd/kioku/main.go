// Command kioku runs the kioku sessions and memory bank service.
//
// Usage:
//
//	kioku serve [flags]        run the server (see kioku serve -h)
//	kioku key --app APP        make an API key for serve --auth-keys
//	kioku token --app APP --user USER
//	                           print a minted user token (--new-key FILE
//	                           writes a token signing key)
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
//	kioku sessions|users|state|memories|ops|config|webhooks|files SUBCOMMAND ARG
//	                           operate a running server (see kioku sessions -h)
//
// Every flag of serve has an environment variable of the same name in upper
// case with a KIOKU_ prefix (--data-dir is KIOKU_DATA_DIR); a flag given on
// the command line wins over the variable.
//
// Unless the GOGC environment variable is set, kioku runs its garbage
// collector at GOGC=400; unless GOMEMLIMIT is set, serve gives it a soft
// limit of the vector cache's budget plus 48 MiB (node.TuneGC and
// node.LimitMemory). The benchmarks are cmd/kioku-bench.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/kioku-ai/kioku/internal/cli"
	"github.com/kioku-ai/kioku/internal/node"
)

func main() {
	node.TuneGC()
	cli.Main("kioku", run)
}

const usage = `kioku: sessions and memory bank service for LLM agents

Usage:
  kioku serve [flags]      run the server
  kioku key --app APP      make an API key for kioku serve --auth-keys
  kioku token --app APP --user USER
                           print a user token signed with the key file of
                           --token-signing-key-file (--new-key FILE makes one)
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
  kioku webhooks list|redeliver             an app's webhook deliveries
  kioku quota get                           an app's usage of its daily quotas
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
		return errors.New("the benchmarks are a command of their own: go run ./cmd/kioku-bench SCENARIO (kioku-bench -h lists them)")
	case "key":
		return key(args[1:], os.Stdout)
	case "token":
		return token(args[1:], os.Stdout)
	case "backup":
		return backup(ctx, args[1:], os.Stdout)
	case "export":
		return export(ctx, args[1:], os.Stdout)
	case "import":
		return importArchive(ctx, args[1:], os.Stdin, os.Stdout)
	case "encryption":
		return encryption(ctx, args[1:], os.Stdout)
	case "sessions", "users", "state", "memories", "ops", "config", "webhooks", "quota", "files":
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
