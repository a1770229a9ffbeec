package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"google.golang.org/protobuf/types/known/structpb"

	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/internal/cli"
)

func sessionsList(fs *cli.FlagSet) func(context.Context, *opEnv) error {
	filter := fs.String("filter", "", `filter, such as 'display_name = "x" AND labels.team = "core"'`)
	limit := limitFlag(fs, 50)
	return func(ctx context.Context, e *opEnv) error {
		all := e.c.AllSessions(ctx, &kiokuv1.ListSessionsRequest{Parent: e.arg, Filter: *filter, PageSize: 100})
		return printListing(e, *limit, all, []string{"SESSION", "DISPLAY NAME", "EVENTS", "UPDATED", "EXPIRES", "LABELS"}, func(s *kiokuv1.Session) []string {
			return []string{s.GetName(), s.GetDisplayName(), strconv.FormatInt(s.GetLastSequence(), 10), ts(s.GetUpdateTime()), ts(s.GetExpireTime()), mapString(s.GetLabels())}
		})
	}
}

func sessionsGet(fs *cli.FlagSet) func(context.Context, *opEnv) error {
	events := fs.Int("events", 10, "how many of the most recent events to show")
	return func(ctx context.Context, e *opEnv) error {
		s, err := e.c.GetSession(ctx, &kiokuv1.GetSessionRequest{Name: e.arg, NumRecentEvents: int32(*events), SkipEvents: *events == 0})
		if err != nil {
			return err
		}
		if e.json {
			return e.printJSON(s)
		}
		if err := e.fields(
			[2]string{"name", s.GetName()},
			[2]string{"display name", s.GetDisplayName()},
			[2]string{"events", strconv.FormatInt(s.GetLastSequence(), 10)},
			[2]string{"created", ts(s.GetCreateTime())},
			[2]string{"updated", ts(s.GetUpdateTime())},
			[2]string{"expires", ts(s.GetExpireTime())},
			[2]string{"labels", mapString(s.GetLabels())},
		); err != nil {
			return err
		}
		fmt.Fprintln(e.out, "\nstate (merged: the session's own, user: and app:):")
		if err := stateTable(e, s.GetState()); err != nil {
			return err
		}
		if len(s.GetEvents()) > 0 {
			fmt.Fprintf(e.out, "\nthe last %d events:\n", len(s.GetEvents()))
			return tableOf(e, eventHeader, s.GetEvents(), eventRow)
		}
		return nil
	}
}

func sessionsEvents(fs *cli.FlagSet) func(context.Context, *opEnv) error {
	limit := limitFlag(fs, 50)
	newest := fs.Bool("newest-first", false, "list the newest events first")
	return func(ctx context.Context, e *opEnv) error {
		req := &kiokuv1.ListEventsRequest{Parent: e.arg, PageSize: 100}
		if *newest {
			req.OrderBy = "sequence desc"
		}
		return printListing(e, *limit, e.c.AllEvents(ctx, req), eventHeader, eventRow)
	}
}

func sessionsDelete(fs *cli.FlagSet) func(context.Context, *opEnv) error {
	forget := fs.Bool("forget-memories", false, "also delete the memories derived only from this session (and remove it from the sources of the others)")
	return func(ctx context.Context, e *opEnv) error {
		if _, err := e.c.DeleteSession(ctx, &kiokuv1.DeleteSessionRequest{Name: e.arg, ForgetMemories: *forget}); err != nil {
			return err
		}
		if *forget {
			return e.done("deleted %s and forgot the memories it alone was the source of", e.arg)
		}
		return e.done("deleted %s", e.arg)
	}
}

func usersDelete(fs *cli.FlagSet) func(context.Context, *opEnv) error {
	return func(ctx context.Context, e *opEnv) error {
		res, err := e.c.DeleteUser(ctx, &kiokuv1.DeleteUserRequest{Name: e.arg})
		if err != nil {
			return err
		}
		if e.json {
			return e.printJSON(res)
		}
		return e.done("erased %s: deleted %d sessions, %d memories, %d watermarks, %d operations, %d memory files, %d blocks", e.arg,
			res.GetDeletedSessions(), res.GetDeletedMemories(), res.GetDeletedWatermarks(), res.GetDeletedOperations(), res.GetDeletedMemoryFiles(), res.GetDeletedBlocks())
	}
}

// eventHeader and eventRow make the table of events: sequence, id,
// author, time, what they carry and the state keys they changed.
var eventHeader = []string{"SEQ", "ID", "AUTHOR", "TIME", "CONTENT", "STATE DELTA"}

func eventRow(ev *kiokuv1.Event) []string {
	var keys []string
	for k := range ev.GetActions().GetStateDelta().GetFields() {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return []string{strconv.FormatInt(ev.GetSequence(), 10), ev.GetId(), ev.GetAuthor(), ts(ev.GetTimestamp()), shorten(eventSummary(ev), 70), strings.Join(keys, ",")}
}

// eventSummary is what an event carries, in one line: its text, the
// functions it calls and the results it returns.
func eventSummary(ev *kiokuv1.Event) string {
	var parts []string
	for _, p := range ev.GetContent().GetParts() {
		switch {
		case p.GetText() != "":
			parts = append(parts, p.GetText())
		case p.GetFunctionCall() != nil:
			args, _ := json.Marshal(p.GetFunctionCall().GetArgs().AsMap())
			parts = append(parts, fmt.Sprintf("call %s(%s)", p.GetFunctionCall().GetName(), args))
		case p.GetFunctionResponse() != nil:
			res, _ := json.Marshal(p.GetFunctionResponse().GetResponse().AsMap())
			parts = append(parts, fmt.Sprintf("%s returned %s", p.GetFunctionResponse().GetName(), res))
		}
	}
	if ev.GetErrorCode() != "" {
		parts = append(parts, "error "+ev.GetErrorCode()+": "+ev.GetErrorMessage())
	}
	return strings.Join(parts, " ")
}

// stateTable prints a state's keys and values (as JSON), sorted by key.
func stateTable(e *opEnv, st *structpb.Struct) error {
	var keys []string
	for k := range st.GetFields() {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	rows := make([][]string, len(keys))
	for i, k := range keys {
		v, _ := json.Marshal(st.GetFields()[k].AsInterface())
		rows[i] = []string{k, shorten(string(v), 100)}
	}
	return e.table([]string{"KEY", "VALUE"}, rows)
}

// stateName completes apps/APP or apps/APP/users/USER with /state.
func stateName(arg string) string { return completeName(arg, "/state") }

func stateGet(fs *cli.FlagSet) func(context.Context, *opEnv) error {
	return func(ctx context.Context, e *opEnv) error {
		st, err := e.c.GetState(ctx, &kiokuv1.GetStateRequest{Name: stateName(e.arg)})
		if err != nil {
			return err
		}
		return printState(e, st)
	}
}

func printState(e *opEnv, st *kiokuv1.State) error {
	if e.json {
		return e.printJSON(st)
	}
	if err := e.fields([2]string{"name", st.GetName()}, [2]string{"updated", ts(st.GetUpdateTime())}); err != nil {
		return err
	}
	fmt.Fprintln(e.out)
	return stateTable(e, st.GetState())
}

// setFlags collects --set KEY=VALUE flags, in order.
type setFlags []string

func (s *setFlags) String() string     { return strings.Join(*s, " ") }
func (s *setFlags) Set(v string) error { *s = append(*s, v); return nil }

func stateSet(fs *cli.FlagSet) func(context.Context, *opEnv) error {
	var sets setFlags
	fs.Var(&sets, "set", "KEY=VALUE to write (repeatable); VALUE is JSON (42, true, \"x\", {...}), else a string; null deletes the key")
	return func(ctx context.Context, e *opEnv) error {
		if len(sets) == 0 {
			return fmt.Errorf("give what to change with --set KEY=VALUE")
		}
		delta := map[string]any{}
		for _, kv := range sets {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				return fmt.Errorf("--set %q: want KEY=VALUE", kv)
			}
			var val any
			if err := json.Unmarshal([]byte(v), &val); err != nil {
				val = v // not JSON: a string
			}
			delta[k] = val
		}
		d, err := structpb.NewStruct(delta)
		if err != nil {
			return err
		}
		st, err := e.c.UpdateState(ctx, &kiokuv1.UpdateStateRequest{Name: stateName(e.arg), StateDelta: d})
		if err != nil {
			return err
		}
		return printState(e, st)
	}
}
