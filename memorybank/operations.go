package memorybank

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/unixnano"
	"github.com/kioku-ai/kioku/jobs"
	"github.com/kioku-ai/kioku/memorybank/memorytype"
	"github.com/kioku-ai/kioku/memorybank/metadata"
	"github.com/kioku-ai/kioku/memorybank/profile"
	"github.com/kioku-ai/kioku/resource"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
)

// The kinds of the memory bank's operations (jobs.Operation.Kind).
const (
	KindGenerate = "GenerateMemories"
	KindPurge    = "PurgeMemories"
)

// coalesceMax is the most generations of one scope claimed together.
const coalesceMax = 8

// register adds the memory bank's kinds to the engine.
func (s *Service) register(e *jobs.Engine) {
	describe := func(key string) string { return "scope " + memorytype.ParseScopeKey(key).String() }
	e.Register(jobs.Kind{
		Name: KindGenerate, Domain: "memory", Run: s.generate, Coalesce: coalesceMax, Describe: describe, Noun: "memory operations", Owner: scopeKeyUser,
		Timeout: s.cfg.AttemptTimeout,
		// Generations of one scope share a run when they have the same
		// options (metadata included) and the same kind of input (facts
		// or events).
		Group: func(op *jobs.Operation) string {
			g, err := decodeGenerate(op)
			if err != nil {
				return op.ID // runs alone, and fails to decode there
			}
			// The metadata is part of the options: a run applies one.
			md, _ := json.Marshal(g.Metadata)
			return fmt.Sprintf("%v|%v|%v|%s|%v", g.DisableConsolidation, g.AllowedTopics, len(g.Facts) > 0, md, g.MergeStrategy)
		},
		Ended: s.generationEnded,
	})
	e.Register(jobs.Kind{Name: KindPurge, Domain: "memory", Run: s.purge, Describe: describe, Noun: "memory operations", Owner: scopeKeyUser})
}

// Job is a memory bank operation's request and what it did, decoded from
// its record (JobOf).
type Job struct {
	// Generate or Purge is the request, by kind.
	Generate *GenerateRequest
	Purge    *PurgeRequest
	// Generated and PurgeCount are the result of a succeeded operation
	// (a purge's count so far while it runs).
	Generated  []GeneratedMemory
	PurgeCount int64
	// The figures of a generation's run (so far, while it runs).
	ModelCalls, EventsProcessed, FactsExtracted int
	ExtractionTime, Consolidation               time.Duration
}

// JobOf decodes an operation of the memory bank's kinds; nil for an
// operation of another kind.
func JobOf(op *jobs.Operation) (*Job, error) {
	j := &Job{}
	switch op.Kind {
	case KindGenerate:
		g, err := decodeGenerate(op)
		if err != nil {
			return nil, err
		}
		var r generateResult
		if err := decodeRecord(op, "result", op.Result, &r); err != nil {
			return nil, err
		}
		j.Generate = g
		for _, gr := range r.Generated {
			gm, err := gr.generated(op.App)
			if err != nil {
				return nil, fmt.Errorf("decoding operation %s: %w", op.ID, err)
			}
			j.Generated = append(j.Generated, gm)
		}
		j.ModelCalls, j.EventsProcessed, j.FactsExtracted = r.ModelCalls, r.EventsProcessed, r.FactsExtracted
		j.ExtractionTime, j.Consolidation = time.Duration(r.ExtractionNS), time.Duration(r.ConsolidationNS)
	case KindPurge:
		var p purgeRecord
		if err := decodeRecord(op, "request", op.Request, &p); err != nil {
			return nil, err
		}
		var r purgeResult
		if err := decodeRecord(op, "result", op.Result, &r); err != nil {
			return nil, err
		}
		j.Purge = &PurgeRequest{App: op.App, Scope: p.Scope, Filter: p.Filter, Force: p.Force}
		j.PurgeCount = r.PurgeCount
	default:
		return nil, nil
	}
	return j, nil
}

// Concerns reports whether an operation is about a user of its app: its
// key's scope names the user (Scope.User), or, for a generation, its
// source is one of the user's sessions. Its request and result then hold
// what came from the user.
func Concerns(op *jobs.Operation, user string) bool {
	if user == "" {
		return false
	}
	if memorytype.ParseScopeKey(op.Key).User() == user {
		return true
	}
	if op.Kind != KindGenerate {
		return false
	}
	g, err := decodeGenerate(op)
	if err != nil {
		return false
	}
	return g.Scope.User() == user || g.Session != nil && g.Session.User == user || g.FactsSession != nil && g.FactsSession.User == user
}

// The memory bank's requests and results in an operation's record: tagged
// records, so that renaming a Go field cannot change what stored
// operations mean. Their shapes are those the first formats of the
// operation record held under "generate", "purge" and beside them
// (memorybank/record reads those formats into these).

type generateRecord struct {
	Scope                memorytype.Scope     `json:"scope"`
	Session              string               `json:"session,omitempty"`
	FromNS               int64                `json:"from_ns,omitempty"`
	ToNS                 int64                `json:"to_ns,omitempty"`
	Events               []*sessiontype.Event `json:"events,omitempty"` // sessiontype.Event's own stored form
	Facts                []factRecord         `json:"facts,omitempty"`
	FactsSession         string               `json:"facts_session,omitempty"`
	FactsEventIDs        []string             `json:"facts_event_ids,omitempty"`
	DisableConsolidation bool                 `json:"disable_consolidation,omitempty"`
	AllowedTopics        []string             `json:"allowed_topics,omitempty"`
	Metadata             metadata.Map         `json:"metadata,omitempty"`
	// MergeStrategy is the strategy's name (metadata.MergeStrategy.String).
	MergeStrategy string `json:"metadata_merge_strategy,omitempty"`
}

type factRecord struct {
	Fact   string   `json:"fact"`
	Topics []string `json:"topics,omitempty"`
}

type purgeRecord struct {
	Scope  memorytype.Scope `json:"scope,omitempty"`
	Filter string           `json:"filter,omitempty"`
	Force  bool             `json:"force,omitempty"`
}

// generateResult is a generation's result: its memories and figures.
type generateResult struct {
	Generated       []generatedRecord `json:"generated,omitempty"`
	ModelCalls      int               `json:"model_calls,omitempty"`
	EventsProcessed int               `json:"events_processed,omitempty"`
	FactsExtracted  int               `json:"facts_extracted,omitempty"`
	ExtractionNS    int64             `json:"extraction_ns,omitempty"`
	ConsolidationNS int64             `json:"consolidation_ns,omitempty"`
}

type purgeResult struct {
	PurgeCount int64 `json:"purge_count,omitempty"`
}

type generatedRecord struct {
	Action string       `json:"action"`
	Memory memoryRecord `json:"memory"`
}

// memoryRecord is a memory in a generation's result (without its vector).
type memoryRecord struct {
	ID             string              `json:"id"`
	Fact           string              `json:"fact"`
	Scope          memorytype.Scope    `json:"scope"`
	DisplayName    string              `json:"display_name,omitempty"`
	Description    string              `json:"description,omitempty"`
	Topics         []string            `json:"topics,omitempty"`
	Metadata       metadata.Map        `json:"metadata,omitempty"`
	Sources        []memorytype.Source `json:"sources,omitempty"`
	CreateNS       int64               `json:"create_ns"`
	UpdateNS       int64               `json:"update_ns"`
	ExpireNS       int64               `json:"expire_ns,omitempty"`
	Revision       int64               `json:"revision"`
	Deleted        bool                `json:"deleted,omitempty"`
	EmbeddingModel string              `json:"embedding_model,omitempty"`
	EventNS        int64               `json:"event_ns,omitempty"`
	StatedNS       int64               `json:"stated_ns,omitempty"`
	Profile        *profile.Field      `json:"profile,omitempty"`
}

func sessionName(k *sessiontype.Key) string {
	if k == nil {
		return ""
	}
	return k.Name()
}

func parseSessionName(field, name string) (*sessiontype.Key, error) {
	if name == "" {
		return nil, nil
	}
	app, user, id, err := resource.ParseSession(field, name)
	if err != nil {
		return nil, err
	}
	return &sessiontype.Key{App: app, User: user, ID: id}, nil
}

// encode returns the JSON of a record.
func encode(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // records hold nothing json cannot encode
	}
	return b
}

// decodeRecord decodes a request or result of op (none: v stays zero),
// refusing fields it does not know.
func decodeRecord(op *jobs.Operation, what string, b []byte, v any) error {
	if len(b) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("decoding the %s of operation %s: %w", what, op.Name(), err)
	}
	return nil
}

func encodeGenerate(g *GenerateRequest) []byte {
	r := generateRecord{
		Scope: g.Scope, Session: sessionName(g.Session), FromNS: unixnano.From(g.From), ToNS: unixnano.From(g.To),
		Events: g.Events, FactsSession: sessionName(g.FactsSession), FactsEventIDs: g.FactsEventIDs,
		DisableConsolidation: g.DisableConsolidation, AllowedTopics: g.AllowedTopics,
		Metadata: g.Metadata, MergeStrategy: g.MergeStrategy.String(),
	}
	for _, f := range g.Facts {
		r.Facts = append(r.Facts, factRecord(f))
	}
	return encode(r)
}

func decodeGenerate(op *jobs.Operation) (*GenerateRequest, error) {
	var r generateRecord
	if err := decodeRecord(op, "request", op.Request, &r); err != nil {
		return nil, err
	}
	g := &GenerateRequest{
		App: op.App, Scope: r.Scope, From: unixnano.Time(r.FromNS), To: unixnano.Time(r.ToNS), Events: r.Events,
		FactsEventIDs: r.FactsEventIDs, DisableConsolidation: r.DisableConsolidation, AllowedTopics: r.AllowedTopics,
		Metadata: r.Metadata,
	}
	var err error
	if g.MergeStrategy, err = metadata.ParseMergeStrategy("generate.metadata_merge_strategy", r.MergeStrategy); err != nil {
		return nil, err
	}
	if g.Session, err = parseSessionName("generate.session", r.Session); err != nil {
		return nil, err
	}
	if g.FactsSession, err = parseSessionName("generate.facts_session", r.FactsSession); err != nil {
		return nil, err
	}
	for _, f := range r.Facts {
		g.Facts = append(g.Facts, DirectFact(f))
	}
	return g, nil
}

// generatedRecordOf returns the stored form of a generated memory.
func generatedRecordOf(gm GeneratedMemory) generatedRecord {
	m := gm.Memory
	return generatedRecord{Action: gm.Action.String(), Memory: memoryRecord{
		ID: m.ID, Fact: m.Fact, Scope: m.Scope, DisplayName: m.DisplayName, Description: m.Description,
		Topics: m.Topics, Metadata: m.Metadata, Sources: m.Sources, CreateNS: unixnano.From(m.CreateTime), UpdateNS: unixnano.From(m.UpdateTime), ExpireNS: unixnano.From(m.ExpireTime),
		Revision: m.Revision, Deleted: m.Deleted, EmbeddingModel: m.EmbeddingModel,
		EventNS: unixnano.From(m.EventTime), StatedNS: unixnano.From(m.StatedTime), Profile: m.Profile,
	}}
}

// generated returns the memory a record holds, of app.
func (g generatedRecord) generated(app string) (GeneratedMemory, error) {
	action := memorytype.ActionUnspecified
	for _, a := range []memorytype.Action{memorytype.Created, memorytype.Updated, memorytype.Deleted, memorytype.Unchanged} {
		if a.String() == g.Action {
			action = a
		}
	}
	if action == memorytype.ActionUnspecified {
		return GeneratedMemory{}, fmt.Errorf("unknown action %q", g.Action)
	}
	m := g.Memory
	return GeneratedMemory{Action: action, Memory: &memorytype.Memory{
		App: app, ID: m.ID, Fact: m.Fact, Scope: m.Scope, DisplayName: m.DisplayName, Description: m.Description,
		Topics: m.Topics, Metadata: m.Metadata, Sources: m.Sources, CreateTime: unixnano.Time(m.CreateNS), UpdateTime: unixnano.Time(m.UpdateNS), ExpireTime: unixnano.Time(m.ExpireNS),
		Revision: m.Revision, Deleted: m.Deleted, EmbeddingModel: m.EmbeddingModel,
		EventTime: unixnano.Time(m.EventNS), StatedTime: unixnano.Time(m.StatedNS), Profile: m.Profile,
	}}, nil
}

// enqueue queues an operation of the memory bank for the scope key.
func (s *Service) enqueue(ctx context.Context, app, kind, key string, request []byte) (*jobs.Operation, error) {
	if s.jobs == nil {
		return nil, fault.New(fault.FailedPrecondition, "this server runs no operations, which %s needs", kind)
	}
	return s.jobs.Enqueue(ctx, app, kind, key, request)
}
