// Package sessiontype holds the session data model that package sessions
// (the caller's API) and package sessions/sessiondriver (the contract a
// store implements) share: a session's key and metadata, its events and
// their content, and the rules of prefix-scoped state. It has no
// behaviour beyond what the values themselves mean, so that callers and
// backends agree on them without importing each other.
package sessiontype

import (
	"bytes"
	"time"

	"github.com/kioku-ai/kioku/resource"
)

// Key identifies a session. Session ids are unique within an app; the user
// is part of the key so that a session is only reachable under its owner.
type Key struct {
	App  string
	User string
	ID   string
}

// Name returns the session's resource name,
// "apps/{app}/users/{user}/sessions/{id}".
func (k Key) Name() string {
	return resource.SessionName(k.App, k.User, k.ID)
}

// Session is a conversation's metadata and state.
type Session struct {
	Key
	DisplayName string
	Labels      map[string]string
	// State is the session's own state on write and in listings, and the
	// merged view (session, "user:" and "app:" keys) on GetSession.
	State      map[string]any
	CreateTime time.Time
	UpdateTime time.Time
	// ExpireTime is when the session expires; zero means never.
	ExpireTime time.Time
	// LastSequence is the sequence of the last stored event, 0 when none.
	LastSequence int64
	// InitialState is the session-scope state the session was created with
	// (for a fork, its source's). Stores fill it in GetSession only; forks
	// replay events on top of it.
	InitialState map[string]any
	// CompactionSequence is the sequence of the session's latest compaction
	// event (the one that covers the most), 0 when none; CompactedThrough
	// is the last sequence it covers.
	CompactionSequence int64
	CompactedThrough   int64
}

// Expired reports whether the session has expired at now.
func (s *Session) Expired(now time.Time) bool {
	return !s.ExpireTime.IsZero() && !now.Before(s.ExpireTime)
}

// Event is one entry of a session's log. Its JSON encoding (the field tags
// below) is the form the stores keep, so tags must not change.
type Event struct {
	ID                 string         `json:"id,omitempty"`
	InvocationID       string         `json:"invocation_id,omitempty"`
	Author             string         `json:"author,omitempty"`
	Content            *Content       `json:"content,omitempty"`
	Actions            Actions        `json:"actions"`
	Timestamp          time.Time      `json:"timestamp"`
	Partial            bool           `json:"partial,omitempty"`
	TurnComplete       bool           `json:"turn_complete,omitempty"`
	ErrorCode          string         `json:"error_code,omitempty"`
	ErrorMessage       string         `json:"error_message,omitempty"`
	CustomMetadata     map[string]any `json:"custom_metadata,omitempty"`
	Sequence           int64          `json:"sequence,omitempty"`
	Branch             string         `json:"branch,omitempty"`
	Interrupted        bool           `json:"interrupted,omitempty"`
	LongRunningToolIDs []string       `json:"long_running_tool_ids,omitempty"`
	UsageMetadata      map[string]any `json:"usage_metadata,omitempty"`
	GroundingMetadata  map[string]any `json:"grounding_metadata,omitempty"`
	CitationMetadata   map[string]any `json:"citation_metadata,omitempty"`
	FinishReason       string         `json:"finish_reason,omitempty"`
	ModelVersion       string         `json:"model_version,omitempty"`
	Extensions         map[string]any `json:"extensions,omitempty"`

	// KeepZeroTimestamp, on input to AppendEvent, keeps a zero Timestamp
	// as the caller's (0001-01-01T00:00:00Z) instead of taking the server's
	// time. A wire that always carries a timestamp sets it (the Vertex AI
	// API, where ADK sends that time for an event without one). Not
	// stored: the stored event's Timestamp is then zero.
	KeepZeroTimestamp bool `json:"-"`

	// Size is the size of the event's stored encoding, set when it is
	// read from a store or appended (not part of its content).
	Size int `json:"-"`
}

// Actions are the side effects of an event.
type Actions struct {
	// StateDelta holds the state changes; see the package documentation for
	// the scopes. A nil value deletes the key.
	StateDelta        map[string]any   `json:"state_delta,omitempty"`
	ArtifactDelta     map[string]int64 `json:"artifact_delta,omitempty"`
	TransferToAgent   string           `json:"transfer_to_agent,omitempty"`
	Escalate          bool             `json:"escalate,omitempty"`
	SkipSummarization bool             `json:"skip_summarization,omitempty"`
	// Compaction, set on a compaction event, is the range of events its
	// content summarises.
	Compaction *Compaction `json:"compaction,omitempty"`
}

// Compaction describes a compaction event: its content is the summary of
// the session's events from StartSequence to EndSequence (of the previous
// compaction's summary and the events after it, for a recursive one). The
// events stay; the summary stands for them where a caller asks for the
// compacted view.
type Compaction struct {
	StartSequence int64     `json:"start_sequence"`
	EndSequence   int64     `json:"end_sequence"`
	StartTime     time.Time `json:"start_time,omitzero"`
	EndTime       time.Time `json:"end_time,omitzero"`
	// Model and PromptVersion say how the summary was written.
	Model         string `json:"model,omitempty"`
	PromptVersion string `json:"prompt_version,omitempty"`
}

// Content is a message: a role and its parts (genai's Content).
type Content struct {
	Role  string `json:"role,omitempty"`
	Parts []Part `json:"parts,omitempty"`
}

// Text returns the concatenated text of the content's non-thought parts.
func (c *Content) Text() string {
	if c == nil {
		return ""
	}
	var text string
	for _, p := range c.Parts {
		if p.Text != "" && !p.Thought {
			if text != "" {
				text += "\n"
			}
			text += p.Text
		}
	}
	return text
}

// Part is one piece of a message (genai's Part).
type Part struct {
	Text             string            `json:"text,omitempty"`
	InlineData       *Blob             `json:"inline_data,omitempty"`
	FileData         *FileData         `json:"file_data,omitempty"`
	FunctionCall     *FunctionCall     `json:"function_call,omitempty"`
	FunctionResponse *FunctionResponse `json:"function_response,omitempty"`
	Thought          bool              `json:"thought,omitempty"`
	ThoughtSignature []byte            `json:"thought_signature,omitempty"`
	Extensions       map[string]any    `json:"extensions,omitempty"`
}

// Blob is inline bytes with their media type.
type Blob struct {
	MIMEType    string `json:"mime_type,omitempty"`
	Data        []byte `json:"data,omitempty"`
	DisplayName string `json:"display_name,omitempty"`
}

// FileData references a file by URI.
type FileData struct {
	MIMEType    string `json:"mime_type,omitempty"`
	FileURI     string `json:"file_uri,omitempty"`
	DisplayName string `json:"display_name,omitempty"`
}

// FunctionCall is a tool call the model asked for.
type FunctionCall struct {
	ID   string         `json:"id,omitempty"`
	Name string         `json:"name,omitempty"`
	Args map[string]any `json:"args,omitempty"`
}

// GetArgs returns the call's arguments; nil for a nil call.
func (c *FunctionCall) GetArgs() map[string]any {
	if c == nil {
		return nil
	}
	return c.Args
}

// FunctionResponse is the result of a tool call.
type FunctionResponse struct {
	ID       string         `json:"id,omitempty"`
	Name     string         `json:"name,omitempty"`
	Response map[string]any `json:"response,omitempty"`
}

// SameContent reports whether two events carry the same content: everything
// a caller chooses except the id, the sequence and the timestamp. An append
// whose id is already stored is a retry when its content is the same.
func (e *Event) SameContent(o *Event) bool {
	return bytes.Equal(e.contentJSON(), o.contentJSON())
}

func (e *Event) contentJSON() []byte {
	c := *e
	c.ID, c.Sequence, c.Timestamp = "", 0, time.Time{}
	b, err := c.Marshal()
	if err != nil {
		// Events are validated as JSON-encodable before they are stored.
		panic("sessiontype: event not encodable: " + err.Error())
	}
	return b
}

// Marshal returns the stored encoding of the event: what encoding/json
// gives for it (see eventjson.go).
func (e *Event) Marshal() ([]byte, error) {
	w := eventWriter{buf: make([]byte, 0, 512)}
	w.event(e)
	if w.err != nil {
		return nil, w.err
	}
	return w.buf, nil
}

// GetResponse returns the response's content; nil for a nil response.
func (r *FunctionResponse) GetResponse() map[string]any {
	if r == nil {
		return nil
	}
	return r.Response
}

// SearchHit is one event found by a search of a user's events.
type SearchHit struct {
	// Session is the event's session.
	Session Key
	Event   *Event
	// Score is the event's BM25 score for the query (higher is better).
	Score float64
}
