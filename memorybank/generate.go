package memorybank

import (
	"context"
	"math"
	"strconv"
	"time"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/jobs"
	"github.com/kioku-ai/kioku/memorybank/memorytype"
	"github.com/kioku-ai/kioku/memorybank/metadata"
	"github.com/kioku-ai/kioku/model"
	"github.com/kioku-ai/kioku/resource"
	"github.com/kioku-ai/kioku/sessions"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
)

// GenerateMemories validates a request and queues an operation for it,
// of kind KindGenerate, keyed by the scope. The operation runs in the
// background (the jobs engine's workers); wait for it with the engine.
func (s *Service) GenerateMemories(ctx context.Context, r *GenerateRequest) (*jobs.Operation, error) {
	if err := validateApp(r.App); err != nil {
		return nil, err
	}
	if (r.Session != nil || len(r.Events) > 0) && s.gen == nil {
		return nil, fault.New(fault.FailedPrecondition, "generating memories from events needs a generation model, and this server has none; configure one with %s (direct facts work without a model)", model.Settings)
	}
	sources := 0
	if r.Session != nil {
		sources++
		if err := sessions.ValidateKey(*r.Session); err != nil {
			return nil, err
		}
		if r.Session.App != r.App {
			return nil, fault.Invalidf("session_source.session %s is not in app %s", r.Session.Name(), r.App)
		}
		if len(r.Scope) == 0 {
			r.Scope = memorytype.Scope{"user_id": r.Session.User}
		}
		if !r.To.IsZero() && !r.To.After(r.From) {
			return nil, fault.Invalidf("session_source.end_time must be after start_time")
		}
		if s.sess == nil {
			return nil, fault.New(fault.FailedPrecondition, "this server cannot read sessions for memory generation")
		}
		// The session must exist now (and be the named user's).
		if _, err := s.sess.EventsAfter(ctx, *r.Session, math.MaxInt64, time.Time{}, time.Time{}, 1); err != nil {
			return nil, err
		}
	}
	if len(r.Events) > 0 {
		sources++
		if len(r.Events) > MaxInlineEvents {
			return nil, fault.New(fault.ResourceExhausted, "events_source has %d events; the limit is %d", len(r.Events), MaxInlineEvents)
		}
	}
	if len(r.Facts) > 0 {
		sources++
		if len(r.Facts) > MaxDirectFacts {
			return nil, fault.New(fault.ResourceExhausted, "direct_memories_source has %d facts; the limit is %d", len(r.Facts), MaxDirectFacts)
		}
		for i, f := range r.Facts {
			if err := validateFact("direct_memories_source.memories["+strconv.Itoa(i)+"].fact", f.Fact); err != nil {
				return nil, err
			}
			if err := validateTopics("direct_memories_source.memories["+strconv.Itoa(i)+"].topics", f.Topics); err != nil {
				return nil, err
			}
		}
		if k := r.FactsSession; k != nil {
			if err := sessions.ValidateKey(*k); err != nil {
				return nil, err
			}
			if k.App != r.App {
				return nil, fault.Invalidf("direct_memories_source.source.session %s is not in app %s", k.Name(), r.App)
			}
		}
		if len(r.FactsEventIDs) > 0 && r.FactsSession == nil {
			return nil, fault.Invalidf("direct_memories_source.source.event_ids needs direct_memories_source.source.session")
		}
		if len(r.FactsEventIDs) > MaxSourceEventIDs {
			return nil, fault.New(fault.ResourceExhausted, "direct_memories_source.source.event_ids has %d ids; the limit is %d", len(r.FactsEventIDs), MaxSourceEventIDs)
		}
		for i, id := range r.FactsEventIDs {
			if err := resource.ValidateID("direct_memories_source.source.event_ids["+strconv.Itoa(i)+"]", id, resource.EventIDChars); err != nil {
				return nil, err
			}
		}
	}
	if sources != 1 {
		return nil, fault.Invalidf("give exactly one source: session_source, events_source or direct_memories_source")
	}
	if err := validateScope("scope", r.Scope); err != nil {
		return nil, err
	}
	if err := validateTopics("allowed_topics", r.AllowedTopics); err != nil {
		return nil, err
	}
	if err := validateMetadata("metadata", r.Metadata); err != nil {
		return nil, err
	}
	if r.MergeStrategy < metadata.MergeUnspecified || r.MergeStrategy > metadata.RequireExactMatch {
		return nil, fault.InvalidField("metadata_merge_strategy", "metadata_merge_strategy %d is not a strategy", r.MergeStrategy)
	}
	if err := s.spendGeneration(ctx, r.App); err != nil {
		return nil, err
	}
	return s.enqueue(ctx, r.App, KindGenerate, r.Scope.Key(), encodeGenerate(r))
}

// PurgeMemories queues a purge, of kind KindPurge: with Force it deletes
// the memories matching the scope and filter (recording revisions),
// without it only counts them.
func (s *Service) PurgeMemories(ctx context.Context, r *PurgeRequest) (*jobs.Operation, error) {
	if err := validateApp(r.App); err != nil {
		return nil, err
	}
	if len(r.Scope) > 0 {
		if err := validateScope("scope", r.Scope); err != nil {
			return nil, err
		}
	}
	if _, err := memorytype.ParseFilter(r.Filter); err != nil {
		return nil, err
	}
	key := ""
	if len(r.Scope) > 0 {
		key = r.Scope.Key()
	}
	return s.enqueue(ctx, r.App, KindPurge, key, encode(purgeRecord{Scope: r.Scope, Filter: r.Filter, Force: r.Force}))
}

// GeneratedMemory is one memory an operation created, updated or deleted,
// or that held a new fact already (Unchanged).
type GeneratedMemory struct {
	Memory *memorytype.Memory
	Action memorytype.Action
}

// GenerateRequest is the input of GenerateMemories. Exactly one of Session,
// Events and Facts is set.
type GenerateRequest struct {
	App   string
	Scope memorytype.Scope
	// Session is a stored session; only events not processed before are
	// used, optionally within [From, To).
	Session *sessiontype.Key
	From    time.Time
	To      time.Time
	// Events is a conversation given inline.
	Events []*sessiontype.Event
	// Facts are facts given directly. FactsSession and FactsEventIDs, when
	// set, are recorded as their source.
	Facts                []DirectFact
	FactsSession         *sessiontype.Key
	FactsEventIDs        []string
	DisableConsolidation bool
	AllowedTopics        []string
	// Metadata is given to the memories the generation creates, and
	// applied to those it updates as MergeStrategy says.
	Metadata      metadata.Map
	MergeStrategy metadata.MergeStrategy
}

// DirectFact is one fact given directly.
type DirectFact struct {
	Fact   string
	Topics []string
}

// PurgeRequest is the input of PurgeMemories.
type PurgeRequest struct {
	App    string
	Scope  memorytype.Scope
	Filter string
	// Force deletes; without it the operation only counts.
	Force bool
}
