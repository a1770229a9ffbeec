package main

// The operator commands: kioku sessions|users|state|memories|ops|config|
// webhooks|quota|files call a running server through the Go client (package client) and
// print readable tables, or JSON with --json (protojson of the API's
// messages; a list is a JSON array). Each subcommand takes the resource
// name it acts on, as the API writes it (apps/demo/users/ann/sessions/s1),
// and its flags before or after it.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/kioku-ai/kioku/client"
	"github.com/kioku-ai/kioku/internal/cli"
)

// subcommand is one operator command, such as "sessions list".
type subcommand struct {
	name  string
	args  string // the positional argument, as the usage shows it
	about string
	// setup defines the subcommand's own flags and returns what runs it.
	setup func(fs *cli.FlagSet) func(ctx context.Context, e *opEnv) error
}

// opEnv is what a subcommand runs with.
type opEnv struct {
	c    *client.Client
	out  io.Writer
	err  io.Writer
	json bool
	arg  string // the positional argument
}

// operatorGroups are the operator commands by group, in usage order.
var operatorGroups = map[string][]subcommand{
	"sessions": {
		{name: "list", args: "apps/APP[/users/USER]", about: "list the sessions of a user, or of an app, most recently updated first", setup: sessionsList},
		{name: "get", args: "SESSION", about: "show a session, its state and its recent events", setup: sessionsGet},
		{name: "events", args: "SESSION", about: "list a session's events", setup: sessionsEvents},
		{name: "delete", args: "SESSION", about: "delete a session and its events", setup: sessionsDelete},
	},
	"users": {
		{name: "delete", args: "apps/APP/users/USER", about: "erase everything kioku holds about a user: sessions with their events, user: state, the memories of the user's scope with their revisions, watermarks, operations and memory files (an app key)", setup: usersDelete},
	},
	"state": {
		{name: "get", args: "apps/APP[/users/USER][/state]", about: "show the app: state of an app, or the user: state of a user", setup: stateGet},
		{name: "set", args: "apps/APP[/users/USER][/state]", about: "change keys of that state: --set KEY=VALUE (VALUE is JSON, or else a string; null deletes)", setup: stateSet},
	},
	"memories": {
		{name: "list", args: "apps/APP", about: "list an app's memories, newest first (--scope user_id=ann for one scope)", setup: memoriesList},
		{name: "get", args: "MEMORY", about: "show a memory and where it came from", setup: memoriesGet},
		{name: "revisions", args: "MEMORY", about: "list a memory's revisions, newest first", setup: memoriesRevisions},
		{name: "retrieve", args: "apps/APP", about: "retrieve the memories of a scope, most similar to --query first", setup: memoriesRetrieve},
		{name: "delete", args: "MEMORY", about: "delete a memory (its revisions stay; RollbackMemory restores it)", setup: memoriesDelete},
	},
	"ops": {
		{name: "list", args: "apps/APP", about: "list an app's memory operations, newest first", setup: opsList},
		{name: "get", args: "OPERATION", about: "show an operation, its progress and result", setup: opsGet},
		{name: "wait", args: "OPERATION", about: "wait until an operation is done, then show it", setup: opsWait},
		{name: "cancel", args: "OPERATION", about: "cancel an operation that has not finished", setup: opsCancel},
	},
	"config": {
		{name: "get", args: "apps/APP", about: "show an app's memory bank configuration", setup: configGet},
		{name: "set", args: "apps/APP", about: "change an app's memory bank configuration: the fields of --file's JSON (MemoryBankConfig), and only those", setup: configSet},
	},
	"webhooks": {
		{name: "list", args: "apps/APP", about: "list the deliveries of an app's webhooks with their attempts, newest event first (--state dead_lettered for the given up)", setup: webhooksList},
		{name: "redeliver", args: "apps/APP/webhookDeliveries/ID", about: "send a delivery again (a dead-lettered one, or any other): pending, due now", setup: webhooksRedeliver},
	},
	"quota": {
		{name: "get", args: "apps/APP", about: "show an app's usage of today (UTC) against the daily quotas of memory generations and model tokens (an app key)", setup: quotaGet},
	},
	// A memory file is named on the command line by its user and its path,
	// apps/APP/users/USER/memories/notes.md, or by its resource name,
	// apps/APP/users/USER/memoryFiles/ID.
	"files": {
		{name: "list", args: "apps/APP/users/USER[/memories/DIR]", about: "list a user's memory files (or a directory's) in path order, with their sizes", setup: filesList},
		{name: "cat", args: "FILE", about: "print a memory file's content (FILE: apps/APP/users/USER/memories/PATH, or the file's name)", setup: filesCat},
		{name: "view", args: "apps/APP/users/USER/memories[/PATH]", about: "show what the memory tool's view shows the model: a file with line numbers, or a directory listing", setup: filesView},
		{name: "revisions", args: "FILE", about: "list a memory file's revisions, newest first", setup: filesRevisions},
		{name: "rm", args: "apps/APP/users/USER/memories/PATH", about: "delete a memory file, or a directory with what it holds (the memory tool's delete; revisions stay)", setup: filesRm},
	},
}

// operatorGroupAbout says what each group is about.
var operatorGroupAbout = map[string]string{
	"sessions": "the sessions of a user or an app, and their events",
	"users":    "the users of an app: erasure",
	"state":    "the user: and app: state, without a session",
	"memories": "the memories of an app, their revisions, and retrieval",
	"ops":      "memory operations (generation, purges)",
	"config":   "an app's memory bank configuration",
	"webhooks": "the deliveries of an app's webhooks",
	"quota":    "an app's usage of the daily quotas",
	"files":    "a user's memory files (the memory tool's /memories) and their revisions",
}

const operatorFlagsHelp = `Every subcommand takes --server URL (default http://127.0.0.1:8080, env
KIOKU_SERVER), --key KEY (an API key, env KIOKU_KEY) and --json (JSON
instead of a table), before or after its argument.
`

func groupUsage(group string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Usage: kioku %s SUBCOMMAND ARG [flags]\n\n%s.\n\nSubcommands:\n", group, upperFirst(operatorGroupAbout[group]))
	tw := tabwriter.NewWriter(&b, 2, 4, 2, ' ', 0)
	for _, sc := range operatorGroups[group] {
		fmt.Fprintf(tw, "  %s %s\t%s\n", sc.name, sc.args, sc.about)
	}
	tw.Flush()
	fmt.Fprintf(&b, "\n%s\nRun \"kioku %s SUBCOMMAND -h\" for a subcommand's flags.\n", operatorFlagsHelp, group)
	return b.String()
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// operator runs "kioku GROUP SUBCOMMAND ARG [flags]".
func operator(ctx context.Context, group string, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || slices.Contains([]string{"-h", "-help", "--help", "help"}, args[0]) {
		w := stdout
		if len(args) == 0 {
			w = stderr
		}
		fmt.Fprint(w, groupUsage(group))
		if len(args) == 0 {
			return fmt.Errorf("%s needs a subcommand", group)
		}
		return flag.ErrHelp
	}
	var sc *subcommand
	for i := range operatorGroups[group] {
		if operatorGroups[group][i].name == args[0] {
			sc = &operatorGroups[group][i]
		}
	}
	if sc == nil {
		fmt.Fprint(stderr, groupUsage(group))
		return fmt.Errorf("unknown %s subcommand %q", group, args[0])
	}
	usage := fmt.Sprintf("Usage: kioku %s %s %s [flags]\n\n%s.\n\n%s\nFlags:\n", group, sc.name, sc.args, upperFirst(sc.about), operatorFlagsHelp)
	fs := cli.NewFlagSet("kioku "+group+" "+sc.name, "KIOKU_", usage)
	fs.SetOutput(stderr)
	server := fs.Env("server", "http://127.0.0.1:8080", "URL of the kioku server")
	key := fs.Env("key", "", "API key, when the server requires one")
	asJSON := fs.Bool("json", false, "print JSON (the API's messages) instead of a table")
	run := sc.setup(fs)
	pos, err := parseInterspersed(fs, args[1:])
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		fs.Usage()
		return fmt.Errorf("kioku %s %s takes one argument, %s; got %d", group, sc.name, sc.args, len(pos))
	}
	var opts []client.Option
	if *key != "" {
		opts = append(opts, client.WithAuthToken(*key))
	}
	return explainAuth(run(ctx, &opEnv{c: client.New(*server, opts...), out: stdout, err: stderr, json: *asJSON, arg: pos[0]}), *key != "")
}

// explainAuth adds to a refused key what to do on this command line: the
// server's message speaks of HTTP headers, which kioku sends itself.
func explainAuth(err error, keyGiven bool) error {
	if connect.CodeOf(err) != connect.CodeUnauthenticated {
		return err
	}
	if !keyGiven {
		return fmt.Errorf("%w\nthis server needs an API key: give it with --key KEY or the environment variable KIOKU_KEY", err)
	}
	return fmt.Errorf("%w\nthe API key given (--key or KIOKU_KEY) was refused; check it, or ask for a new one (kioku key)", err)
}

// parseInterspersed parses flags that come before or after the positional
// arguments, which it returns.
func parseInterspersed(fs *cli.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if rest[0] == "--" {
			return append(pos, rest[1:]...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// table prints rows under a header, aligned.
func (e *opEnv) table(header []string, rows [][]string) error {
	tw := tabwriter.NewWriter(e.out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

// fields prints name: value lines, aligned; empty values are left out.
func (e *opEnv) fields(kv ...[2]string) error {
	tw := tabwriter.NewWriter(e.out, 2, 4, 2, ' ', 0)
	for _, f := range kv {
		if f[1] != "" {
			fmt.Fprintf(tw, "%s:\t%s\n", f[0], f[1])
		}
	}
	return tw.Flush()
}

var jsonOut = protojson.MarshalOptions{Multiline: true, Indent: "  "}

// printJSON prints one message.
func (e *opEnv) printJSON(m proto.Message) error {
	b, err := jsonOut.Marshal(m)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(e.out, "%s\n", b)
	return err
}

// printJSONList prints messages as a JSON array.
func printJSONList[M proto.Message](e *opEnv, ms []M) error {
	parts := make([]string, len(ms))
	for i, m := range ms {
		b, err := jsonOut.Marshal(m)
		if err != nil {
			return err
		}
		parts[i] = "  " + strings.ReplaceAll(string(b), "\n", "\n  ")
	}
	if len(parts) == 0 {
		_, err := fmt.Fprintln(e.out, "[]")
		return err
	}
	_, err := fmt.Fprintf(e.out, "[\n%s\n]\n", strings.Join(parts, ",\n"))
	return err
}

// collect takes up to limit items (0: all) from a List iterator, saying
// on stderr when more were left.
func collect[T any](e *opEnv, limit int, all func(yield func(T, error) bool)) ([]T, error) {
	var out []T
	more := false
	for it, err := range all {
		if err != nil {
			return nil, err
		}
		if limit > 0 && len(out) == limit {
			more = true
			break
		}
		out = append(out, it)
	}
	if more {
		fmt.Fprintf(e.err, "(the first %d; --limit N for more, --limit 0 for all)\n", limit)
	}
	return out, nil
}

// printListing prints up to limit items (0: all) of a List iterator: as
// JSON with --json, else as a table of header and a row per item.
func printListing[M proto.Message](e *opEnv, limit int, all func(yield func(M, error) bool), header []string, row func(M) []string) error {
	list, err := collect(e, limit, all)
	if err != nil {
		return err
	}
	if e.json {
		return printJSONList(e, list)
	}
	return tableOf(e, header, list, row)
}

// tableOf prints items as a table of header and a row per item.
func tableOf[T any](e *opEnv, header []string, items []T, row func(T) []string) error {
	rows := make([][]string, len(items))
	for i, it := range items {
		rows[i] = row(it)
	}
	return e.table(header, rows)
}

// completeName adds suffix (such as "/state") to a name given without it.
func completeName(arg, suffix string) string {
	if strings.HasSuffix(arg, suffix) {
		return arg
	}
	return strings.TrimSuffix(arg, "/") + suffix
}

// limitFlag defines --limit.
func limitFlag(fs *cli.FlagSet, def int) *int {
	return fs.Int("limit", def, "how many to show at most (0: all)")
}

// ts formats a time for a table: UTC to the second, empty when unset.
func ts(t *timestamppb.Timestamp) string {
	if t == nil {
		return ""
	}
	return t.AsTime().UTC().Format(time.RFC3339)
}

// shorten cuts a text for a table cell to n runes, on one line.
func shorten(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// mapString writes a string map as k=v pairs, sorted.
func mapString(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + m[k]
	}
	return strings.Join(parts, ",")
}

// lastSegment is the id at the end of a resource name.
func lastSegment(name string) string { return name[strings.LastIndex(name, "/")+1:] }

// scopeFlag collects --scope k=v flags.
type scopeFlag map[string]string

func (s scopeFlag) String() string { return mapString(s) }

func (s scopeFlag) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok || k == "" {
		return errors.New("want key=value, such as user_id=ann")
	}
	s[k] = val
	return nil
}

// done prints what a command did (deletions happen at once, as in the
// API, and say so).
func (e *opEnv) done(format string, a ...any) error {
	_, err := fmt.Fprintf(e.out, format+"\n", a...)
	return err
}

// readInput reads a file, or standard input for "-".
func readInput(path string) ([]byte, error) {
	if path == "-" {
		return io.ReadAll(os.Stdin)
	}
	return os.ReadFile(path)
}
