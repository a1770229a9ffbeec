package memorybank

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/aip"
	"github.com/kioku-ai/kioku/internal/unixnano"
	"github.com/kioku-ai/kioku/sessions"
)

// The stored forms of the memory bank's records, the same in every store:
// operations (MarshalOperation), revisions (Revision.MarshalBody),
// configurations (MarshalConfig) and memories' sources (MarshalSources).
// Each is a tagged record type of its own, never a domain type, so that
// renaming a Go field or reordering a Go constant cannot change what stored
// rows mean: enums are stored by name, times as Unix nanoseconds, durations
// as nanoseconds, sessions by resource name. Golden files in testdata hold
// rows of each format; a change that alters them is a change of format and
// needs a migration.

// The stored names of the enums. They are part of the stored formats and
// must never change; a new value gets a new name.
var (
	opStateNames = map[OpState]string{
		OpPending: "PENDING", OpRunning: "RUNNING", OpSucceeded: "SUCCEEDED", OpFailed: "FAILED", OpCancelled: "CANCELLED",
	}
	actionNames = map[Action]string{
		Created: "CREATED", Updated: "UPDATED", Deleted: "DELETED", Unchanged: "UNCHANGED",
	}
	kindNames = map[fault.Kind]string{
		fault.Internal: "INTERNAL", fault.Invalid: "INVALID_ARGUMENT", fault.NotFound: "NOT_FOUND",
		fault.AlreadyExists: "ALREADY_EXISTS", fault.FailedPrecondition: "FAILED_PRECONDITION",
		fault.ResourceExhausted: "RESOURCE_EXHAUSTED", fault.PermissionDenied: "PERMISSION_DENIED",
		fault.Unavailable: "UNAVAILABLE", fault.Canceled: "CANCELLED", fault.DeadlineExceeded: "DEADLINE_EXCEEDED",
		fault.Aborted: "ABORTED", fault.Unimplemented: "UNIMPLEMENTED",
	}
)

func parseName[K comparable](what, name string, names map[K]string) (K, error) {
	for k, n := range names {
		if n == name {
			return k, nil
		}
	}
	var zero K
	return zero, fmt.Errorf("unknown %s %q", what, name)
}

// ParseOpState returns the state of a stored name (OpState.String).
func ParseOpState(name string) (OpState, error) {
	return parseName("operation state", name, opStateNames)
}

// operationFormat is the version of operationRecord. The first format
// (no "format" key) was Go's default JSON of Operation.
const operationFormat = 2

// operationRecord is the stored form of an Operation, without its app and
// id (the stores key it by them).
type operationRecord struct {
	Format          int               `json:"format"`
	Method          string            `json:"method"`
	State           string            `json:"state"`
	ScopeKey        string            `json:"scope_key,omitempty"`
	Generate        *generateRecord   `json:"generate,omitempty"`
	Purge           *purgeRecord      `json:"purge,omitempty"`
	Compact         *compactRecord    `json:"compact,omitempty"`
	Generated       []generatedRecord `json:"generated,omitempty"`
	Compacted       *compactedRecord  `json:"compacted,omitempty"`
	PurgeCount      int64             `json:"purge_count,omitempty"`
	ErrorKind       string            `json:"error_kind,omitempty"`
	ErrorMessage    string            `json:"error_message,omitempty"`
	CreateNS        int64             `json:"create_ns"`
	StartNS         int64             `json:"start_ns,omitempty"`
	EndNS           int64             `json:"end_ns,omitempty"`
	NotBeforeNS     int64             `json:"not_before_ns,omitempty"`
	Attempt         int               `json:"attempt,omitempty"`
	LeaseOwner      string            `json:"lease_owner,omitempty"`
	LeaseExpiryNS   int64             `json:"lease_expiry_ns,omitempty"`
	Progress        string            `json:"progress,omitempty"`
	ModelCalls      int               `json:"model_calls,omitempty"`
	EventsProcessed int               `json:"events_processed,omitempty"`
	FactsExtracted  int               `json:"facts_extracted,omitempty"`
	ExtractionNS    int64             `json:"extraction_ns,omitempty"`
	ConsolidationNS int64             `json:"consolidation_ns,omitempty"`
	CoalescedWith   []string          `json:"coalesced_with,omitempty"`
}

type generateRecord struct {
	Scope                Scope             `json:"scope"`
	Session              string            `json:"session,omitempty"`
	FromNS               int64             `json:"from_ns,omitempty"`
	ToNS                 int64             `json:"to_ns,omitempty"`
	Events               []*sessions.Event `json:"events,omitempty"` // sessions.Event's own stored form
	Facts                []factRecord      `json:"facts,omitempty"`
	FactsSession         string            `json:"facts_session,omitempty"`
	FactsEventIDs        []string          `json:"facts_event_ids,omitempty"`
	DisableConsolidation bool              `json:"disable_consolidation,omitempty"`
	AllowedTopics        []string          `json:"allowed_topics,omitempty"`
}

type factRecord struct {
	Fact   string   `json:"fact"`
	Topics []string `json:"topics,omitempty"`
}

type purgeRecord struct {
	Scope  Scope  `json:"scope,omitempty"`
	Filter string `json:"filter,omitempty"`
	Force  bool   `json:"force,omitempty"`
}

type compactRecord struct {
	Session    string `json:"session"`
	UpTo       int64  `json:"up_to,omitempty"`
	KeepRecent int    `json:"keep_recent,omitempty"`
}

type compactedRecord struct {
	Event   *sessions.Event `json:"event,omitempty"` // sessions.Event's own stored form
	Created bool            `json:"created,omitempty"`
}

type generatedRecord struct {
	Action string       `json:"action"`
	Memory memoryRecord `json:"memory"`
}

// memoryRecord is a memory in an operation's result (without its vector).
type memoryRecord struct {
	ID             string            `json:"id"`
	Fact           string            `json:"fact"`
	Scope          Scope             `json:"scope"`
	Topics         []string          `json:"topics,omitempty"`
	Metadata       map[string]string `json:"metadata,omitempty"`
	Sources        []sourceRecord    `json:"sources,omitempty"`
	CreateNS       int64             `json:"create_ns"`
	UpdateNS       int64             `json:"update_ns"`
	ExpireNS       int64             `json:"expire_ns,omitempty"`
	Revision       int64             `json:"revision"`
	Deleted        bool              `json:"deleted,omitempty"`
	EmbeddingModel string            `json:"embedding_model,omitempty"`
	EventNS        int64             `json:"event_ns,omitempty"`
	StatedNS       int64             `json:"stated_ns,omitempty"`
}

type sourceRecord struct {
	Session  string   `json:"session"`
	EventIDs []string `json:"event_ids,omitempty"`
}

func sourceRecords(src []Source) []sourceRecord {
	var out []sourceRecord
	for _, s := range src {
		out = append(out, sourceRecord{Session: s.Session, EventIDs: s.EventIDs})
	}
	return out
}

func sourcesOfRecords(recs []sourceRecord) []Source {
	var out []Source
	for _, r := range recs {
		out = append(out, Source{Session: r.Session, EventIDs: r.EventIDs})
	}
	return out
}

// MarshalSources returns the stored form of a memory's sources (a JSON
// array, [] when none), as the stores keep them beside the memory.
func MarshalSources(src []Source) ([]byte, error) {
	recs := sourceRecords(src)
	if recs == nil {
		recs = []sourceRecord{}
	}
	return json.Marshal(recs)
}

// UnmarshalSources decodes MarshalSources's output ("" and "null" are no
// sources).
func UnmarshalSources(b []byte) ([]Source, error) {
	if len(b) == 0 || string(b) == "null" {
		return nil, nil
	}
	var recs []sourceRecord
	if err := json.Unmarshal(b, &recs); err != nil {
		return nil, fmt.Errorf("decoding sources: %w", err)
	}
	return sourcesOfRecords(recs), nil
}

func sessionName(k *sessions.Key) string {
	if k == nil {
		return ""
	}
	return k.Name()
}

func parseSessionName(field, name string) (*sessions.Key, error) {
	if name == "" {
		return nil, nil
	}
	app, user, id, err := aip.ParseSession(field, name)
	if err != nil {
		return nil, err
	}
	return &sessions.Key{App: app, User: user, ID: id}, nil
}

// MarshalOperation returns an operation's stored form (see
// UnmarshalOperation).
func MarshalOperation(op *Operation) ([]byte, error) {
	state, ok := opStateNames[op.State]
	if !ok {
		return nil, fmt.Errorf("operation %s has no state", op.Name())
	}
	r := operationRecord{
		Format: operationFormat, Method: op.Method, State: state, ScopeKey: op.ScopeKey,
		PurgeCount: op.PurgeCount, ErrorMessage: op.ErrorMessage,
		CreateNS: unixnano.From(op.CreateTime), StartNS: unixnano.From(op.StartTime), EndNS: unixnano.From(op.EndTime),
		NotBeforeNS: unixnano.From(op.NotBefore), Attempt: op.Attempt,
		LeaseOwner: op.LeaseOwner, LeaseExpiryNS: unixnano.From(op.LeaseExpiry),
		Progress: op.Progress, ModelCalls: op.ModelCalls, EventsProcessed: op.EventsProcessed, FactsExtracted: op.FactsExtracted,
		ExtractionNS: int64(op.ExtractionTime), ConsolidationNS: int64(op.Consolidation), CoalescedWith: op.CoalescedWith,
	}
	if op.ErrorMessage != "" || op.State == OpFailed || op.State == OpCancelled {
		r.ErrorKind = kindNames[op.ErrorKind]
	}
	if g := op.Generate; g != nil {
		gr := &generateRecord{
			Scope: g.Scope, Session: sessionName(g.Session), FromNS: unixnano.From(g.From), ToNS: unixnano.From(g.To),
			Events: g.Events, FactsSession: sessionName(g.FactsSession), FactsEventIDs: g.FactsEventIDs,
			DisableConsolidation: g.DisableConsolidation, AllowedTopics: g.AllowedTopics,
		}
		for _, f := range g.Facts {
			gr.Facts = append(gr.Facts, factRecord(f))
		}
		r.Generate = gr
	}
	if p := op.Purge; p != nil {
		r.Purge = &purgeRecord{Scope: p.Scope, Filter: p.Filter, Force: p.Force}
	}
	if c := op.Compact; c != nil {
		r.Compact = &compactRecord{Session: c.Session.Name(), UpTo: c.UpTo, KeepRecent: c.KeepRecent}
	}
	if c := op.Compacted; c != nil {
		r.Compacted = &compactedRecord{Event: c.Event, Created: c.Created}
	}
	for _, gm := range op.Generated {
		action, ok := actionNames[gm.Action]
		if !ok {
			return nil, fmt.Errorf("operation %s: a result without an action", op.Name())
		}
		m := gm.Memory
		r.Generated = append(r.Generated, generatedRecord{Action: action, Memory: memoryRecord{
			ID: m.ID, Fact: m.Fact, Scope: m.Scope, Topics: m.Topics, Metadata: m.Metadata, Sources: sourceRecords(m.Sources),
			CreateNS: unixnano.From(m.CreateTime), UpdateNS: unixnano.From(m.UpdateTime), ExpireNS: unixnano.From(m.ExpireTime),
			Revision: m.Revision, Deleted: m.Deleted, EmbeddingModel: m.EmbeddingModel,
			EventNS: unixnano.From(m.EventTime), StatedNS: unixnano.From(m.StatedTime),
		}})
	}
	return json.Marshal(r)
}

// UnmarshalOperation decodes the stored form of operation id of app, in
// this format or the first one (which SQLite's migration rewrites, and the
// Firestore store's Migrate).
func UnmarshalOperation(app, id string, body []byte) (*Operation, error) {
	var probe struct {
		Format int `json:"format"`
	}
	if err := json.Unmarshal(body, &probe); err != nil {
		return nil, fmt.Errorf("decoding operation %s: %w", id, err)
	}
	var (
		op  *Operation
		err error
	)
	switch probe.Format {
	case 0:
		op, err = unmarshalOperationV1(body)
	case operationFormat:
		op, err = unmarshalOperationV2(body)
	default:
		err = fmt.Errorf("format %d is newer than this kioku understands; upgrade kioku", probe.Format)
	}
	if err != nil {
		return nil, fmt.Errorf("decoding operation %s: %w", id, err)
	}
	op.App, op.ID = app, id
	for _, gm := range op.Generated {
		gm.Memory.App = app
	}
	return op, nil
}

func unmarshalOperationV2(body []byte) (*Operation, error) {
	var r operationRecord
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return nil, err
	}
	return fromRecord(r)
}

// fromRecord returns the operation a record stores.
func fromRecord(r operationRecord) (*Operation, error) {
	state, err := ParseOpState(r.State)
	if err != nil {
		return nil, err
	}
	op := &Operation{
		Method: r.Method, State: state, ScopeKey: r.ScopeKey, PurgeCount: r.PurgeCount, ErrorMessage: r.ErrorMessage,
		CreateTime: unixnano.Time(r.CreateNS), StartTime: unixnano.Time(r.StartNS), EndTime: unixnano.Time(r.EndNS),
		NotBefore: unixnano.Time(r.NotBeforeNS), Attempt: r.Attempt, LeaseOwner: r.LeaseOwner, LeaseExpiry: unixnano.Time(r.LeaseExpiryNS),
		Progress: r.Progress, ModelCalls: r.ModelCalls, EventsProcessed: r.EventsProcessed, FactsExtracted: r.FactsExtracted,
		ExtractionTime: time.Duration(r.ExtractionNS), Consolidation: time.Duration(r.ConsolidationNS), CoalescedWith: r.CoalescedWith,
	}
	if r.ErrorKind != "" {
		if op.ErrorKind, err = parseName("error kind", r.ErrorKind, kindNames); err != nil {
			return nil, err
		}
	}
	if g := r.Generate; g != nil {
		req := &GenerateRequest{
			Scope: g.Scope, From: unixnano.Time(g.FromNS), To: unixnano.Time(g.ToNS), Events: g.Events,
			FactsEventIDs: g.FactsEventIDs, DisableConsolidation: g.DisableConsolidation, AllowedTopics: g.AllowedTopics,
		}
		if req.Session, err = parseSessionName("generate.session", g.Session); err != nil {
			return nil, err
		}
		if req.FactsSession, err = parseSessionName("generate.facts_session", g.FactsSession); err != nil {
			return nil, err
		}
		for _, f := range g.Facts {
			req.Facts = append(req.Facts, DirectFact(f))
		}
		op.Generate = req
	}
	if p := r.Purge; p != nil {
		op.Purge = &PurgeRequest{Scope: p.Scope, Filter: p.Filter, Force: p.Force}
	}
	if c := r.Compact; c != nil {
		key, err := parseSessionName("compact.session", c.Session)
		if err != nil || key == nil {
			return nil, fmt.Errorf("compact.session %q: %v", c.Session, err)
		}
		op.Compact = &CompactRequest{Session: *key, UpTo: c.UpTo, KeepRecent: c.KeepRecent}
	}
	if c := r.Compacted; c != nil {
		op.Compacted = &CompactOutcome{Event: c.Event, Created: c.Created}
	}
	for _, g := range r.Generated {
		action, err := parseName("action", g.Action, actionNames)
		if err != nil {
			return nil, err
		}
		m := g.Memory
		op.Generated = append(op.Generated, GeneratedMemory{Action: action, Memory: &Memory{
			ID: m.ID, Fact: m.Fact, Scope: m.Scope, Topics: m.Topics, Metadata: m.Metadata, Sources: sourcesOfRecords(m.Sources),
			CreateTime: unixnano.Time(m.CreateNS), UpdateTime: unixnano.Time(m.UpdateNS), ExpireTime: unixnano.Time(m.ExpireNS),
			Revision: m.Revision, Deleted: m.Deleted, EmbeddingModel: m.EmbeddingModel,
			EventTime: unixnano.Time(m.EventNS), StatedTime: unixnano.Time(m.StatedNS),
		}})
	}
	return op, nil
}

// The first format's enums were Go's constants by number, as they were
// then; these tables freeze them.
var (
	v1States  = map[int]OpState{1: OpPending, 2: OpRunning, 3: OpSucceeded, 4: OpFailed, 5: OpCancelled}
	v1Actions = map[int]Action{0: ActionUnspecified, 1: Created, 2: Updated, 3: Deleted, 4: Unchanged}
	v1Kinds   = map[int]fault.Kind{
		0: fault.Internal, 1: fault.Invalid, 2: fault.NotFound, 3: fault.AlreadyExists, 4: fault.FailedPrecondition,
		5: fault.ResourceExhausted, 6: fault.PermissionDenied, 7: fault.Unavailable, 8: fault.Canceled,
		9: fault.DeadlineExceeded, 10: fault.Aborted, 11: fault.Unimplemented,
	}
)

// operationV1 is the first format: Go's default JSON of Operation as it
// was (field names as keys, enums by number, times in RFC 3339).
type operationV1 struct {
	Method   string
	State    int
	ScopeKey string
	Generate *struct {
		Scope                Scope             `json:"scope"`
		Session              *keyV1            `json:"session"`
		From                 time.Time         `json:"from"`
		To                   time.Time         `json:"to"`
		Events               []*sessions.Event `json:"events"`
		Facts                []factRecord      `json:"facts"`
		FactsSession         *keyV1            `json:"facts_session"`
		FactsEventIDs        []string          `json:"facts_event_ids"`
		DisableConsolidation bool              `json:"disable_consolidation"`
		AllowedTopics        []string          `json:"allowed_topics"`
	}
	Purge     *purgeRecord
	Generated []struct {
		Memory struct {
			ID, Fact                           string
			Scope                              Scope
			Topics                             []string
			Metadata                           map[string]string
			CreateTime, UpdateTime, ExpireTime time.Time
			Sources                            []sourceRecord
			Revision                           int64
			Deleted                            bool
			EmbeddingModel                     string
		}
		Action int
	}
	PurgeCount                     int64
	ErrorKind                      int
	ErrorMessage                   string
	CreateTime, StartTime, EndTime time.Time
	NotBefore                      time.Time
	Attempt                        int
	LeaseOwner                     string
	LeaseExpiry                    time.Time
	Progress                       string
	ModelCalls                     int
	EventsProcessed                int
	FactsExtracted                 int
	ExtractionTime                 time.Duration
	Consolidation                  time.Duration
	CoalescedWith                  []string
}

type keyV1 struct{ App, User, ID string }

func (k *keyV1) name() string {
	if k == nil {
		return ""
	}
	return sessions.Key{App: k.App, User: k.User, ID: k.ID}.Name()
}

// unmarshalOperationV1 turns the first format into the current record:
// the migration of one operation.
func unmarshalOperationV1(body []byte) (*Operation, error) {
	var v operationV1
	if err := json.Unmarshal(body, &v); err != nil {
		return nil, err
	}
	state, ok := v1States[v.State]
	if !ok {
		return nil, fmt.Errorf("unknown state %d", v.State)
	}
	kind, ok := v1Kinds[v.ErrorKind]
	if !ok {
		return nil, fmt.Errorf("unknown error kind %d", v.ErrorKind)
	}
	r := operationRecord{
		Format: operationFormat, Method: v.Method, State: opStateNames[state], ScopeKey: v.ScopeKey,
		PurgeCount: v.PurgeCount, ErrorKind: kindNames[kind], ErrorMessage: v.ErrorMessage,
		CreateNS: unixnano.From(v.CreateTime), StartNS: unixnano.From(v.StartTime), EndNS: unixnano.From(v.EndTime),
		NotBeforeNS: unixnano.From(v.NotBefore), Attempt: v.Attempt, LeaseOwner: v.LeaseOwner, LeaseExpiryNS: unixnano.From(v.LeaseExpiry),
		Progress: v.Progress, ModelCalls: v.ModelCalls, EventsProcessed: v.EventsProcessed, FactsExtracted: v.FactsExtracted,
		ExtractionNS: int64(v.ExtractionTime), ConsolidationNS: int64(v.Consolidation), CoalescedWith: v.CoalescedWith,
		Purge: v.Purge,
	}
	if g := v.Generate; g != nil {
		r.Generate = &generateRecord{
			Scope: g.Scope, Session: g.Session.name(), FromNS: unixnano.From(g.From), ToNS: unixnano.From(g.To), Events: g.Events,
			Facts: g.Facts, FactsSession: g.FactsSession.name(), FactsEventIDs: g.FactsEventIDs,
			DisableConsolidation: g.DisableConsolidation, AllowedTopics: g.AllowedTopics,
		}
	}
	for _, g := range v.Generated {
		action, ok := v1Actions[g.Action]
		if !ok || action == ActionUnspecified {
			return nil, fmt.Errorf("unknown action %d", g.Action)
		}
		m := g.Memory
		r.Generated = append(r.Generated, generatedRecord{Action: actionNames[action], Memory: memoryRecord{
			ID: m.ID, Fact: m.Fact, Scope: m.Scope, Topics: m.Topics, Metadata: m.Metadata, Sources: m.Sources,
			CreateNS: unixnano.From(m.CreateTime), UpdateNS: unixnano.From(m.UpdateTime), ExpireNS: unixnano.From(m.ExpireTime),
			Revision: m.Revision, Deleted: m.Deleted, EmbeddingModel: m.EmbeddingModel,
		}})
	}
	return fromRecord(r)
}

// revisionRecord is the stored form of a revision, without its app, memory
// and number, which the stores key it by. The first format stored the
// action by number (1 CREATED, 2 UPDATED, 3 DELETED); it is still read.
type revisionRecord struct {
	Action         json.RawMessage   `json:"action"`
	Fact           string            `json:"fact"`
	Scope          Scope             `json:"scope"`
	Topics         []string          `json:"topics,omitempty"`
	Metadata       map[string]string `json:"metadata,omitempty"`
	ExtractedFacts []string          `json:"extracted_facts,omitempty"`
	Sources        []sourceRecord    `json:"sources,omitempty"`
	Operation      string            `json:"operation,omitempty"`
	Reason         string            `json:"reason,omitempty"`
	CreateNS       int64             `json:"create_ns"`
	ExpireNS       int64             `json:"expire_ns,omitempty"`
	EventNS        int64             `json:"event_ns,omitempty"`
	StatedNS       int64             `json:"stated_ns,omitempty"`
}

// MarshalBody returns the revision's stored form (see UnmarshalRevision).
func (r *Revision) MarshalBody() ([]byte, error) {
	name, ok := actionNames[r.Action]
	if !ok {
		return nil, fmt.Errorf("revision %d of %s has no action", r.Number, r.MemoryID)
	}
	action, _ := json.Marshal(name)
	return json.Marshal(revisionRecord{
		Action: action, Fact: r.Fact, Scope: r.Scope, Topics: r.Topics, Metadata: r.Metadata,
		ExtractedFacts: r.ExtractedFacts, Sources: sourceRecords(r.Sources), Operation: r.Operation, Reason: r.Reason,
		CreateNS: unixnano.From(r.CreateTime), ExpireNS: unixnano.From(r.ExpireTime),
		EventNS: unixnano.From(r.EventTime), StatedNS: unixnano.From(r.StatedTime),
	})
}

// UnmarshalRevision decodes a stored revision of memoryID.
func UnmarshalRevision(app, memoryID string, number int64, body []byte) (*Revision, error) {
	var b revisionRecord
	if err := json.Unmarshal(body, &b); err != nil {
		return nil, fmt.Errorf("decoding revision %d of memory %s: %w", number, memoryID, err)
	}
	var (
		action Action
		name   string
		n      int
		err    error
	)
	switch {
	case json.Unmarshal(b.Action, &name) == nil:
		action, err = parseName("action", name, actionNames)
	case json.Unmarshal(b.Action, &n) == nil && n >= 1 && n <= 3:
		action = v1Actions[n]
	default:
		err = fmt.Errorf("unknown action %s", b.Action)
	}
	if err != nil {
		return nil, fmt.Errorf("decoding revision %d of memory %s: %w", number, memoryID, err)
	}
	return &Revision{
		App: app, MemoryID: memoryID, Number: number, Action: action, Fact: b.Fact, Scope: b.Scope,
		Topics: b.Topics, Metadata: b.Metadata, ExtractedFacts: b.ExtractedFacts, Sources: sourcesOfRecords(b.Sources),
		Operation: b.Operation, Reason: b.Reason, CreateTime: unixnano.Time(b.CreateNS), ExpireTime: unixnano.Time(b.ExpireNS),
		EventTime: unixnano.Time(b.EventNS), StatedTime: unixnano.Time(b.StatedNS),
	}, nil
}

// configRecord is the stored form of a BankConfig, without its app.
// Durations are nanoseconds; the update time is RFC 3339 (as the first
// format had it, which this one reads unchanged).
type configRecord struct {
	ManagedTopics []string         `json:"managed_topics,omitempty"`
	CustomTopics  []topicRecord    `json:"custom_topics,omitempty"`
	Examples      []exampleRecord  `json:"examples,omitempty"`
	MemoryTTL     int64            `json:"memory_ttl,omitempty"`
	RevisionTTL   int64            `json:"revision_ttl,omitempty"`
	Trigger       triggerRecord    `json:"trigger,omitzero"`
	Retrieval     retrievalRecord  `json:"retrieval,omitzero"`
	Compaction    compactionRecord `json:"compaction,omitzero"`
	UpdateTime    time.Time        `json:"update_time,omitzero"`
}

type compactionRecord struct {
	EventCount int   `json:"event_count,omitempty"`
	EventBytes int64 `json:"event_bytes,omitempty"`
	KeepRecent int   `json:"keep_recent,omitempty"`
}

// retrievalRecord is the stored form of Retrieval (absent: the defaults).
type retrievalRecord struct {
	Fusion fusionRecord `json:"fusion,omitzero"`
}

type fusionRecord struct {
	Method        string  `json:"method,omitempty"` // "rrf" or "weighted"
	DenseWeight   float64 `json:"dense_weight,omitempty"`
	LexicalWeight float64 `json:"lexical_weight,omitempty"`
	RRFK          int     `json:"rrf_k,omitempty"`
}

type topicRecord struct {
	Label       string `json:"label"`
	Description string `json:"description"`
}

type exampleRecord struct {
	Events        []*sessions.Event `json:"events"`
	ExpectedFacts []string          `json:"expected_facts"`
}

type triggerRecord struct {
	EventCount   int   `json:"event_count,omitempty"`
	IdleDuration int64 `json:"idle_duration,omitempty"`
}

// MarshalConfig returns a configuration's stored form.
func MarshalConfig(c *BankConfig) ([]byte, error) {
	r := configRecord{
		ManagedTopics: c.ManagedTopics, MemoryTTL: int64(c.MemoryTTL), RevisionTTL: int64(c.RevisionTTL),
		Trigger:    triggerRecord{EventCount: c.Trigger.EventCount, IdleDuration: int64(c.Trigger.IdleDuration)},
		Compaction: compactionRecord(c.Compaction),
		Retrieval: retrievalRecord{Fusion: fusionRecord{
			Method: string(c.Retrieval.Fusion.Method), DenseWeight: c.Retrieval.Fusion.DenseWeight,
			LexicalWeight: c.Retrieval.Fusion.LexicalWeight, RRFK: c.Retrieval.Fusion.RRFK,
		}},
		UpdateTime: c.UpdateTime,
	}
	for _, t := range c.CustomTopics {
		r.CustomTopics = append(r.CustomTopics, topicRecord(t))
	}
	for _, e := range c.Examples {
		r.Examples = append(r.Examples, exampleRecord{Events: e.Events, ExpectedFacts: e.ExpectedFacts})
	}
	return json.Marshal(r)
}

// UnmarshalConfig decodes the stored configuration of app.
func UnmarshalConfig(app string, body []byte) (*BankConfig, error) {
	var r configRecord
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("decoding the memory bank config of %s: %w", app, err)
	}
	c := &BankConfig{
		App: app, ManagedTopics: r.ManagedTopics, MemoryTTL: time.Duration(r.MemoryTTL), RevisionTTL: time.Duration(r.RevisionTTL),
		Trigger:    Trigger{EventCount: r.Trigger.EventCount, IdleDuration: time.Duration(r.Trigger.IdleDuration)},
		Compaction: CompactionTrigger(r.Compaction),
		Retrieval: Retrieval{Fusion: Fusion{
			Method: FusionMethod(r.Retrieval.Fusion.Method), DenseWeight: r.Retrieval.Fusion.DenseWeight,
			LexicalWeight: r.Retrieval.Fusion.LexicalWeight, RRFK: r.Retrieval.Fusion.RRFK,
		}},
		UpdateTime: r.UpdateTime,
	}
	for _, t := range r.CustomTopics {
		c.CustomTopics = append(c.CustomTopics, CustomTopic(t))
	}
	for _, e := range r.Examples {
		c.Examples = append(c.Examples, Example{Events: e.Events, ExpectedFacts: e.ExpectedFacts})
	}
	return c, nil
}
