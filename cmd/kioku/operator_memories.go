package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/kioku-ai/kioku/client"
	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/internal/cli"
)

func memoryRow(m *kiokuv1.Memory) []string {
	return []string{m.GetName(), shorten(m.GetFact(), 60), mapString(m.GetScope()), strings.Join(m.GetTopics(), ","), ts(m.GetUpdateTime()), strconv.Itoa(revisionNumber(m.GetRevisionId()))}
}

var memoryHeader = []string{"MEMORY", "FACT", "SCOPE", "TOPICS", "UPDATED", "REV"}

// revisionNumber reads a revision id ("3"), 0 when it is not a number.
func revisionNumber(id string) int {
	n, _ := strconv.Atoi(id)
	return n
}

func memoriesList(fs *cli.FlagSet) func(context.Context, *opEnv) error {
	scope := scopeFlag{}
	fs.Var(scope, "scope", "KEY=VALUE of the scope (repeatable); none: every scope")
	filter := fs.String("filter", "", `filter, such as 'topics = "USER_PREFERENCES"'`)
	limit := limitFlag(fs, 50)
	return func(ctx context.Context, e *opEnv) error {
		req := &kiokuv1.ListMemoriesRequest{Parent: e.arg, Filter: *filter, PageSize: 100}
		if len(scope) > 0 {
			req.Scope = scope
		}
		return printListing(e, *limit, e.c.AllMemories(ctx, req), memoryHeader, memoryRow)
	}
}

func memoriesGet(fs *cli.FlagSet) func(context.Context, *opEnv) error {
	return func(ctx context.Context, e *opEnv) error {
		m, err := e.c.GetMemory(ctx, &kiokuv1.GetMemoryRequest{Name: e.arg})
		if err != nil {
			return err
		}
		if e.json {
			return e.printJSON(m)
		}
		var sources []string
		for _, s := range m.GetSources() {
			src := s.GetSession()
			if len(s.GetEventIds()) > 0 {
				src += " (events " + strings.Join(s.GetEventIds(), ",") + ")"
			}
			sources = append(sources, src)
		}
		return e.fields(
			[2]string{"name", m.GetName()},
			[2]string{"fact", m.GetFact()},
			[2]string{"scope", mapString(m.GetScope())},
			[2]string{"topics", strings.Join(m.GetTopics(), ", ")},
			[2]string{"metadata", mapString(m.GetMetadata())},
			[2]string{"revision", m.GetRevisionId()},
			[2]string{"created", ts(m.GetCreateTime())},
			[2]string{"updated", ts(m.GetUpdateTime())},
			[2]string{"expires", ts(m.GetExpireTime())},
			[2]string{"sources", strings.Join(sources, "; ")},
		)
	}
}

func memoriesRevisions(fs *cli.FlagSet) func(context.Context, *opEnv) error {
	limit := limitFlag(fs, 50)
	return func(ctx context.Context, e *opEnv) error {
		all := e.c.AllMemoryRevisions(ctx, &kiokuv1.ListMemoryRevisionsRequest{Parent: e.arg, PageSize: 100})
		return printListing(e, *limit, all, []string{"REV", "ACTION", "TIME", "FACT", "REASON"}, func(r *kiokuv1.MemoryRevision) []string {
			action := strings.TrimPrefix(r.GetAction().String(), "MEMORY_ACTION_")
			return []string{lastSegment(r.GetName()), action, ts(r.GetCreateTime()), shorten(r.GetFact(), 60), shorten(r.GetReason(), 40)}
		})
	}
}

func memoriesRetrieve(fs *cli.FlagSet) func(context.Context, *opEnv) error {
	scope := scopeFlag{}
	fs.Var(scope, "scope", "KEY=VALUE of the scope (repeatable; required)")
	query := fs.String("query", "", "the text to find similar memories to; empty: every memory of the scope, newest first")
	topK := fs.Int("top-k", 5, "how many similar memories, with --query (1 to 100)")
	filter := fs.String("filter", "", `filter, such as 'topics = "USER_PREFERENCES"'`)
	return func(ctx context.Context, e *opEnv) error {
		if len(scope) == 0 {
			return fmt.Errorf("--scope is required, such as --scope user_id=ann")
		}
		req := &kiokuv1.RetrieveMemoriesRequest{Parent: e.arg, Scope: scope, Filter: *filter}
		if *query != "" {
			req.Method = client.Similar(*query, *topK)
		} else {
			req.Method = client.Every(100, "")
		}
		res, err := e.c.RetrieveMemories(ctx, req)
		if err != nil {
			return err
		}
		if e.json {
			return printJSONList(e, res.GetRetrievedMemories())
		}
		rows := make([][]string, len(res.GetRetrievedMemories()))
		for i, r := range res.GetRetrievedMemories() {
			distance := ""
			if *query != "" {
				distance = strconv.FormatFloat(r.GetDistance(), 'f', 3, 64)
			}
			rows[i] = []string{distance, r.GetMemory().GetName(), shorten(r.GetMemory().GetFact(), 70), strings.Join(r.GetMemory().GetTopics(), ",")}
		}
		return e.table([]string{"DISTANCE", "MEMORY", "FACT", "TOPICS"}, rows)
	}
}

func memoriesDelete(fs *cli.FlagSet) func(context.Context, *opEnv) error {
	return func(ctx context.Context, e *opEnv) error {
		if _, err := e.c.DeleteMemory(ctx, &kiokuv1.DeleteMemoryRequest{Name: e.arg}); err != nil {
			return err
		}
		return e.done("deleted %s (its revisions remain)", e.arg)
	}
}

func opsList(fs *cli.FlagSet) func(context.Context, *opEnv) error {
	filter := fs.String("filter", "", "filter: 'done = false', 'state = RUNNING', ...")
	limit := limitFlag(fs, 50)
	return func(ctx context.Context, e *opEnv) error {
		all := e.c.AllOperations(ctx, &kiokuv1.ListOperationsRequest{Parent: e.arg, Filter: *filter, PageSize: 100})
		return printListing(e, *limit, all, []string{"OPERATION", "METHOD", "STATE", "PROGRESS", "CREATED", "ENDED", "ERROR"}, func(op *kiokuv1.Operation) []string {
			md, _ := client.Metadata(op)
			return []string{op.GetName(), md.GetMethod(), opState(md), shorten(md.GetProgressMessage(), 30), ts(md.GetCreateTime()), ts(md.GetEndTime()), shorten(op.GetError().GetMessage(), 50)}
		})
	}
}

func opState(md *kiokuv1.OperationMetadata) string {
	return strings.TrimPrefix(md.GetState().String(), "OPERATION_STATE_")
}

func opsGet(fs *cli.FlagSet) func(context.Context, *opEnv) error {
	return func(ctx context.Context, e *opEnv) error {
		op, err := e.c.GetOperation(ctx, &kiokuv1.GetOperationRequest{Name: e.arg})
		if err != nil {
			return err
		}
		return printOperation(e, op)
	}
}

func opsWait(fs *cli.FlagSet) func(context.Context, *opEnv) error {
	timeout := fs.Duration("timeout", 5*time.Minute, "how long to wait at most")
	return func(ctx context.Context, e *opEnv) error {
		ctx, cancel := context.WithTimeout(ctx, *timeout)
		defer cancel()
		op, err := e.c.WaitOperation(ctx, e.arg)
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("%s is not done after %v", e.arg, *timeout)
			}
			return err
		}
		return printOperation(e, op)
	}
}

func opsCancel(fs *cli.FlagSet) func(context.Context, *opEnv) error {
	return func(ctx context.Context, e *opEnv) error {
		op, err := e.c.CancelOperation(ctx, &kiokuv1.CancelOperationRequest{Name: e.arg})
		if err != nil {
			return err
		}
		return printOperation(e, op)
	}
}

// printOperation shows an operation: its state and figures, then its error
// or its result (the memories a generation touched, a purge's count).
func printOperation(e *opEnv, op *kiokuv1.Operation) error {
	if e.json {
		return e.printJSON(op)
	}
	md, err := client.Metadata(op)
	if err != nil {
		return err
	}
	if err := e.fields(
		[2]string{"name", op.GetName()},
		[2]string{"method", md.GetMethod()},
		[2]string{"state", opState(md)},
		[2]string{"done", strconv.FormatBool(op.GetDone())},
		[2]string{"progress", md.GetProgressMessage()},
		[2]string{"attempt", strconv.Itoa(int(md.GetAttempt()))},
		[2]string{"model calls", strconv.Itoa(int(md.GetModelCalls()))},
		[2]string{"events processed", strconv.Itoa(int(md.GetEventsProcessed()))},
		[2]string{"facts extracted", strconv.Itoa(int(md.GetFactsExtracted()))},
		[2]string{"created", ts(md.GetCreateTime())},
		[2]string{"started", ts(md.GetStartTime())},
		[2]string{"ended", ts(md.GetEndTime())},
		[2]string{"coalesced with", strings.Join(md.GetCoalescedOperations(), ", ")},
		[2]string{"error", op.GetError().GetMessage()},
	); err != nil {
		return err
	}
	resp := op.GetResponse()
	switch {
	case resp == nil:
		return nil
	case resp.MessageIs(&kiokuv1.GenerateMemoriesResponse{}):
		r, err := client.GenerateResult(op)
		if err != nil {
			return err
		}
		fmt.Fprintln(e.out, "\nmemories:")
		rows := make([][]string, len(r.GetGeneratedMemories()))
		for i, g := range r.GetGeneratedMemories() {
			rows[i] = []string{strings.TrimPrefix(g.GetAction().String(), "MEMORY_ACTION_"), g.GetMemory().GetName(), shorten(g.GetMemory().GetFact(), 70)}
		}
		return e.table([]string{"ACTION", "MEMORY", "FACT"}, rows)
	case resp.MessageIs(&kiokuv1.PurgeMemoriesResponse{}):
		var r kiokuv1.PurgeMemoriesResponse
		if err := resp.UnmarshalTo(&r); err != nil {
			return err
		}
		return e.fields([2]string{"purged", strconv.FormatInt(r.GetPurgeCount(), 10)})
	}
	return nil
}

// configName completes apps/APP with /memoryBankConfig.
func configName(arg string) string { return completeName(arg, "/memoryBankConfig") }

func configGet(fs *cli.FlagSet) func(context.Context, *opEnv) error {
	return func(ctx context.Context, e *opEnv) error {
		cfg, err := e.c.GetMemoryBankConfig(ctx, &kiokuv1.GetMemoryBankConfigRequest{Name: configName(e.arg)})
		if err != nil {
			return err
		}
		return printConfig(e, cfg)
	}
}

func printConfig(e *opEnv, cfg *kiokuv1.MemoryBankConfig) error {
	if e.json {
		return e.printJSON(cfg)
	}
	var custom []string
	for _, t := range cfg.GetCustomTopics() {
		custom = append(custom, t.GetLabel()+" ("+shorten(t.GetDescription(), 40)+")")
	}
	dur := func(d *durationpb.Duration) string {
		if d == nil {
			return ""
		}
		return d.AsDuration().String()
	}
	trig := cfg.GetGenerationTrigger()
	return e.fields(
		[2]string{"name", cfg.GetName()},
		[2]string{"managed topics", strings.Join(cfg.GetManagedTopics(), ", ")},
		[2]string{"custom topics", strings.Join(custom, "; ")},
		[2]string{"generation examples", strconv.Itoa(len(cfg.GetGenerationExamples()))},
		[2]string{"memory ttl", dur(cfg.GetMemoryTtl())},
		[2]string{"revision ttl", dur(cfg.GetRevisionTtl())},
		[2]string{"generate every", countOf(trig.GetEventCount(), "new events")},
		[2]string{"generate when idle for", dur(trig.GetIdleDuration())},
		[2]string{"pii redaction", piiSummary(cfg.GetPiiRedaction())},
		[2]string{"updated", ts(cfg.GetUpdateTime())},
	)
}

// piiSummary says whether redaction is on and what it redacts.
func piiSummary(p *kiokuv1.PiiRedaction) string {
	switch {
	case p == nil:
		return ""
	case !p.GetEnabled():
		return "off"
	}
	what := "all categories"
	if len(p.GetCategories()) > 0 {
		what = strings.Join(p.GetCategories(), ", ")
	}
	if n := len(p.GetCustomPatterns()); n > 0 {
		what += fmt.Sprintf(" and %d custom pattern(s)", n)
	}
	return "on: " + what
}

func countOf(n int32, what string) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("%d %s", n, what)
}

func configSet(fs *cli.FlagSet) func(context.Context, *opEnv) error {
	file := fs.String("file", "", `JSON of a MemoryBankConfig ("-": standard input), such as {"managed_topics": ["USER_PREFERENCES"], "memory_ttl": "2592000s"}; the fields it has are replaced, the others kept`)
	return func(ctx context.Context, e *opEnv) error {
		if *file == "" {
			return fmt.Errorf("--file is required: the JSON of the fields to change")
		}
		data, err := readInput(*file)
		if err != nil {
			return err
		}
		cfg := &kiokuv1.MemoryBankConfig{}
		if err := protojson.Unmarshal(data, cfg); err != nil {
			return fmt.Errorf("--file %s is not a MemoryBankConfig in JSON: %w", *file, err)
		}
		mask, err := configMask(data)
		if err != nil {
			return fmt.Errorf("--file %s: %w", *file, err)
		}
		cfg.Name = configName(e.arg)
		out, err := e.c.UpdateMemoryBankConfig(ctx, &kiokuv1.UpdateMemoryBankConfigRequest{MemoryBankConfig: cfg, UpdateMask: mask})
		if err != nil {
			return err
		}
		return printConfig(e, out)
	}
}

// configMask is the update mask of a MemoryBankConfig given in JSON: its
// top-level fields, by their proto names (JSON may use either name).
func configMask(data []byte) (*fieldmaskpb.FieldMask, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return nil, err
	}
	fields := (&kiokuv1.MemoryBankConfig{}).ProtoReflect().Descriptor().Fields()
	mask := &fieldmaskpb.FieldMask{}
	for k := range top {
		fd := fields.ByJSONName(k)
		if fd == nil {
			fd = fields.ByTextName(k)
		}
		switch {
		case fd == nil:
			return nil, fmt.Errorf("%q is not a field of MemoryBankConfig", k)
		case fd.Name() == "name" || fd.Name() == "update_time":
			continue // the argument names it; the server sets the time
		}
		mask.Paths = append(mask.Paths, string(fd.Name()))
	}
	if len(mask.Paths) == 0 {
		return nil, fmt.Errorf("no field to change")
	}
	return mask, nil
}

// The webhooks group: an app's deliveries and their attempts, and sending
// one again.

func webhooksList(fs *cli.FlagSet) func(context.Context, *opEnv) error {
	state := fs.String("state", "", "only deliveries in this state: pending, delivered, dead_lettered or skipped")
	limit := limitFlag(fs, 50)
	return func(ctx context.Context, e *opEnv) error {
		req := &kiokuv1.ListWebhookDeliveriesRequest{Parent: e.arg, PageSize: 100}
		if *state != "" {
			v, ok := kiokuv1.WebhookDeliveryState_value["WEBHOOK_DELIVERY_STATE_"+strings.ToUpper(*state)]
			if !ok || v == 0 {
				return fmt.Errorf("--state %q: want pending, delivered, dead_lettered or skipped", *state)
			}
			req.State = kiokuv1.WebhookDeliveryState(v)
		}
		all := func(yield func(*kiokuv1.WebhookDelivery, error) bool) {
			for {
				page, err := e.c.ListWebhookDeliveries(ctx, req)
				if err != nil {
					yield(nil, err)
					return
				}
				for _, d := range page.GetDeliveries() {
					if !yield(d, nil) {
						return
					}
				}
				if req.PageToken = page.GetNextPageToken(); req.PageToken == "" {
					return
				}
			}
		}
		return printListing(e, *limit, all, []string{"DELIVERY", "TYPE", "MEMORY", "STATE", "ATTEMPTS", "LAST", "URL"}, func(d *kiokuv1.WebhookDelivery) []string {
			last := ""
			if as := d.GetAttempts(); len(as) > 0 {
				a := as[len(as)-1]
				last = ts(a.GetTime()) + " " + shorten(a.GetError(), 40)
				if a.GetError() == "" {
					last = fmt.Sprintf("%s %d", ts(a.GetTime()), a.GetStatusCode())
				}
			}
			return []string{lastSegment(d.GetName()), d.GetType(), lastSegment(d.GetMemory()), deliveryState(d), fmt.Sprint(d.GetAttemptCount()), last, d.GetUrl()}
		})
	}
}

func deliveryState(d *kiokuv1.WebhookDelivery) string {
	return strings.TrimPrefix(d.GetState().String(), "WEBHOOK_DELIVERY_STATE_")
}

func webhooksRedeliver(fs *cli.FlagSet) func(context.Context, *opEnv) error {
	return func(ctx context.Context, e *opEnv) error {
		d, err := e.c.RedeliverWebhook(ctx, &kiokuv1.RedeliverWebhookRequest{Name: e.arg})
		if err != nil {
			return err
		}
		if e.json {
			return e.printJSON(d)
		}
		return e.done("%s is %s again, due now (%d attempts so far)", d.GetName(), strings.ToLower(deliveryState(d)), d.GetAttemptCount())
	}
}

// quotaGet shows an app's usage of today against the daily quotas.
func quotaGet(fs *cli.FlagSet) func(context.Context, *opEnv) error {
	return func(ctx context.Context, e *opEnv) error {
		u, err := e.c.GetQuotaUsage(ctx, &kiokuv1.GetQuotaUsageRequest{Name: completeName(e.arg, "/quotaUsage")})
		if err != nil {
			return err
		}
		if e.json {
			return e.printJSON(u)
		}
		return e.fields(
			[2]string{"name", u.GetName()},
			[2]string{"day (UTC)", u.GetDay()},
			[2]string{"generations", ofQuota(u.GetGenerations(), u.GetGenerationQuota())},
			[2]string{"model tokens", ofQuota(u.GetTokens(), u.GetTokenQuota())},
			[2]string{"resets", ts(u.GetResetTime())},
		)
	}
}

// ofQuota writes a usage with its quota: "3 of 100", or "3 (no quota)".
func ofQuota(used, quota int64) string {
	if quota <= 0 {
		return strconv.FormatInt(used, 10) + " (no quota)"
	}
	return strconv.FormatInt(used, 10) + " of " + strconv.FormatInt(quota, 10)
}
