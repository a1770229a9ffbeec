package adk

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"time"

	"google.golang.org/adk/v2/session"
	"google.golang.org/genai"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
)

// Events cross the wire in kioku's typed form; what kioku does not model
// (ADK's routes, node info, tool confirmations, transcriptions, genai part
// fields such as executable code...) travels in the extensions, as the
// JSON ADK itself writes. Converting is done on JSON objects: the ADK
// event's JSON minus the fields kioku types is its extensions, and the way
// back merges the typed fields into the extensions and decodes the result
// with ADK's own decoder, so every field round-trips.

// The JSON keys of session.Event (and its LLMResponse) that kioku types.
var typedEventKeys = []string{
	"id", "invocationId", "author", "branch", "timestamp", "partial", "turnComplete",
	"errorCode", "errorMessage", "interrupted", "finishReason", "modelVersion",
	"longRunningToolIds", "customMetadata", "usageMetadata", "groundingMetadata",
	"citationMetadata", "content", "actions",
}

var typedActionKeys = []string{"stateDelta", "artifactDelta", "transferToAgent", "escalate", "skipSummarization"}

func toJSONMap(v any) (map[string]any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	return m, nil
}

func structOf(v any) (*structpb.Struct, error) {
	m, ok := v.(map[string]any)
	if !ok || m == nil {
		return nil, nil
	}
	return structpb.NewStruct(m)
}

// leftover returns m without keys, nil when nothing is left.
func leftover(m map[string]any, keys ...string) map[string]any {
	out := maps.Clone(m)
	for _, k := range keys {
		delete(out, k)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// eventToProto converts an ADK event to kioku's.
func eventToProto(e *session.Event) (*kiokuv1.Event, error) {
	m, err := toJSONMap(e)
	if err != nil {
		return nil, fmt.Errorf("encoding the event: %w", err)
	}
	out := &kiokuv1.Event{
		Id:                 e.ID,
		InvocationId:       e.InvocationID,
		Author:             e.Author,
		Branch:             e.Branch,
		Partial:            e.Partial,
		TurnComplete:       e.TurnComplete,
		ErrorCode:          e.ErrorCode,
		ErrorMessage:       e.ErrorMessage,
		Interrupted:        e.Interrupted,
		FinishReason:       string(e.FinishReason),
		ModelVersion:       e.ModelVersion,
		LongRunningToolIds: e.LongRunningToolIDs,
	}
	if !e.Timestamp.IsZero() {
		out.Timestamp = timestamppb.New(e.Timestamp)
	}
	for _, f := range []struct {
		key string
		dst **structpb.Struct
	}{
		{"customMetadata", &out.CustomMetadata},
		{"usageMetadata", &out.UsageMetadata},
		{"groundingMetadata", &out.GroundingMetadata},
		{"citationMetadata", &out.CitationMetadata},
	} {
		if *f.dst, err = structOf(m[f.key]); err != nil {
			return nil, fmt.Errorf("event %s: %w", f.key, err)
		}
	}
	a := e.Actions
	out.Actions = &kiokuv1.EventActions{
		ArtifactDelta:     a.ArtifactDelta,
		TransferToAgent:   a.TransferToAgent,
		Escalate:          a.Escalate,
		SkipSummarization: a.SkipSummarization,
	}
	if am, ok := m["actions"].(map[string]any); ok {
		// The JSON form: values of any Go type become JSON values.
		if out.Actions.StateDelta, err = structOf(am["stateDelta"]); err != nil {
			return nil, fmt.Errorf("event state delta: %w", err)
		}
	}
	if e.Content != nil {
		if out.Content, err = contentToProto(e.Content); err != nil {
			return nil, err
		}
	}
	ext := leftover(m, typedEventKeys...)
	if am, ok := m["actions"].(map[string]any); ok {
		if rest := leftover(am, typedActionKeys...); rest != nil {
			if ext == nil {
				ext = map[string]any{}
			}
			ext["actions"] = rest
		}
	}
	if ext != nil {
		if out.Extensions, err = structpb.NewStruct(ext); err != nil {
			return nil, fmt.Errorf("event extensions: %w", err)
		}
	}
	return out, nil
}

func contentToProto(c *genai.Content) (*kiokuv1.Content, error) {
	out := &kiokuv1.Content{Role: c.Role}
	for i, p := range c.Parts {
		if p == nil {
			continue
		}
		pm, err := toJSONMap(p)
		if err != nil {
			return nil, err
		}
		pp := &kiokuv1.Part{Text: p.Text, Thought: p.Thought, ThoughtSignature: p.ThoughtSignature}
		ext := leftover(pm, "text", "thought", "thoughtSignature", "inlineData", "fileData", "functionCall", "functionResponse")
		sub := func(key string, typed ...string) {
			if sm, ok := pm[key].(map[string]any); ok {
				if rest := leftover(sm, typed...); rest != nil {
					if ext == nil {
						ext = map[string]any{}
					}
					ext[key] = rest
				}
			}
		}
		if b := p.InlineData; b != nil {
			pp.InlineData = &kiokuv1.Blob{MimeType: b.MIMEType, Data: b.Data, DisplayName: b.DisplayName}
			sub("inlineData", "mimeType", "data", "displayName")
		}
		if f := p.FileData; f != nil {
			pp.FileData = &kiokuv1.FileData{MimeType: f.MIMEType, FileUri: f.FileURI, DisplayName: f.DisplayName}
			sub("fileData", "mimeType", "fileUri", "displayName")
		}
		// Arguments and results are taken in their JSON form, so that values
		// of any Go type (tools return structs) become JSON values.
		if fc := p.FunctionCall; fc != nil {
			pp.FunctionCall = &kiokuv1.FunctionCall{Id: fc.ID, Name: fc.Name}
			sm, _ := pm["functionCall"].(map[string]any)
			if pp.FunctionCall.Args, err = structOf(sm["args"]); err != nil {
				return nil, fmt.Errorf("part %d function call args: %w", i, err)
			}
			sub("functionCall", "id", "name", "args")
		}
		if fr := p.FunctionResponse; fr != nil {
			pp.FunctionResponse = &kiokuv1.FunctionResponse{Id: fr.ID, Name: fr.Name}
			sm, _ := pm["functionResponse"].(map[string]any)
			if pp.FunctionResponse.Response, err = structOf(sm["response"]); err != nil {
				return nil, fmt.Errorf("part %d function response: %w", i, err)
			}
			sub("functionResponse", "id", "name", "response")
		}
		if ext != nil {
			if pp.Extensions, err = structpb.NewStruct(ext); err != nil {
				return nil, fmt.Errorf("part %d extensions: %w", i, err)
			}
		}
		out.Parts = append(out.Parts, pp)
	}
	return out, nil
}

// eventFromProto converts kioku's event back to ADK's.
func eventFromProto(p *kiokuv1.Event) (*session.Event, error) {
	m := map[string]any{}
	if p.GetExtensions() != nil {
		m = p.GetExtensions().AsMap()
	}
	set := func(key string, v any, present bool) {
		if present {
			m[key] = v
		}
	}
	set("id", p.GetId(), p.GetId() != "")
	set("invocationId", p.GetInvocationId(), true)
	set("author", p.GetAuthor(), true)
	set("branch", p.GetBranch(), p.GetBranch() != "")
	set("partial", true, p.GetPartial())
	set("turnComplete", true, p.GetTurnComplete())
	set("errorCode", p.GetErrorCode(), p.GetErrorCode() != "")
	set("errorMessage", p.GetErrorMessage(), p.GetErrorMessage() != "")
	set("interrupted", true, p.GetInterrupted())
	set("finishReason", p.GetFinishReason(), p.GetFinishReason() != "")
	set("modelVersion", p.GetModelVersion(), p.GetModelVersion() != "")
	set("longRunningToolIds", p.GetLongRunningToolIds(), len(p.GetLongRunningToolIds()) > 0)
	if p.GetTimestamp() != nil {
		m["timestamp"] = p.GetTimestamp().AsTime().Format(time.RFC3339Nano)
	}
	for key, s := range map[string]*structpb.Struct{
		"customMetadata":    p.GetCustomMetadata(),
		"usageMetadata":     p.GetUsageMetadata(),
		"groundingMetadata": p.GetGroundingMetadata(),
		"citationMetadata":  p.GetCitationMetadata(),
	} {
		if s != nil {
			m[key] = s.AsMap()
		}
	}
	am, _ := m["actions"].(map[string]any)
	if am == nil {
		am = map[string]any{}
	}
	if a := p.GetActions(); a != nil {
		set2 := func(key string, v any, present bool) {
			if present {
				am[key] = v
			}
		}
		if a.GetStateDelta() != nil {
			am["stateDelta"] = a.GetStateDelta().AsMap()
		}
		set2("artifactDelta", a.GetArtifactDelta(), len(a.GetArtifactDelta()) > 0)
		set2("transferToAgent", a.GetTransferToAgent(), a.GetTransferToAgent() != "")
		set2("escalate", true, a.GetEscalate())
		set2("skipSummarization", true, a.GetSkipSummarization())
	}
	m["actions"] = am
	if c := p.GetContent(); c != nil {
		m["content"] = contentFromProto(c)
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	var e session.Event
	if err := json.Unmarshal(b, &e); err != nil {
		return nil, fmt.Errorf("decoding event %s: %w", p.GetId(), err)
	}
	return &e, nil
}

func contentFromProto(c *kiokuv1.Content) map[string]any {
	var parts []any
	for _, p := range c.GetParts() {
		pm := map[string]any{}
		if p.GetExtensions() != nil {
			pm = p.GetExtensions().AsMap()
		}
		obj := func(key string) map[string]any {
			o, _ := pm[key].(map[string]any)
			if o == nil {
				o = map[string]any{}
			}
			pm[key] = o
			return o
		}
		if p.GetText() != "" {
			pm["text"] = p.GetText()
		}
		if p.GetThought() {
			pm["thought"] = true
		}
		if len(p.GetThoughtSignature()) > 0 {
			pm["thoughtSignature"] = base64.StdEncoding.EncodeToString(p.GetThoughtSignature())
		}
		if b := p.GetInlineData(); b != nil {
			o := obj("inlineData")
			o["mimeType"] = b.GetMimeType()
			if len(b.GetData()) > 0 {
				o["data"] = base64.StdEncoding.EncodeToString(b.GetData())
			}
			if b.GetDisplayName() != "" {
				o["displayName"] = b.GetDisplayName()
			}
		}
		if f := p.GetFileData(); f != nil {
			o := obj("fileData")
			o["mimeType"] = f.GetMimeType()
			o["fileUri"] = f.GetFileUri()
			if f.GetDisplayName() != "" {
				o["displayName"] = f.GetDisplayName()
			}
		}
		if fc := p.GetFunctionCall(); fc != nil {
			o := obj("functionCall")
			if fc.GetId() != "" {
				o["id"] = fc.GetId()
			}
			o["name"] = fc.GetName()
			if fc.GetArgs() != nil {
				o["args"] = fc.GetArgs().AsMap()
			}
		}
		if fr := p.GetFunctionResponse(); fr != nil {
			o := obj("functionResponse")
			if fr.GetId() != "" {
				o["id"] = fr.GetId()
			}
			o["name"] = fr.GetName()
			if fr.GetResponse() != nil {
				o["response"] = fr.GetResponse().AsMap()
			}
		}
		parts = append(parts, pm)
	}
	out := map[string]any{"role": c.GetRole()}
	if parts != nil {
		out["parts"] = parts
	}
	return out
}
