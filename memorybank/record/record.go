// Package record holds the stored forms of the memory bank's records, the
// same in every store of kioku's (SQLite, Firestore) and in archives
// (package archive): revisions (MarshalRevision), configurations
// (MarshalConfig), memories' sources (MarshalSources), vectors
// (EncodeVector), types and profile fields (MemoryType, MarshalProfile),
// the changes of the change feed (MarshalChange), and the decoding of
// operations in every format kioku has written (DecodeOperation). It is
// public so that the archive's format is stated in public terms, and so
// that a third-party backend can keep its records in the same forms.
//
// Each is a tagged record type of its own, never a domain type, so that
// renaming a Go field or reordering a Go constant cannot change what
// stored rows mean: enums are stored by name, times as Unix nanoseconds,
// durations as nanoseconds, sessions by resource name. Golden files in
// memorybank/testdata hold rows of each format; a change that alters
// them is a change of format, which writes the new one and keeps reading
// the old.
package record

import (
	"encoding/json"
	"fmt"
	"reflect"
	"time"

	"github.com/kioku-ai/kioku/internal/unixnano"
	"github.com/kioku-ai/kioku/memorybank/appconfig"
	"github.com/kioku-ai/kioku/memorybank/memorytype"
	"github.com/kioku-ai/kioku/memorybank/metadata"
	"github.com/kioku-ai/kioku/memorybank/profile"
	"github.com/kioku-ai/kioku/memorybank/retrieval"
	"github.com/kioku-ai/kioku/redact"
	"github.com/kioku-ai/kioku/sessions"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
)

// actionName returns the stored name of an action (Action.String), false
// for one that has none.
func actionName(a memorytype.Action) (string, bool) {
	if a == memorytype.ActionUnspecified || a > memorytype.Unchanged {
		return "", false
	}
	return a.String(), true
}

// parseAction returns the action of a stored name.
func parseAction(name string) (memorytype.Action, error) {
	for a := memorytype.Created; a <= memorytype.Unchanged; a++ {
		if a.String() == name {
			return a, nil
		}
	}
	return memorytype.ActionUnspecified, fmt.Errorf("unknown action %q", name)
}

// MarshalSources returns the stored form of a memory's sources (a JSON
// array of memorytype.Source, [] when none), as the stores keep them
// beside the memory.
func MarshalSources(src []memorytype.Source) ([]byte, error) {
	if src == nil {
		src = []memorytype.Source{}
	}
	return json.Marshal(src)
}

// UnmarshalSources decodes MarshalSources's output ("" and "null" are no
// sources).
func UnmarshalSources(b []byte) ([]memorytype.Source, error) {
	if len(b) == 0 || string(b) == "null" {
		return nil, nil
	}
	var src []memorytype.Source
	if err := json.Unmarshal(b, &src); err != nil {
		return nil, fmt.Errorf("decoding sources: %w", err)
	}
	if len(src) == 0 {
		return nil, nil
	}
	return src, nil
}

// ProfileType is the stored memory type of a profile field's memory
// (memorytype.StructuredProfile); a natural-language memory's is "" (the
// stores' default for memories written before profiles).
var ProfileType = memorytype.StructuredProfile.String()

// MemoryType returns the stored memory type of m: ProfileType or "".
func MemoryType(m *memorytype.Memory) string {
	if m.Profile != nil {
		return ProfileType
	}
	return ""
}

// MarshalProfile returns the stored form of a memory's profile field (its
// JSON, see profile.Field), "" for none.
func MarshalProfile(p *profile.Field) (string, error) {
	if p == nil {
		return "", nil
	}
	b, err := json.Marshal(p)
	return string(b), err
}

// UnmarshalProfile decodes MarshalProfile's output ("": none).
func UnmarshalProfile(s string) (*profile.Field, error) {
	if s == "" {
		return nil, nil
	}
	var p profile.Field
	if err := json.Unmarshal([]byte(s), &p); err != nil {
		return nil, fmt.Errorf("decoding a profile field: %w", err)
	}
	return &p, nil
}

// SameMemory reports whether two memories hold the same values: times as
// instants, empty collections as absent ones. A store's import uses it to
// leave a memory it already holds alone; values it cannot tell the same
// (a field it does not know how to compare) count as different, so that
// the import writes rather than skips.
func SameMemory(a, b *memorytype.Memory) bool {
	norm := func(m *memorytype.Memory) memorytype.Memory {
		c := *m
		v := reflect.ValueOf(&c).Elem()
		for i := range v.NumField() {
			if t, ok := v.Field(i).Interface().(time.Time); ok {
				v.Field(i).Set(reflect.ValueOf(t.UTC()))
			}
		}
		if len(c.Scope) == 0 {
			c.Scope = nil
		}
		if len(c.Topics) == 0 {
			c.Topics = nil
		}
		if len(c.Metadata) == 0 {
			c.Metadata = nil
		}
		if len(c.Sources) == 0 {
			c.Sources = nil
		}
		if len(c.Embedding) == 0 {
			c.Embedding = nil
		}
		return c
	}
	return reflect.DeepEqual(norm(a), norm(b))
}

// revisionRecord is the stored form of a revision, without its app, memory
// and number, which the stores key it by. The first format stored the
// action by number (1 CREATED, 2 UPDATED, 3 DELETED); it is still read.
type revisionRecord struct {
	Action         json.RawMessage     `json:"action"`
	Fact           string              `json:"fact"`
	Scope          memorytype.Scope    `json:"scope"`
	Topics         []string            `json:"topics,omitempty"`
	Metadata       metadata.Map        `json:"metadata,omitempty"`
	ExtractedFacts []string            `json:"extracted_facts,omitempty"`
	Sources        []memorytype.Source `json:"sources,omitempty"`
	Operation      string              `json:"operation,omitempty"`
	Reason         string              `json:"reason,omitempty"`
	CreateNS       int64               `json:"create_ns"`
	ExpireNS       int64               `json:"expire_ns,omitempty"`
	EventNS        int64               `json:"event_ns,omitempty"`
	StatedNS       int64               `json:"stated_ns,omitempty"`
	// Profile is the memory's profile field after the change (the first
	// formats had none: natural-language memories).
	Profile *profile.Field `json:"profile,omitempty"`
}

// MarshalRevision returns a revision's stored form (see UnmarshalRevision).
func MarshalRevision(r *memorytype.Revision) ([]byte, error) {
	name, ok := actionName(r.Action)
	if !ok {
		return nil, fmt.Errorf("revision %d of %s has no action", r.Number, r.MemoryID)
	}
	action, _ := json.Marshal(name)
	return json.Marshal(revisionRecord{
		Action: action, Fact: r.Fact, Scope: r.Scope, Topics: r.Topics, Metadata: r.Metadata,
		ExtractedFacts: r.ExtractedFacts, Sources: r.Sources, Operation: r.Operation, Reason: r.Reason,
		CreateNS: unixnano.From(r.CreateTime), ExpireNS: unixnano.From(r.ExpireTime),
		EventNS: unixnano.From(r.EventTime), StatedNS: unixnano.From(r.StatedTime), Profile: r.Profile,
	})
}

// UnmarshalRevision decodes a stored revision of memoryID.
func UnmarshalRevision(app, memoryID string, number int64, body []byte) (*memorytype.Revision, error) {
	var b revisionRecord
	if err := json.Unmarshal(body, &b); err != nil {
		return nil, fmt.Errorf("decoding revision %d of memory %s: %w", number, memoryID, err)
	}
	var (
		action memorytype.Action
		name   string
		n      int
		err    error
	)
	switch {
	case json.Unmarshal(b.Action, &name) == nil:
		action, err = parseAction(name)
	case json.Unmarshal(b.Action, &n) == nil && n >= 1 && n <= 3:
		action = v1Actions[n]
	default:
		err = fmt.Errorf("unknown action %s", b.Action)
	}
	if err != nil {
		return nil, fmt.Errorf("decoding revision %d of memory %s: %w", number, memoryID, err)
	}
	return &memorytype.Revision{
		App: app, MemoryID: memoryID, Number: number, Action: action, Fact: b.Fact, Scope: b.Scope,
		Topics: b.Topics, Metadata: b.Metadata, ExtractedFacts: b.ExtractedFacts, Sources: b.Sources,
		Operation: b.Operation, Reason: b.Reason, CreateTime: unixnano.Time(b.CreateNS), ExpireTime: unixnano.Time(b.ExpireNS),
		EventTime: unixnano.Time(b.EventNS), StatedTime: unixnano.Time(b.StatedNS), Profile: b.Profile,
	}, nil
}

// configRecord is the stored form of an appconfig.Config, without its
// app.
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
	PII           piiRecord        `json:"pii_redaction,omitzero"`
	Profiles      []profileRecord  `json:"profiles,omitempty"`
	Webhooks      []webhookRecord  `json:"webhooks,omitempty"`
	UpdateTime    time.Time        `json:"update_time,omitzero"`
}

// webhookRecord is the stored form of an appconfig.Webhook (its secret
// sealed with the rest of the configuration when the store seals).
type webhookRecord struct {
	URL      string   `json:"url"`
	Secret   string   `json:"secret"`
	Events   []string `json:"events"`
	OmitFact bool     `json:"omit_fact,omitempty"`
	CreateNS int64    `json:"create_ns"`
}

// piiRecord is the stored form of appconfig.Redaction (absent: off, no rules),
// categories by name.
type piiRecord struct {
	Enabled    bool            `json:"enabled,omitempty"`
	Categories []string        `json:"categories,omitempty"`
	Patterns   []patternRecord `json:"custom_patterns,omitempty"`
}

type patternRecord struct {
	Name  string `json:"name"`
	Regex string `json:"regex"`
}

// profileRecord is the stored form of a profile.Schema: its
// fields as a list, in their order.
type profileRecord struct {
	ID          string               `json:"id"`
	Description string               `json:"description,omitempty"`
	Fields      []profileFieldRecord `json:"fields"`
	ScopeKeys   []string             `json:"scope_keys,omitempty"`
}

type profileFieldRecord struct {
	Name        string   `json:"name"`
	Type        string   `json:"type"`
	Description string   `json:"description,omitempty"`
	Enum        []string `json:"enum,omitempty"`
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
	Events        []*sessiontype.Event `json:"events"`
	ExpectedFacts []string             `json:"expected_facts"`
}

type triggerRecord struct {
	EventCount   int   `json:"event_count,omitempty"`
	IdleDuration int64 `json:"idle_duration,omitempty"`
}

// MarshalConfig returns a configuration's stored form.
func MarshalConfig(c *appconfig.Config) ([]byte, error) {
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
	r.PII.Enabled = c.PIIRedaction.Enabled
	for _, cat := range c.PIIRedaction.Categories {
		r.PII.Categories = append(r.PII.Categories, string(cat))
	}
	for _, p := range c.PIIRedaction.Patterns {
		r.PII.Patterns = append(r.PII.Patterns, patternRecord(p))
	}
	for _, p := range c.Profiles {
		pr := profileRecord{ID: p.ID, Description: p.Description, ScopeKeys: p.ScopeKeys, Fields: []profileFieldRecord{}}
		for _, f := range p.Fields {
			pr.Fields = append(pr.Fields, profileFieldRecord(f))
		}
		r.Profiles = append(r.Profiles, pr)
	}
	for _, w := range c.Webhooks {
		r.Webhooks = append(r.Webhooks, webhookRecord{URL: w.URL, Secret: w.Secret, Events: w.Events, OmitFact: w.OmitFact, CreateNS: unixnano.From(w.CreateTime)})
	}
	return json.Marshal(r)
}

// UnmarshalConfig decodes the stored configuration of app.
func UnmarshalConfig(app string, body []byte) (*appconfig.Config, error) {
	var r configRecord
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("decoding the memory bank config of %s: %w", app, err)
	}
	c := &appconfig.Config{
		App: app, ManagedTopics: r.ManagedTopics, MemoryTTL: time.Duration(r.MemoryTTL), RevisionTTL: time.Duration(r.RevisionTTL),
		Trigger:    appconfig.Trigger{EventCount: r.Trigger.EventCount, IdleDuration: time.Duration(r.Trigger.IdleDuration)},
		Compaction: sessions.CompactionTrigger(r.Compaction),
		Retrieval: appconfig.Retrieval{Fusion: retrieval.Fusion{
			Method: retrieval.FusionMethod(r.Retrieval.Fusion.Method), DenseWeight: r.Retrieval.Fusion.DenseWeight,
			LexicalWeight: r.Retrieval.Fusion.LexicalWeight, RRFK: r.Retrieval.Fusion.RRFK,
		}},
		UpdateTime: r.UpdateTime,
	}
	for _, t := range r.CustomTopics {
		c.CustomTopics = append(c.CustomTopics, appconfig.CustomTopic(t))
	}
	for _, e := range r.Examples {
		c.Examples = append(c.Examples, appconfig.Example{Events: e.Events, ExpectedFacts: e.ExpectedFacts})
	}
	c.PIIRedaction.Enabled = r.PII.Enabled
	for _, cat := range r.PII.Categories {
		c.PIIRedaction.Categories = append(c.PIIRedaction.Categories, redact.Category(cat))
	}
	for _, p := range r.PII.Patterns {
		c.PIIRedaction.Patterns = append(c.PIIRedaction.Patterns, redact.Pattern(p))
	}
	for _, pr := range r.Profiles {
		p := profile.Schema{ID: pr.ID, Description: pr.Description, ScopeKeys: pr.ScopeKeys}
		for _, f := range pr.Fields {
			p.Fields = append(p.Fields, profile.FieldSchema(f))
		}
		c.Profiles = append(c.Profiles, p)
	}
	for _, w := range r.Webhooks {
		c.Webhooks = append(c.Webhooks, appconfig.Webhook{URL: w.URL, Secret: w.Secret, Events: w.Events, OmitFact: w.OmitFact, CreateTime: unixnano.Time(w.CreateNS)})
	}
	return c, nil
}
