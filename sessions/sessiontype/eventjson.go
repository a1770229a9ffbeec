package sessiontype

import (
	"encoding/base64"
	"encoding/json"
	"strconv"
	"time"
	"unicode/utf8"
)

// The stored encoding of an event, written without reflection. It is the
// encoding encoding/json gives an Event (the field tags on Event and the
// types it holds are its definition, and a test holds the two equal):
// fields in declaration order, empty ones left out where the tag says
// omitempty or omitzero, map values (state deltas, metadata) encoded by
// encoding/json itself. It exists for speed: every append encodes its
// event, and encoding/json's reflective encoder costs several times as
// much, and, nesting deep, makes the request's goroutine grow its stack.

// eventWriter appends an event's encoding to buf; err is the first error
// (a value encoding/json refuses, a time out of its range).
type eventWriter struct {
	buf []byte
	err error
}

// field starts a field: a comma unless it is the object's first, and the
// quoted name.
func (w *eventWriter) field(first *bool, name string) {
	if !*first {
		w.buf = append(w.buf, ',')
	}
	*first = false
	w.buf = append(w.buf, '"')
	w.buf = append(w.buf, name...)
	w.buf = append(w.buf, '"', ':')
}

func (w *eventWriter) str(first *bool, name, v string) {
	if v != "" {
		w.field(first, name)
		w.buf = appendJSONString(w.buf, v)
	}
}

func (w *eventWriter) boolean(first *bool, name string, v bool) {
	if v {
		w.field(first, name)
		w.buf = append(w.buf, "true"...)
	}
}

func (w *eventWriter) bytes(first *bool, name string, v []byte) {
	if len(v) > 0 {
		w.field(first, name)
		w.buf = append(w.buf, '"')
		w.buf = base64.StdEncoding.AppendEncode(w.buf, v)
		w.buf = append(w.buf, '"')
	}
}

// value writes a field whose value encoding/json encodes (a map), unless
// it is empty.
func (w *eventWriter) value(first *bool, name string, v any, empty bool) {
	if empty {
		return
	}
	w.field(first, name)
	b, err := json.Marshal(v)
	if err != nil && w.err == nil {
		w.err = err
	}
	w.buf = append(w.buf, b...)
}

func (w *eventWriter) time(first *bool, name string, t time.Time) {
	w.field(first, name)
	b, err := t.MarshalJSON()
	if err != nil && w.err == nil {
		w.err = err
	}
	w.buf = append(w.buf, b...)
}

func (w *eventWriter) event(e *Event) {
	first := true
	w.buf = append(w.buf, '{')
	w.str(&first, "id", e.ID)
	w.str(&first, "invocation_id", e.InvocationID)
	w.str(&first, "author", e.Author)
	if e.Content != nil {
		w.field(&first, "content")
		w.content(e.Content)
	}
	w.field(&first, "actions")
	w.actions(&e.Actions)
	w.time(&first, "timestamp", e.Timestamp)
	w.boolean(&first, "partial", e.Partial)
	w.boolean(&first, "turn_complete", e.TurnComplete)
	w.str(&first, "error_code", e.ErrorCode)
	w.str(&first, "error_message", e.ErrorMessage)
	w.value(&first, "custom_metadata", e.CustomMetadata, len(e.CustomMetadata) == 0)
	if e.Sequence != 0 {
		w.field(&first, "sequence")
		w.buf = strconv.AppendInt(w.buf, e.Sequence, 10)
	}
	w.str(&first, "branch", e.Branch)
	w.boolean(&first, "interrupted", e.Interrupted)
	if len(e.LongRunningToolIDs) > 0 {
		w.field(&first, "long_running_tool_ids")
		w.buf = append(w.buf, '[')
		for i, id := range e.LongRunningToolIDs {
			if i > 0 {
				w.buf = append(w.buf, ',')
			}
			w.buf = appendJSONString(w.buf, id)
		}
		w.buf = append(w.buf, ']')
	}
	w.value(&first, "usage_metadata", e.UsageMetadata, len(e.UsageMetadata) == 0)
	w.value(&first, "grounding_metadata", e.GroundingMetadata, len(e.GroundingMetadata) == 0)
	w.value(&first, "citation_metadata", e.CitationMetadata, len(e.CitationMetadata) == 0)
	w.str(&first, "finish_reason", e.FinishReason)
	w.str(&first, "model_version", e.ModelVersion)
	w.value(&first, "extensions", e.Extensions, len(e.Extensions) == 0)
	w.buf = append(w.buf, '}')
}

func (w *eventWriter) actions(a *Actions) {
	first := true
	w.buf = append(w.buf, '{')
	w.value(&first, "state_delta", a.StateDelta, len(a.StateDelta) == 0)
	w.value(&first, "artifact_delta", a.ArtifactDelta, len(a.ArtifactDelta) == 0)
	w.str(&first, "transfer_to_agent", a.TransferToAgent)
	w.boolean(&first, "escalate", a.Escalate)
	w.boolean(&first, "skip_summarization", a.SkipSummarization)
	if c := a.Compaction; c != nil {
		inner := w.object(&first, "compaction")
		w.field(&inner, "start_sequence")
		w.buf = strconv.AppendInt(w.buf, c.StartSequence, 10)
		w.field(&inner, "end_sequence")
		w.buf = strconv.AppendInt(w.buf, c.EndSequence, 10)
		if !c.StartTime.IsZero() {
			w.time(&inner, "start_time", c.StartTime)
		}
		if !c.EndTime.IsZero() {
			w.time(&inner, "end_time", c.EndTime)
		}
		w.str(&inner, "model", c.Model)
		w.str(&inner, "prompt_version", c.PromptVersion)
		w.buf = append(w.buf, '}')
	}
	w.buf = append(w.buf, '}')
}

func (w *eventWriter) content(c *Content) {
	first := true
	w.buf = append(w.buf, '{')
	w.str(&first, "role", c.Role)
	if len(c.Parts) > 0 {
		w.field(&first, "parts")
		w.buf = append(w.buf, '[')
		for i := range c.Parts {
			if i > 0 {
				w.buf = append(w.buf, ',')
			}
			w.part(&c.Parts[i])
		}
		w.buf = append(w.buf, ']')
	}
	w.buf = append(w.buf, '}')
}

// object writes the field name and opens its JSON object; it returns the
// first-field flag of the object's own fields. The caller writes them and
// the closing brace.
func (w *eventWriter) object(first *bool, name string) bool {
	w.field(first, name)
	w.buf = append(w.buf, '{')
	return true
}

func (w *eventWriter) part(p *Part) {
	first := true
	w.buf = append(w.buf, '{')
	w.str(&first, "text", p.Text)
	if b := p.InlineData; b != nil {
		inner := w.object(&first, "inline_data")
		w.str(&inner, "mime_type", b.MIMEType)
		w.bytes(&inner, "data", b.Data)
		w.str(&inner, "display_name", b.DisplayName)
		w.buf = append(w.buf, '}')
	}
	if f := p.FileData; f != nil {
		inner := w.object(&first, "file_data")
		w.str(&inner, "mime_type", f.MIMEType)
		w.str(&inner, "file_uri", f.FileURI)
		w.str(&inner, "display_name", f.DisplayName)
		w.buf = append(w.buf, '}')
	}
	if c := p.FunctionCall; c != nil {
		inner := w.object(&first, "function_call")
		w.str(&inner, "id", c.ID)
		w.str(&inner, "name", c.Name)
		w.value(&inner, "args", c.Args, len(c.Args) == 0)
		w.buf = append(w.buf, '}')
	}
	if r := p.FunctionResponse; r != nil {
		inner := w.object(&first, "function_response")
		w.str(&inner, "id", r.ID)
		w.str(&inner, "name", r.Name)
		w.value(&inner, "response", r.Response, len(r.Response) == 0)
		w.buf = append(w.buf, '}')
	}
	w.boolean(&first, "thought", p.Thought)
	w.bytes(&first, "thought_signature", p.ThoughtSignature)
	w.value(&first, "extensions", p.Extensions, len(p.Extensions) == 0)
	w.buf = append(w.buf, '}')
}

// hexDigits are the digits of \u escapes.
const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string as encoding/json writes one:
// the quote and the backslash escaped, control characters as \b, \f, \n,
// \r and \t or as \u00XX, the characters HTML gives meaning to (<, > and
// &) as \u00XX too, each byte of invalid UTF-8 as \ufffd, and U+2028 and
// U+2029 (line breaks to JavaScript) as \u2028 and \u2029.
func appendJSONString(buf []byte, s string) []byte {
	buf = append(buf, '"')
	done := 0 // s[:done] is in buf
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			buf = append(buf, s[done:i]...)
			switch c {
			case '"', '\\':
				buf = append(buf, '\\', c)
			case '\b':
				buf = append(buf, '\\', 'b')
			case '\f':
				buf = append(buf, '\\', 'f')
			case '\n':
				buf = append(buf, '\\', 'n')
			case '\r':
				buf = append(buf, '\\', 'r')
			case '\t':
				buf = append(buf, '\\', 't')
			default:
				buf = append(buf, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			done = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			buf = append(buf, s[done:i]...)
			buf = append(buf, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			buf = append(buf, s[done:i]...)
			buf = append(buf, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		done = i
	}
	buf = append(buf, s[done:]...)
	return append(buf, '"')
}
