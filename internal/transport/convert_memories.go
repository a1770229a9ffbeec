package transport

import (
	"strconv"
	"strings"
	"time"

	"github.com/kioku-ai/kioku/fault"
	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/internal/aip/filter"
	"github.com/kioku-ai/kioku/internal/workflow"
	"github.com/kioku-ai/kioku/jobs"
	"github.com/kioku-ai/kioku/memorybank"
	"github.com/kioku-ai/kioku/memorybank/appconfig"
	"github.com/kioku-ai/kioku/memorybank/memorytype"
	"github.com/kioku-ai/kioku/memorybank/metadata"
	"github.com/kioku-ai/kioku/memorybank/retrieval"
	"github.com/kioku-ai/kioku/redact"
	"github.com/kioku-ai/kioku/resource"
	"github.com/kioku-ai/kioku/sessions"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

func memoryToProto(m *memorytype.Memory) *kiokuv1.Memory {
	out := &kiokuv1.Memory{
		Name:          m.Name(),
		Fact:          m.Fact,
		DisplayName:   m.DisplayName,
		Description:   m.Description,
		Scope:         m.Scope,
		Topics:        m.Topics,
		Metadata:      m.Metadata.Strings(),
		TypedMetadata: metadataToProto(m.Metadata),
		CreateTime:    timestampOrNil(m.CreateTime),
		UpdateTime:    timestampOrNil(m.UpdateTime),
		RevisionId:    strconv.FormatInt(m.Revision, 10),
		EventTime:     timestampOrNil(m.EventTime),
		StatedTime:    timestampOrNil(m.StatedTime),
		MemoryType:    memoryTypes[m.Type()],
		Profile:       profileFieldToProto(m.Profile),
	}
	if !m.ExpireTime.IsZero() {
		out.Expiration = &kiokuv1.Memory_ExpireTime{ExpireTime: timestamppb.New(m.ExpireTime)}
	}
	out.Sources = sourcesToProto(m.Sources)
	return out
}

func sourcesToProto(src []memorytype.Source) []*kiokuv1.MemorySource {
	var out []*kiokuv1.MemorySource
	for _, s := range src {
		out = append(out, &kiokuv1.MemorySource{Session: s.Session, EventIds: s.EventIDs})
	}
	return out
}

func actionToProto(a memorytype.Action) kiokuv1.MemoryAction {
	switch a {
	case memorytype.Created:
		return kiokuv1.MemoryAction_MEMORY_ACTION_CREATED
	case memorytype.Updated:
		return kiokuv1.MemoryAction_MEMORY_ACTION_UPDATED
	case memorytype.Deleted:
		return kiokuv1.MemoryAction_MEMORY_ACTION_DELETED
	case memorytype.Unchanged:
		return kiokuv1.MemoryAction_MEMORY_ACTION_UNCHANGED
	}
	return kiokuv1.MemoryAction_MEMORY_ACTION_UNSPECIFIED
}

func revisionToProto(r *memorytype.Revision) *kiokuv1.MemoryRevision {
	return &kiokuv1.MemoryRevision{
		Name:           r.Name(),
		Action:         actionToProto(r.Action),
		Fact:           r.Fact,
		Scope:          r.Scope,
		Topics:         r.Topics,
		Metadata:       r.Metadata.Strings(),
		TypedMetadata:  metadataToProto(r.Metadata),
		ExtractedFacts: r.ExtractedFacts,
		Sources:        sourcesToProto(r.Sources),
		Operation:      r.Operation,
		Reason:         r.Reason,
		CreateTime:     timestampOrNil(r.CreateTime),
		ExpireTime:     timestampOrNil(r.ExpireTime),
		EventTime:      timestampOrNil(r.EventTime),
		StatedTime:     timestampOrNil(r.StatedTime),
		Profile:        profileFieldToProto(r.Profile),
	}
}

// metadataToProto returns metadata's typed values (nil for none).
func metadataToProto(md metadata.Map) map[string]*kiokuv1.MetadataValue {
	if len(md) == 0 {
		return nil
	}
	out := make(map[string]*kiokuv1.MetadataValue, len(md))
	for k, v := range md {
		pv := &kiokuv1.MetadataValue{}
		switch v.Kind() {
		case metadata.KindDouble:
			pv.Value = &kiokuv1.MetadataValue_DoubleValue{DoubleValue: v.Double()}
		case metadata.KindBool:
			pv.Value = &kiokuv1.MetadataValue_BoolValue{BoolValue: v.Bool()}
		case metadata.KindTimestamp:
			pv.Value = &kiokuv1.MetadataValue_TimestampValue{TimestampValue: timestamppb.New(v.Time())}
		default:
			pv.Value = &kiokuv1.MetadataValue_StringValue{StringValue: v.Text()}
		}
		out[k] = pv
	}
	return out
}

// metadataFromProto reads a request's metadata: string values (the
// metadata map, field) and typed ones (typed, field typedField); a key in
// both is refused unless both give the same string.
func metadataFromProto(field string, strs map[string]string, typedField string, typed map[string]*kiokuv1.MetadataValue) (metadata.Map, error) {
	if len(strs) == 0 && len(typed) == 0 {
		return nil, nil
	}
	out := metadata.FromStrings(strs)
	if out == nil {
		out = metadata.Map{}
	}
	for k, pv := range typed {
		var v metadata.Value
		switch x := pv.GetValue().(type) {
		case *kiokuv1.MetadataValue_DoubleValue:
			v = metadata.Double(x.DoubleValue)
		case *kiokuv1.MetadataValue_BoolValue:
			v = metadata.Bool(x.BoolValue)
		case *kiokuv1.MetadataValue_TimestampValue:
			if err := x.TimestampValue.CheckValid(); err != nil {
				return nil, fault.InvalidField(typedField, "%s[%q]: %v", typedField, k, err)
			}
			v = metadata.Timestamp(x.TimestampValue.AsTime())
		default:
			v = metadata.String(pv.GetStringValue())
		}
		if old, ok := out[k]; ok && old != v {
			return nil, fault.InvalidField(typedField, "%s and %s both set %q, to different values: give each key once", field, typedField, k)
		}
		out[k] = v
	}
	return out, nil
}

// mergeStrategyFromProto converts a merge strategy.
func mergeStrategyFromProto(s kiokuv1.MetadataMergeStrategy) (metadata.MergeStrategy, error) {
	switch s {
	case kiokuv1.MetadataMergeStrategy_METADATA_MERGE_STRATEGY_UNSPECIFIED:
		return metadata.MergeUnspecified, nil
	case kiokuv1.MetadataMergeStrategy_METADATA_MERGE_STRATEGY_OVERWRITE:
		return metadata.Overwrite, nil
	case kiokuv1.MetadataMergeStrategy_METADATA_MERGE_STRATEGY_MERGE:
		return metadata.Merge, nil
	case kiokuv1.MetadataMergeStrategy_METADATA_MERGE_STRATEGY_REQUIRE_EXACT_MATCH:
		return metadata.RequireExactMatch, nil
	}
	return 0, fault.InvalidField("metadata_merge_strategy", "metadata_merge_strategy %d is not a strategy", s)
}

// timeRangeFromProto converts a time range, checking its times.
func timeRangeFromProto(field string, r *kiokuv1.TimeRange) (retrieval.TimeRange, error) {
	from, to, err := timeRange(field+".", r.GetStartTime(), r.GetEndTime())
	if err != nil {
		return retrieval.TimeRange{}, err
	}
	if !from.IsZero() && !to.IsZero() && !from.Before(to) {
		return retrieval.TimeRange{}, fault.Invalidf("%s: start_time %s is not before end_time %s", field, from.Format(time.RFC3339), to.Format(time.RFC3339))
	}
	return retrieval.TimeRange{From: from, To: to}, nil
}

func durationOrNil(d time.Duration) *durationpb.Duration {
	if d == 0 {
		return nil
	}
	return durationpb.New(d)
}

func bankConfigToProto(c *appconfig.Config) (*kiokuv1.MemoryBankConfig, error) {
	out := &kiokuv1.MemoryBankConfig{
		Name:          resource.MemoryBankConfigName(c.App),
		ManagedTopics: c.ManagedTopics,
		MemoryTtl:     durationOrNil(c.MemoryTTL),
		RevisionTtl:   durationOrNil(c.RevisionTTL),
		UpdateTime:    timestampOrNil(c.UpdateTime),
	}
	for _, t := range c.CustomTopics {
		out.CustomTopics = append(out.CustomTopics, &kiokuv1.CustomMemoryTopic{Label: t.Label, Description: t.Description})
	}
	for _, ex := range c.Examples {
		pe := &kiokuv1.GenerationExample{ExpectedFacts: ex.ExpectedFacts}
		for _, e := range ex.Events {
			ev, err := eventToProto(sessiontype.Key{}, e)
			if err != nil {
				return nil, err
			}
			pe.Events = append(pe.Events, ev)
		}
		out.GenerationExamples = append(out.GenerationExamples, pe)
	}
	if t := c.Trigger; t.EventCount > 0 || t.IdleDuration > 0 {
		out.GenerationTrigger = &kiokuv1.GenerationTrigger{EventCount: int32(t.EventCount), IdleDuration: durationOrNil(t.IdleDuration)}
	}
	if t := c.Compaction; t != (sessions.CompactionTrigger{}) {
		out.CompactionTrigger = &kiokuv1.CompactionTrigger{EventCount: int32(t.EventCount), EventBytes: t.EventBytes, KeepRecentEvents: int32(t.KeepRecent)}
	}
	if p := c.PIIRedaction; p.Enabled || len(p.Categories) > 0 || len(p.Patterns) > 0 {
		out.PiiRedaction = &kiokuv1.PiiRedaction{Enabled: p.Enabled}
		for _, cat := range p.Categories {
			out.PiiRedaction.Categories = append(out.PiiRedaction.Categories, string(cat))
		}
		for _, pat := range p.Patterns {
			out.PiiRedaction.CustomPatterns = append(out.PiiRedaction.CustomPatterns, &kiokuv1.PiiPattern{Name: pat.Name, Regex: pat.Regex})
		}
	}
	if f := c.Retrieval.Fusion; f != (retrieval.Fusion{}) {
		out.Retrieval = &kiokuv1.RetrievalConfig{Fusion: &kiokuv1.FusionConfig{
			Method: fusionMethods[f.Method], DenseWeight: f.DenseWeight, LexicalWeight: f.LexicalWeight, RrfK: int32(f.RRFK),
		}}
	}
	for _, w := range c.Webhooks {
		pw := &kiokuv1.Webhook{Url: w.URL, Events: w.Events}
		if w.OmitFact {
			pw.IncludeFact = proto.Bool(false)
		}
		if w.SecretGenerated {
			// Shown in the answer of the update that generated it, never again.
			pw.Secret = w.Secret
		}
		out.Webhooks = append(out.Webhooks, pw)
	}
	var err error
	out.ProfileSchemas, err = profileSchemasToProto(c.Profiles)
	return out, err
}

var fusionMethods = map[retrieval.FusionMethod]kiokuv1.FusionMethod{
	retrieval.FusionRRF:      kiokuv1.FusionMethod_FUSION_METHOD_RRF,
	retrieval.FusionWeighted: kiokuv1.FusionMethod_FUSION_METHOD_WEIGHTED,
}

func fusionFromProto(p *kiokuv1.FusionConfig) (retrieval.Fusion, error) {
	f := retrieval.Fusion{DenseWeight: p.GetDenseWeight(), LexicalWeight: p.GetLexicalWeight(), RRFK: int(p.GetRrfK())}
	if m := p.GetMethod(); m != kiokuv1.FusionMethod_FUSION_METHOD_UNSPECIFIED {
		for dm, pm := range fusionMethods {
			if pm == m {
				f.Method = dm
			}
		}
		if f.Method == "" {
			return f, fault.Invalidf("retrieval.fusion.method %d is not a fusion method", m)
		}
	}
	return f, nil
}

func bankConfigFromProto(app string, p *kiokuv1.MemoryBankConfig) (*appconfig.Config, error) {
	c := &appconfig.Config{
		App:           app,
		ManagedTopics: p.GetManagedTopics(),
		Trigger:       appconfig.Trigger{EventCount: int(p.GetGenerationTrigger().GetEventCount())},
		Compaction: sessions.CompactionTrigger{
			EventCount: int(p.GetCompactionTrigger().GetEventCount()),
			EventBytes: p.GetCompactionTrigger().GetEventBytes(),
			KeepRecent: int(p.GetCompactionTrigger().GetKeepRecentEvents()),
		},
	}
	var err error
	for _, d := range []struct {
		field string
		value *durationpb.Duration
		to    *time.Duration
	}{
		{"memory_bank_config.memory_ttl", p.GetMemoryTtl(), &c.MemoryTTL},
		{"memory_bank_config.revision_ttl", p.GetRevisionTtl(), &c.RevisionTTL},
		{"memory_bank_config.generation_trigger.idle_duration", p.GetGenerationTrigger().GetIdleDuration(), &c.Trigger.IdleDuration},
	} {
		if *d.to, err = durationOf(d.field, d.value); err != nil {
			return nil, err
		}
	}
	fusion, err := fusionFromProto(p.GetRetrieval().GetFusion())
	if err != nil {
		return nil, err
	}
	c.Retrieval.Fusion = fusion
	for _, t := range p.GetCustomTopics() {
		c.CustomTopics = append(c.CustomTopics, appconfig.CustomTopic{Label: t.GetLabel(), Description: t.GetDescription()})
	}
	c.PIIRedaction.Enabled = p.GetPiiRedaction().GetEnabled()
	for _, cat := range p.GetPiiRedaction().GetCategories() {
		c.PIIRedaction.Categories = append(c.PIIRedaction.Categories, redact.Category(cat))
	}
	for _, pat := range p.GetPiiRedaction().GetCustomPatterns() {
		c.PIIRedaction.Patterns = append(c.PIIRedaction.Patterns, redact.Pattern{Name: pat.GetName(), Regex: pat.GetRegex()})
	}
	for i, ex := range p.GetGenerationExamples() {
		e := appconfig.Example{ExpectedFacts: ex.GetExpectedFacts()}
		for _, pe := range ex.GetEvents() {
			ev, err := eventFromProto(pe)
			if err != nil {
				return nil, fault.Invalidf("generation_examples[%d]: %v", i, err)
			}
			e.Events = append(e.Events, ev)
		}
		c.Examples = append(c.Examples, e)
	}
	for _, w := range p.GetWebhooks() {
		c.Webhooks = append(c.Webhooks, appconfig.Webhook{URL: w.GetUrl(), Secret: w.GetSecret(), Events: w.GetEvents(), OmitFact: w.IncludeFact != nil && !w.GetIncludeFact()})
	}
	c.Profiles, err = profileSchemasFromProto(p.GetProfileSchemas())
	return c, err
}

var opStates = map[jobs.State]kiokuv1.OperationState{
	jobs.Pending:   kiokuv1.OperationState_OPERATION_STATE_PENDING,
	jobs.Running:   kiokuv1.OperationState_OPERATION_STATE_RUNNING,
	jobs.Succeeded: kiokuv1.OperationState_OPERATION_STATE_SUCCEEDED,
	jobs.Failed:    kiokuv1.OperationState_OPERATION_STATE_FAILED,
	jobs.Cancelled: kiokuv1.OperationState_OPERATION_STATE_CANCELLED,
}

// operationToProto builds the LRO-shaped Operation: OperationMetadata as
// metadata; when done, a Status error or the typed response of its kind.
func operationToProto(op *workflow.Operation) (*kiokuv1.Operation, error) {
	fig := op.Figures()
	md := &kiokuv1.OperationMetadata{
		State:                 opStates[op.State],
		Method:                op.Kind,
		ProgressMessage:       op.Progress,
		CreateTime:            timestampOrNil(op.CreateTime),
		StartTime:             timestampOrNil(op.StartTime),
		EndTime:               timestampOrNil(op.EndTime),
		Attempt:               int32(op.Attempt),
		ModelCalls:            int32(fig.ModelCalls),
		EventsProcessed:       int32(fig.EventsProcessed),
		FactsExtracted:        int32(fig.FactsExtracted),
		ExtractionDuration:    durationOrNil(fig.ExtractionTime),
		ConsolidationDuration: durationOrNil(fig.ConsolidationTime),
		CoalescedOperations:   op.CoalescedWith,
	}
	mdAny, err := anypb.New(md)
	if err != nil {
		return nil, err
	}
	out := &kiokuv1.Operation{Name: op.Name(), Metadata: mdAny, Done: op.State.Done()}
	switch op.State {
	case jobs.Failed, jobs.Cancelled:
		code := codes[op.ErrorKind]
		if op.State == jobs.Cancelled {
			code = codes[fault.Canceled]
		}
		out.Result = &kiokuv1.Operation_Error{Error: &kiokuv1.Status{Code: int32(code), Message: op.ErrorMessage}}
	case jobs.Succeeded:
		var resp proto.Message
		switch {
		case op.Kind == memorybank.KindPurge:
			resp = &kiokuv1.PurgeMemoriesResponse{PurgeCount: op.Memory.PurgeCount}
		case op.Compaction != nil:
			r := &kiokuv1.CompactSessionResponse{}
			if c := op.Compaction; c.Event != nil {
				r.Created = c.Created
				if r.Compaction, err = eventToProto(c.Session, c.Event); err != nil {
					return nil, err
				}
			}
			resp = r
		case op.Rewrite != nil:
			r := &kiokuv1.RewriteBlocksResponse{}
			for _, b := range op.Rewrite.Blocks {
				r.Blocks = append(r.Blocks, BlockToProto(b))
			}
			resp = r
		default:
			r := &kiokuv1.GenerateMemoriesResponse{}
			if op.Memory != nil {
				for _, g := range op.Memory.Generated {
					r.GeneratedMemories = append(r.GeneratedMemories, &kiokuv1.GeneratedMemory{Memory: memoryToProto(g.Memory), Action: actionToProto(g.Action)})
				}
			}
			resp = r
		}
		a, err := anypb.New(resp)
		if err != nil {
			return nil, err
		}
		out.Result = &kiokuv1.Operation_Response{Response: a}
	}
	return out, nil
}

// opFilter is what ListOperations' filter may name: state (PENDING,
// RUNNING, SUCCEEDED, FAILED, CANCELLED, optionally with the
// OPERATION_STATE_ prefix) and done (true or false), in AIP-160.
var opFilter = &filter.Schema{Method: "ListOperations", Fields: []filter.Field{
	{Name: "state"},
	{Name: "done", Kind: filter.Bool},
}}

// parseOpFilter parses ListOperations' filter and returns the states that
// pass (nil: all).
func parseOpFilter(s string) ([]jobs.State, error) {
	e, err := opFilter.Parse(s)
	if err != nil || e == nil {
		return nil, err
	}
	filter.Walk(e, func(r *filter.Restriction) bool {
		if r.Cond.Field.Name != "state" {
			return true
		}
		r.Cond.Value.Text = strings.TrimPrefix(strings.ToUpper(r.Cond.Value.Text), "OPERATION_STATE_")
		known := false
		for st := jobs.Pending; st <= jobs.Cancelled; st++ {
			known = known || st.String() == r.Cond.Value.Text
		}
		if !known {
			err = fault.InvalidField("filter", "filter: unknown state %q; use PENDING, RUNNING, SUCCEEDED, FAILED or CANCELLED", r.Value)
		}
		return err == nil
	})
	if err != nil {
		return nil, err
	}
	states := []jobs.State{}
	for st := jobs.Pending; st <= jobs.Cancelled; st++ {
		if filter.Eval(e, func(c *filter.Cond) bool {
			if c.Field.Name == "done" {
				return c.MatchBool(st.Done())
			}
			return c.MatchString(st.String())
		}) {
			states = append(states, st)
		}
	}
	if len(states) == 0 {
		// Contradictory conditions: no state passes.
		states = []jobs.State{jobs.Unspecified}
	}
	return states, nil
}
