package vertex

import (
	"encoding/json"
	"maps"
	"strings"
	"time"

	"cloud.google.com/go/aiplatform/apiv1beta1/aiplatformpb"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/content"
	"github.com/kioku-ai/kioku/internal/content/vertexcontent"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
)

// The keys under which an event's extensions keep the Vertex AI fields the
// domain does not type. Fields ADK also has are kept under ADK's JSON names
// (so the kioku.v1 ADK adapter, which reads the extensions as ADK's event
// JSON, sees them): the transcriptions, and the requested auth configs in
// "actions". raw_event has no ADK counterpart and keeps Vertex AI's name.
const (
	extInputTranscription   = "inputTranscription"
	extOutputTranscription  = "outputTranscription"
	extActions              = "actions"
	extRequestedAuthConfigs = "requestedAuthConfigs"
	extRawEvent             = "rawEvent"
)

// sessionToVertex converts a domain session; its state is what the domain
// returned (the merged view on reads).
func sessionToVertex(e engine, s *sessiontype.Session) (*aiplatformpb.Session, error) {
	state, err := content.Struct("session_state", s.State)
	if err != nil {
		return nil, fault.Wrap(fault.Internal, err, "encoding the session's state")
	}
	out := &aiplatformpb.Session{
		Name:         e.sessionName(s.ID),
		CreateTime:   timestamppb.New(s.CreateTime),
		UpdateTime:   timestamppb.New(s.UpdateTime),
		DisplayName:  s.DisplayName,
		Labels:       s.Labels,
		SessionState: state,
		UserId:       s.User,
	}
	if !s.ExpireTime.IsZero() {
		out.Expiration = &aiplatformpb.Session_ExpireTime{ExpireTime: timestamppb.New(s.ExpireTime)}
	}
	return out, nil
}

// eventFromVertex converts a request's event (its name, which gives the
// event id, is appendEvent's).
func eventFromVertex(v *aiplatformpb.SessionEvent) (*sessiontype.Event, error) {
	if v == nil {
		return nil, fault.InvalidField("event", "Required field is not set.")
	}
	if v.GetAuthor() == "" {
		return nil, fault.InvalidField("event.author", "Required field is not set.")
	}
	if v.GetInvocationId() == "" {
		return nil, fault.InvalidField("event.invocation_id", "Required field is not set.")
	}
	out := &sessiontype.Event{
		Author:       v.GetAuthor(),
		InvocationID: v.GetInvocationId(),
		ErrorCode:    v.GetErrorCode(),
		ErrorMessage: v.GetErrorMessage(),
	}
	if ts := v.GetTimestamp(); ts != nil {
		if err := ts.CheckValid(); err != nil {
			return nil, fault.InvalidField("event.timestamp", "event.timestamp: %v", err)
		}
		// A zero time is kept as the caller's: ADK sends it for an event
		// without a timestamp, and reads it back.
		out.Timestamp, out.KeepZeroTimestamp = ts.AsTime(), true
	}
	var err error
	if out.Content, err = vertexcontent.FromVertex(v.GetContent()); err != nil {
		return nil, fault.InvalidField("event.content", "event.%v", err)
	}
	ext := map[string]any{}
	if a := v.GetActions(); a != nil {
		out.Actions = sessiontype.Actions{
			StateDelta:        content.Map(a.GetStateDelta()),
			TransferToAgent:   a.GetTransferAgent(),
			Escalate:          a.GetEscalate(),
			SkipSummarization: a.GetSkipSummarization(),
		}
		if len(a.GetArtifactDelta()) > 0 {
			out.Actions.ArtifactDelta = make(map[string]int64, len(a.GetArtifactDelta()))
			for k, n := range a.GetArtifactDelta() {
				out.Actions.ArtifactDelta[k] = int64(n)
			}
		}
		if r := a.GetRequestedAuthConfigs(); r != nil {
			ext[extActions] = map[string]any{extRequestedAuthConfigs: r.AsMap()}
		}
	}
	if m := v.GetEventMetadata(); m != nil {
		out.Partial = m.GetPartial()
		out.TurnComplete = m.GetTurnComplete()
		out.Interrupted = m.GetInterrupted()
		out.LongRunningToolIDs = m.GetLongRunningToolIds()
		out.Branch = m.GetBranch()
		out.CustomMetadata = content.Map(m.GetCustomMetadata())
		if g := m.GetGroundingMetadata(); g != nil {
			if out.GroundingMetadata, err = jsonMap(g); err != nil {
				return nil, fault.InvalidField("event.event_metadata.grounding_metadata", "event.event_metadata.grounding_metadata: %v", err)
			}
		}
		for key, t := range map[string]*aiplatformpb.Transcription{extInputTranscription: m.GetInputTranscription(), extOutputTranscription: m.GetOutputTranscription()} {
			if t != nil {
				tm := map[string]any{}
				if t.GetText() != "" {
					tm["text"] = t.GetText()
				}
				if t.GetFinished() {
					tm["finished"] = true
				}
				ext[key] = tm
			}
		}
	}
	if r := v.GetRawEvent(); r != nil {
		ext[extRawEvent] = r.AsMap()
	}
	if len(ext) > 0 {
		out.Extensions = ext
	}
	return out, nil
}

// eventToVertex converts a stored event of the session named by e and
// session.
func eventToVertex(e engine, session string, ev *sessiontype.Event) (*aiplatformpb.SessionEvent, error) {
	out := &aiplatformpb.SessionEvent{
		Name:         e.eventName(session, ev.ID),
		Author:       ev.Author,
		InvocationId: ev.InvocationID,
		Timestamp:    timestamppb.New(ev.Timestamp),
		ErrorCode:    ev.ErrorCode,
		ErrorMessage: ev.ErrorMessage,
		Actions: &aiplatformpb.EventActions{
			SkipSummarization: ev.Actions.SkipSummarization,
			Escalate:          ev.Actions.Escalate,
			TransferAgent:     ev.Actions.TransferToAgent,
		},
		EventMetadata: &aiplatformpb.EventMetadata{
			Partial:            ev.Partial,
			TurnComplete:       ev.TurnComplete,
			Interrupted:        ev.Interrupted,
			LongRunningToolIds: ev.LongRunningToolIDs,
			Branch:             ev.Branch,
		},
	}
	var err error
	if out.Content, err = vertexcontent.ToVertex(ev.Content); err != nil {
		return nil, fault.Wrap(fault.Internal, err, "encoding event %s", ev.ID)
	}
	if out.Actions.StateDelta, err = content.Struct("state_delta", ev.Actions.StateDelta); err != nil {
		return nil, fault.Wrap(fault.Internal, err, "encoding event %s", ev.ID)
	}
	for k, n := range ev.Actions.ArtifactDelta {
		if out.Actions.ArtifactDelta == nil {
			out.Actions.ArtifactDelta = map[string]int32{}
		}
		out.Actions.ArtifactDelta[k] = int32(min(max(n, -1<<31), 1<<31-1))
	}
	md := out.EventMetadata
	custom := ev.CustomMetadata
	if c := ev.Actions.Compaction; c != nil && custom[adkCompactionKey] == nil {
		// Vertex AI has no compaction field: ADK Python keeps its own in
		// custom_metadata, and so finds kioku's there.
		custom = maps.Clone(custom)
		if custom == nil {
			custom = map[string]any{}
		}
		custom[adkCompactionKey] = adkCompaction(c, ev.Content)
	}
	if md.CustomMetadata, err = content.Struct("custom_metadata", custom); err != nil {
		return nil, fault.Wrap(fault.Internal, err, "encoding event %s", ev.ID)
	}
	if ev.GroundingMetadata != nil {
		// Grounding metadata written through kioku.v1 in genai's form may
		// hold fields Vertex AI's lacks: those are left out.
		g := &aiplatformpb.GroundingMetadata{}
		if b, err := json.Marshal(ev.GroundingMetadata); err == nil && lenient.Unmarshal(b, g) == nil {
			md.GroundingMetadata = g
		}
	}
	ext := ev.Extensions
	if a, ok := ext[extActions].(map[string]any); ok {
		if r, ok := a[extRequestedAuthConfigs].(map[string]any); ok {
			out.Actions.RequestedAuthConfigs, _ = structpb.NewStruct(r)
		}
	}
	md.InputTranscription = transcription(ext[extInputTranscription])
	md.OutputTranscription = transcription(ext[extOutputTranscription])
	if r, ok := ext[extRawEvent].(map[string]any); ok {
		out.RawEvent, _ = structpb.NewStruct(r)
	}
	return out, nil
}

func transcription(v any) *aiplatformpb.Transcription {
	m, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	text, _ := m["text"].(string)
	finished, _ := m["finished"].(bool)
	return &aiplatformpb.Transcription{Text: text, Finished: finished}
}

// lenient decodes JSON into Vertex AI's messages, ignoring fields they do
// not have.
var lenient = protojson.UnmarshalOptions{DiscardUnknown: true}

// jsonMap returns a message's JSON form as a map.
func jsonMap(m proto.Message) (map[string]any, error) {
	b, err := protojson.Marshal(m)
	if err != nil {
		return nil, err
	}
	return content.JSONObject(json.RawMessage(b))
}

// expiration reads a Vertex AI resource's expire_time or ttl.
func expiration(field string, at *timestamppb.Timestamp, ttl interface{ AsDuration() time.Duration }, hasTTL bool) (time.Time, time.Duration, error) {
	var t time.Time
	if at != nil {
		if err := at.CheckValid(); err != nil {
			return time.Time{}, 0, fault.InvalidField(field+".expire_time", "%s.expire_time: %v", field, err)
		}
		t = at.AsTime()
	}
	var d time.Duration
	if hasTTL {
		if d = ttl.AsDuration(); d <= 0 {
			return time.Time{}, 0, fault.InvalidField(field+".ttl", "%s.ttl must be positive", field)
		}
	}
	return t, d, nil
}

// expirationUpdate reads the expire_time or ttl an update sets: the new
// expiry (a zero time: none) or the ttl, the other nil.
func expirationUpdate(field string, at *timestamppb.Timestamp, ttl *durationpb.Duration) (*time.Time, *time.Duration, error) {
	t, d, err := expiration(field, at, ttl, ttl != nil)
	if err != nil {
		return nil, nil, err
	}
	if d != 0 {
		return nil, &d, nil
	}
	return &t, nil, nil
}

// adkCompactionKey is the custom_metadata key under which ADK Python keeps
// an event's compaction on Vertex AI.
const adkCompactionKey = "_compaction"

// adkCompaction returns a kioku compaction in ADK Python's form
// (EventCompaction dumped to JSON): the times of the first and last events
// it covers in seconds, and the summary as compacted_content.
func adkCompaction(c *sessiontype.Compaction, summary *sessiontype.Content) map[string]any {
	seconds := func(t time.Time) float64 {
		if t.IsZero() {
			return 0
		}
		return float64(t.UnixNano()) / 1e9
	}
	out := map[string]any{"start_timestamp": seconds(c.StartTime), "end_timestamp": seconds(c.EndTime)}
	if summary != nil {
		var parts []any
		for _, p := range summary.Parts {
			if p.Text != "" && !p.Thought {
				parts = append(parts, map[string]any{"text": p.Text})
			}
		}
		out["compacted_content"] = map[string]any{"role": summary.Role, "parts": parts}
	}
	return out
}

// maskPaths returns an update mask's paths in snake_case, however the
// client wrote them (gRPC clients send them as written).
func maskPaths(m *fieldmaskpb.FieldMask) []string {
	var out []string
	for _, p := range m.GetPaths() {
		var b strings.Builder
		for _, r := range strings.TrimSpace(p) {
			if r >= 'A' && r <= 'Z' {
				b.WriteByte('_')
				r += 'a' - 'A'
			}
			b.WriteRune(r)
		}
		out = append(out, b.String())
	}
	return out
}
