package adk

import (
	"encoding/json"
	"fmt"
	"maps"
	"time"

	"google.golang.org/adk/v2/session"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/internal/content"
)

// Events cross the wire in kioku's typed form; what kioku does not model
// (ADK's routes, node info, tool confirmations, transcriptions...) travels
// in the extensions, as the JSON ADK itself writes. Converting is done on
// JSON objects: the ADK event's JSON minus the fields kioku types is its
// extensions, and the way back merges the typed fields into the extensions
// and decodes the result with ADK's own decoder, so every field
// round-trips. The content goes through package content, the converter
// every part of kioku shares (genai part fields kioku does not type, such
// as executable code, travel in the parts' extensions the same way).

// The JSON keys of session.Event (and its LLMResponse) that kioku types.
var typedEventKeys = []string{
	"id", "invocationId", "author", "branch", "timestamp", "partial", "turnComplete",
	"errorCode", "errorMessage", "interrupted", "finishReason", "modelVersion",
	"longRunningToolIds", "customMetadata", "usageMetadata", "groundingMetadata",
	"citationMetadata", "content", "actions",
}

var typedActionKeys = []string{"stateDelta", "artifactDelta", "transferToAgent", "escalate", "skipSummarization"}

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
	m, err := content.JSONObject(e)
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
	if out.Content, err = content.GenaiToKioku(e.Content); err != nil {
		return nil, fmt.Errorf("event content: %w", err)
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
	if c := p.GetActions().GetCompaction(); c != nil {
		cm, _ := m["customMetadata"].(map[string]any)
		if cm == nil {
			cm = map[string]any{}
		}
		cm[compactionKey] = adkCompaction(c, p.GetContent())
		m["customMetadata"] = cm
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
		m["content"] = content.JSON(content.FromKioku(c))
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

// compactionKey is the custom metadata key under which ADK Python keeps an
// event's compaction when its session service cannot store it in the
// event's actions (as with Vertex AI).
const compactionKey = "_compaction"

// adkCompaction returns a kioku compaction in ADK Python's form
// (EventCompaction dumped to JSON): the times of the first and last events
// it covers in seconds, and the summary as compacted_content.
func adkCompaction(c *kiokuv1.EventCompaction, summary *kiokuv1.Content) map[string]any {
	seconds := func(t *timestamppb.Timestamp) float64 {
		if t == nil {
			return 0
		}
		return float64(t.AsTime().UnixNano()) / 1e9
	}
	out := map[string]any{
		"start_timestamp": seconds(c.GetStartTime()),
		"end_timestamp":   seconds(c.GetEndTime()),
	}
	if summary != nil {
		out["compacted_content"] = content.JSON(content.FromKioku(summary))
	}
	return out
}
