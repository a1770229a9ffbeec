package sessions

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"time"
	"unicode/utf8"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/unixnano"
	"github.com/kioku-ai/kioku/resource"
	"github.com/kioku-ai/kioku/sessions/sessiondriver"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
)

// Limits bound every input. The zero value of a field means its default.
type Limits struct {
	// MaxEventBytes bounds an event's encoded size. Default 512 KiB.
	MaxEventBytes int
	// MaxStateBytes bounds the encoded size of one scope's state (a
	// session's own state, a user's or an app's). Default 256 KiB.
	MaxStateBytes int
	// MaxStateKeyBytes bounds a state key's length. Default 256.
	MaxStateKeyBytes int
	// MaxLabels bounds a session's labels. Default 64.
	MaxLabels int
	// MaxForkEvents bounds how many events a fork may copy. Default 100,000.
	MaxForkEvents int
	// MaxReadBytes bounds the events (their stored size) one read returns:
	// a ListEvents or SearchEvents page ends early at it (with a next page
	// token), and a
	// GetSession whose events exceed it fails FAILED_PRECONDITION, pointing
	// to ListEvents. A read may pass it by its last event. Default 8 MiB,
	// so that a response stays well under the 16 MiB message limit.
	MaxReadBytes int
}

// DefaultLimits are the limits used for zero fields.
var DefaultLimits = Limits{
	MaxEventBytes:    512 << 10,
	MaxStateBytes:    256 << 10,
	MaxStateKeyBytes: 256,
	MaxLabels:        64,
	MaxForkEvents:    100_000,
	MaxReadBytes:     8 << 20,
}

func (l Limits) withDefaults() Limits {
	// max(v, 0) turns a negative setting into zero, which cmp.Or passes over.
	l.MaxEventBytes = cmp.Or(max(l.MaxEventBytes, 0), DefaultLimits.MaxEventBytes)
	l.MaxStateBytes = cmp.Or(max(l.MaxStateBytes, 0), DefaultLimits.MaxStateBytes)
	l.MaxStateKeyBytes = cmp.Or(max(l.MaxStateKeyBytes, 0), DefaultLimits.MaxStateKeyBytes)
	l.MaxLabels = cmp.Or(max(l.MaxLabels, 0), DefaultLimits.MaxLabels)
	l.MaxForkEvents = cmp.Or(max(l.MaxForkEvents, 0), DefaultLimits.MaxForkEvents)
	l.MaxReadBytes = cmp.Or(max(l.MaxReadBytes, 0), DefaultLimits.MaxReadBytes)
	return l
}

// Fixed limits, part of the API contract.
const (
	MaxDisplayNameBytes = 512
	MaxLabelKeyBytes    = 63
	MaxLabelValueBytes  = 256
	maxValueDepth       = 32
)

// ValidateKey checks a session key's three ids.
func ValidateKey(k sessiontype.Key) error {
	if err := resource.ValidateID("app id", k.App, resource.AppIDChars); err != nil {
		return err
	}
	if err := resource.ValidateID("user id", k.User, resource.UserIDChars); err != nil {
		return err
	}
	return resource.ValidateID("session id", k.ID, resource.SessionIDChars)
}

func validateRef(r sessiontype.StateRef) error {
	if err := resource.ValidateID("app id", r.App, resource.AppIDChars); err != nil {
		return err
	}
	if r.User != "" {
		return resource.ValidateID("user id", r.User, resource.UserIDChars)
	}
	return nil
}

// validateLabels checks a session's labels.
func (l Limits) validateLabels(labels map[string]string) error {
	if len(labels) > l.MaxLabels {
		return fault.New(fault.ResourceExhausted, "session has %d labels; the limit is %d", len(labels), l.MaxLabels)
	}
	for k, v := range labels {
		if err := validateLabelKey(k); err != nil {
			return err
		}
		if len(v) > MaxLabelValueBytes {
			return fault.Invalidf("label %q value is %d bytes; the limit is %d", k, len(v), MaxLabelValueBytes)
		}
		if !utf8.ValidString(v) {
			return fault.Invalidf("label %q value is not valid UTF-8", k)
		}
	}
	return nil
}

func validateLabelKey(k string) error {
	if k == "" || len(k) > MaxLabelKeyBytes {
		return fault.Invalidf("label key %q must be 1 to %d bytes", k, MaxLabelKeyBytes)
	}
	for _, c := range []byte(k) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return fault.Invalidf("label key %q has the character %q; allowed are letters, digits, '-', '_' and '.'", k, c)
		}
	}
	return nil
}

func validateDisplayName(s string) error {
	if len(s) > MaxDisplayNameBytes {
		return fault.Invalidf("display_name is %d bytes; the limit is %d", len(s), MaxDisplayNameBytes)
	}
	if !utf8.ValidString(s) {
		return fault.Invalidf("display_name is not valid UTF-8")
	}
	return nil
}

// validateDelta checks the keys and values of a state delta or initial
// state: keys non-empty, bounded, valid UTF-8; values JSON values (nil,
// bool, float64 or other numbers, string, []any, map[string]any) of bounded
// depth with valid UTF-8 strings and finite numbers.
func (l Limits) validateDelta(field string, delta map[string]any) error {
	for k, v := range delta {
		if k == "" {
			return fault.Invalidf("%s has an empty key", field)
		}
		if len(k) > l.MaxStateKeyBytes {
			return fault.Invalidf("%s key %.40q... is %d bytes; the limit is %d", field, k, len(k), l.MaxStateKeyBytes)
		}
		if !utf8.ValidString(k) {
			return fault.Invalidf("%s key %q is not valid UTF-8", field, k)
		}
		if p := sessiontype.ScopeOf(k); p != sessiontype.ScopeSession && len(k) == len(prefixOf(p)) {
			return fault.Invalidf("%s key %q has a prefix but no name", field, k)
		}
		if b := checkValue(v, 0); b != nil {
			return fault.Invalidf("%s[%q]%s %s", field, k, b.path, b.problem)
		}
	}
	return nil
}

func prefixOf(s sessiontype.Scope) string {
	switch s {
	case sessiontype.ScopeUser:
		return sessiontype.PrefixUser
	case sessiontype.ScopeApp:
		return sessiontype.PrefixApp
	case sessiontype.ScopeTemp:
		return sessiontype.PrefixTemp
	}
	return ""
}

// badValue says where inside a JSON value a problem is (a path such as
// ["k"][2], built only when there is a problem) and what it is.
type badValue struct{ path, problem string }

// checkValue checks that v is a JSON value kioku can store: nil, a bool, a
// finite number, a valid UTF-8 string, or a list or object of such values,
// nested at most maxValueDepth deep.
func checkValue(v any, depth int) *badValue {
	if depth > maxValueDepth {
		return &badValue{problem: fmt.Sprintf("nests deeper than %d levels", maxValueDepth)}
	}
	switch x := v.(type) {
	case nil, bool, int, int32, int64, uint32, uint64, json.Number:
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return &badValue{problem: "is not a finite number"}
		}
	case float32:
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return &badValue{problem: "is not a finite number"}
		}
	case string:
		if !utf8.ValidString(x) {
			return &badValue{problem: "is not valid UTF-8"}
		}
	case []any:
		for i, e := range x {
			if b := checkValue(e, depth+1); b != nil {
				b.path = fmt.Sprintf("[%d]", i) + b.path
				return b
			}
		}
	case map[string]any:
		for k, e := range x {
			if !utf8.ValidString(k) {
				return &badValue{problem: "has a key that is not valid UTF-8"}
			}
			if b := checkValue(e, depth+1); b != nil {
				b.path = fmt.Sprintf("[%q]", k) + b.path
				return b
			}
		}
	default:
		return &badValue{problem: fmt.Sprintf("has the type %T; only JSON values can be stored", v)}
	}
	return nil
}

// validateValue checks a JSON value; field names it in the error.
func validateValue(field string, v any) error {
	if b := checkValue(v, 0); b != nil {
		return fault.Invalidf("%s%s %s", field, b.path, b.problem)
	}
	return nil
}

// validateEvent checks an event before it is prepared for storing.
func (l Limits) validateEvent(e *sessiontype.Event) error {
	if e.ID != "" {
		if err := resource.ValidateID("event.id", e.ID, resource.EventIDChars); err != nil {
			return err
		}
	}
	for _, f := range []struct{ name, v string }{
		{"event.invocation_id", e.InvocationID},
		{"event.author", e.Author},
		{"event.error_code", e.ErrorCode},
		{"event.error_message", e.ErrorMessage},
		{"event.branch", e.Branch},
		{"event.finish_reason", e.FinishReason},
		{"event.model_version", e.ModelVersion},
		{"event.actions.transfer_to_agent", e.Actions.TransferToAgent},
	} {
		if !utf8.ValidString(f.v) {
			return fault.Invalidf("%s is not valid UTF-8", f.name)
		}
	}
	if len(e.InvocationID) > 256 || len(e.Author) > 256 || len(e.Branch) > 1024 {
		return fault.Invalidf("event.invocation_id and event.author must be at most 256 bytes, event.branch 1024")
	}
	if err := l.validateDelta("event.actions.state_delta", e.Actions.StateDelta); err != nil {
		return err
	}
	if c := e.Actions.Compaction; c != nil {
		switch {
		case c.StartSequence < 1 || c.EndSequence < c.StartSequence:
			return fault.Invalidf("event.actions.compaction covers sequences %d to %d; it must cover 1 or more events from sequence 1 on", c.StartSequence, c.EndSequence)
		case !validTime(c.StartTime) || !validTime(c.EndTime):
			return fault.Invalidf("event.actions.compaction times must be within years 1678 to 2261")
		case len(c.Model) > 256 || len(c.PromptVersion) > 256 || !utf8.ValidString(c.Model) || !utf8.ValidString(c.PromptVersion):
			return fault.Invalidf("event.actions.compaction.model and prompt_version must be UTF-8 of at most 256 bytes")
		}
	}
	for _, m := range [...]struct {
		name  string
		value map[string]any
	}{
		{"event.custom_metadata", e.CustomMetadata},
		{"event.usage_metadata", e.UsageMetadata},
		{"event.grounding_metadata", e.GroundingMetadata},
		{"event.citation_metadata", e.CitationMetadata},
		{"event.extensions", e.Extensions},
	} {
		if m.value == nil {
			continue
		}
		if err := validateValue(m.name, m.value); err != nil {
			return err
		}
	}
	if e.Content != nil {
		if !utf8.ValidString(e.Content.Role) {
			return fault.Invalidf("event.content.role is not valid UTF-8")
		}
		for i, p := range e.Content.Parts {
			if !utf8.ValidString(p.Text) {
				return fault.Invalidf("event.content.parts[%d].text is not valid UTF-8", i)
			}
			for _, v := range [...]struct {
				name  string
				value map[string]any
			}{
				{"function_call.args", p.FunctionCall.GetArgs()},
				{"function_response.response", p.FunctionResponse.GetResponse()},
				{"extensions", p.Extensions},
			} {
				if b := checkValue(v.value, 0); b != nil {
					return fault.Invalidf("event.content.parts[%d].%s%s %s", i, v.name, b.path, b.problem)
				}
			}
		}
	}
	if !validTime(e.Timestamp) {
		return fault.Invalidf("event.timestamp %v is out of range (years 1678 to 2261)", e.Timestamp)
	}
	return nil
}

// stateSize returns the size of the stored encoding of a state.
func stateSize(state map[string]any) (int, error) {
	b, err := sessiondriver.EncodeState(state)
	if err != nil {
		return 0, fault.Invalidf("state is not encodable: %v", err)
	}
	return len(b), nil
}

// validTime reports whether t can be stored (as Unix nanoseconds).
func validTime(t time.Time) bool { return unixnano.Storable(t) }

// ValidateImported checks a session (nil: none) and events as an archive
// holds them, as the API checks what a caller gives it, with the default
// limits: the session's name, display name and labels; its own state,
// which holds no "user:", "app:" or "temp:" keys (those are the user's
// and app's states); each event's fields and state delta, its id, and
// its encoded size. It returns the first problem, naming the field.
func ValidateImported(s *sessiontype.Session, events []*sessiontype.Event) error {
	l := DefaultLimits
	if s != nil {
		if err := l.validateImportedSession(s); err != nil {
			return err
		}
	}
	for _, e := range events {
		if e.ID == "" {
			return fault.Invalidf("an event of sequence %d has no event.id", e.Sequence)
		}
		if err := l.validateEvent(e); err != nil {
			return fmt.Errorf("event %q: %w", e.ID, err)
		}
		body, err := e.Marshal()
		if err != nil {
			return fault.Invalidf("event %q is not encodable: %v", e.ID, err)
		}
		if len(body) > l.MaxEventBytes {
			return fault.Invalidf("event %q is %d bytes encoded; the limit is %d bytes (MaxEventBytes)", e.ID, len(body), l.MaxEventBytes)
		}
	}
	return nil
}

// validateImportedSession checks an imported session (ValidateImported).
func (l Limits) validateImportedSession(s *sessiontype.Session) error {
	if err := ValidateKey(s.Key); err != nil {
		return err
	}
	if err := validateDisplayName(s.DisplayName); err != nil {
		return err
	}
	if err := l.validateLabels(s.Labels); err != nil {
		return err
	}
	for _, st := range []struct {
		field string
		state map[string]any
	}{{"session.state", s.State}, {"session.initial_state", s.InitialState}} {
		if err := l.validateDelta(st.field, st.state); err != nil {
			return err
		}
		for k := range st.state {
			if sessiontype.ScopeOf(k) != sessiontype.ScopeSession {
				return fault.Invalidf("%s key %q is of another scope than the session's; a session's own state holds no %q, %q or %q keys", st.field, k, sessiontype.PrefixUser, sessiontype.PrefixApp, sessiontype.PrefixTemp)
			}
		}
	}
	return nil
}
