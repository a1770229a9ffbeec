package memorytype

import (
	"encoding/json"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/aip"
	"github.com/kioku-ai/kioku/internal/enumname"
	"github.com/kioku-ai/kioku/memorybank/metadata"
	"github.com/kioku-ai/kioku/memorybank/profile"
	"github.com/kioku-ai/kioku/resource"
)

// Scope says whom a memory is about, for example {"user_id": "u1"}.
type Scope map[string]string

// ScopeUser is the scope key that names the user a memory is about: a
// user's memories are those whose scope holds it (with any other keys).
const ScopeUser = "user_id"

// User returns the user the scope names (its ScopeUser entry), or "".
func (s Scope) User() string { return s[ScopeUser] }

// Key returns the scope's canonical form, "k1=v1&k2=v2" with sorted keys and
// URL query escaping; two scopes are the same when their keys are.
func (s Scope) Key() string {
	keys := make([]string, 0, len(s))
	for k := range s {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte('&')
		}
		b.WriteString(url.QueryEscape(k))
		b.WriteByte('=')
		b.WriteString(url.QueryEscape(s[k]))
	}
	return b.String()
}

// String returns the scope as a JSON object, for messages.
func (s Scope) String() string {
	b, _ := json.Marshal(map[string]string(s))
	return string(b)
}

// ParseScopeKey is the inverse of Scope.Key.
func ParseScopeKey(key string) Scope {
	s := Scope{}
	for _, kv := range strings.Split(key, "&") {
		if kv == "" {
			continue
		}
		k, v, _ := strings.Cut(kv, "=")
		k, _ = url.QueryUnescape(k)
		v, _ = url.QueryUnescape(v)
		s[k] = v
	}
	return s
}

// Source is one session a memory was derived from. Its JSON form (its
// tags) is part of the stored formats, which store a memory's sources as
// a JSON array of them.
type Source struct {
	// Session is the session's resource name.
	Session  string   `json:"session"`
	EventIDs []string `json:"event_ids,omitempty"`
}

// Memory is one long-term fact.
type Memory struct {
	App   string
	ID    string
	Fact  string
	Scope Scope
	// DisplayName and Description are the caller's, kept as given.
	DisplayName string
	Description string
	Topics      []string
	Metadata    metadata.Map
	CreateTime  time.Time
	UpdateTime  time.Time
	// ExpireTime is when the memory expires; zero means never.
	ExpireTime time.Time
	// EventTime is when the fact happened or holds from, when known (the
	// start of the day, month or year it names); StatedTime when it was
	// said: for a memory generated from events, the latest timestamp of
	// the events it came from; for one created directly (CreateMemory, a
	// direct fact) the caller's, else the time of the request. Zero:
	// unknown.
	EventTime, StatedTime time.Time
	Sources               []Source
	// Revision is the number of the latest revision (1 for a new memory).
	Revision int64
	// Deleted memories are invisible but keep their revisions.
	Deleted bool
	// Embedding is the fact's vector by EmbeddingModel (an Embedder's Name).
	Embedding      []float32
	EmbeddingModel string
	// Profile, when set, makes the memory a field of a structured profile
	// (its Type is StructuredProfile): the field's value, which Fact
	// renders (profile.Field.Fact). Nil: a natural-language memory.
	Profile *profile.Field
}

// Type returns the memory's type: StructuredProfile when it holds a
// profile field, NaturalLanguage otherwise.
func (m *Memory) Type() MemoryType {
	if m.Profile != nil {
		return StructuredProfile
	}
	return NaturalLanguage
}

// Name returns the memory's resource name.
func (m *Memory) Name() string { return resource.MemoryName(m.App, m.ID) }

// Time returns the memory's time for retrieval: its event time, else its
// stated time (zero when neither is known). A similarity search prefers
// the memories whose time lies in a period (see retrieval.QueryPeriod).
func (m *Memory) Time() time.Time {
	if !m.EventTime.IsZero() {
		return m.EventTime
	}
	return m.StatedTime
}

// Expired reports whether the memory has expired at now.
func (m *Memory) Expired(now time.Time) bool {
	return !m.ExpireTime.IsZero() && !now.Before(m.ExpireTime)
}

// Visible reports whether reads return the memory at now.
func (m *Memory) Visible(now time.Time) bool { return !m.Deleted && !m.Expired(now) }

// Action is what a change did to a memory.
type Action int

// The actions.
const (
	ActionUnspecified Action = iota
	Created
	Updated
	Deleted
	// Unchanged is reported in a generation's result for an existing
	// memory that already held a new fact, when nothing about it changed;
	// it is never a revision's action.
	Unchanged
)

// actionNames are the stored names of the actions: part of the stored
// formats, never to change (a new action gets a new name).
var actionNames = map[Action]string{
	Created: "CREATED", Updated: "UPDATED", Deleted: "DELETED", Unchanged: "UNCHANGED",
}

// String returns the action's name, the one stored (CREATED, UPDATED,
// DELETED, UNCHANGED); UNSPECIFIED for the zero action.
func (a Action) String() string { return enumname.String(actionNames, a, "UNSPECIFIED") }

// Revision records one change of a memory.
type Revision struct {
	App      string
	MemoryID string
	// Number is the revision's number: 1, 2, 3... per memory.
	Number   int64
	Action   Action
	Fact     string
	Scope    Scope
	Topics   []string
	Metadata metadata.Map
	// ExtractedFacts are the candidate facts that led to the change.
	ExtractedFacts []string
	Sources        []Source
	// Operation is the resource name of the operation that made the change.
	Operation  string
	Reason     string
	CreateTime time.Time
	ExpireTime time.Time
	// EventTime and StatedTime are the memory's after the change.
	EventTime, StatedTime time.Time
	// Profile is the memory's profile field after the change (nil for a
	// natural-language memory).
	Profile *profile.Field
}

// Name returns the revision's resource name.
func (r *Revision) Name() string {
	return resource.RevisionName(r.App, r.MemoryID, strconv.FormatInt(r.Number, 10))
}

// MemoryType is the type of a memory, as Vertex AI names them.
type MemoryType int

// memoryTypeNames are the types' names, as Vertex AI and kioku.v1 spell
// them.
var memoryTypeNames = map[MemoryType]string{
	NaturalLanguage:   "NATURAL_LANGUAGE_COLLECTION",
	StructuredProfile: "STRUCTURED_PROFILE",
}

// String returns the type's name (NATURAL_LANGUAGE_COLLECTION,
// STRUCTURED_PROFILE).
func (t MemoryType) String() string {
	if n, ok := memoryTypeNames[t]; ok {
		return n
	}
	return "MEMORY_TYPE_UNSPECIFIED"
}

// ParseMemoryType returns the type of a name (String's); field names the
// input in the error.
func ParseMemoryType(field, name string) (MemoryType, error) {
	for t, n := range memoryTypeNames {
		if n == name {
			return t, nil
		}
	}
	return 0, fault.InvalidField(field, "%s %q is not a memory type: give NATURAL_LANGUAGE_COLLECTION or STRUCTURED_PROFILE", field, aip.Truncate(name, 100))
}

// Usage is what an app spent in one day (UTC) against its quotas.
type Usage struct {
	// Generations are the GenerateMemories requests accepted.
	Generations int64
	// Tokens are the generation model's prompt and output tokens, as the
	// provider reported them.
	Tokens int64
}

// The memory types.
const (
	// NaturalLanguage is a fact in words (NATURAL_LANGUAGE_COLLECTION),
	// the type of every memory but profile fields.
	NaturalLanguage MemoryType = iota
	// StructuredProfile is a field of a structured profile
	// (STRUCTURED_PROFILE).
	StructuredProfile
)
