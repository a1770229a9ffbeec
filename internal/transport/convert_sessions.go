package transport

import (
	"time"

	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/kioku-ai/kioku/fault"
	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/internal/content"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
)

// mapToStruct converts a stored map to a Struct (nil for nil). Stored maps
// hold only JSON values, so the conversion cannot fail for them; a failure
// is reported as an internal error naming the field.
func mapToStruct(field string, m map[string]any) (*structpb.Struct, error) {
	s, err := content.Struct(field, m)
	if err != nil {
		return nil, fault.Wrap(fault.Internal, err, "encoding stored values")
	}
	return s, nil
}

func timeOrZero(t *timestamppb.Timestamp) (time.Time, error) {
	if t == nil {
		return time.Time{}, nil
	}
	if err := t.CheckValid(); err != nil {
		return time.Time{}, fault.Invalidf("timestamp: %v", err)
	}
	return t.AsTime(), nil
}

// timeRange reads a range's start_time and end_time (unset: the zero
// time); an error names the field, after prefix ("session_source.").
func timeRange(prefix string, start, end *timestamppb.Timestamp) (from, to time.Time, err error) {
	if from, err = timeOrZero(start); err != nil {
		return from, to, fault.Invalidf("%sstart_time: %v", prefix, err)
	}
	if to, err = timeOrZero(end); err != nil {
		return from, to, fault.Invalidf("%send_time: %v", prefix, err)
	}
	return from, to, nil
}

func timestampOrNil(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

func sessionToProto(s *sessiontype.Session, events []*sessiontype.Event) (*kiokuv1.Session, error) {
	state, err := mapToStruct("state", s.State)
	if err != nil {
		return nil, err
	}
	out := &kiokuv1.Session{
		Name:         s.Key.Name(),
		DisplayName:  s.DisplayName,
		Labels:       s.Labels,
		State:        state,
		CreateTime:   timestampOrNil(s.CreateTime),
		UpdateTime:   timestampOrNil(s.UpdateTime),
		LastSequence: s.LastSequence,
	}
	if !s.ExpireTime.IsZero() {
		out.Expiration = &kiokuv1.Session_ExpireTime{ExpireTime: timestamppb.New(s.ExpireTime)}
	}
	if out.Events, err = convertAllOrErr(events, func(e *sessiontype.Event) (*kiokuv1.Event, error) { return eventToProto(s.Key, e) }); err != nil {
		return nil, err
	}
	return out, nil
}

func eventToProto(k sessiontype.Key, e *sessiontype.Event) (*kiokuv1.Event, error) {
	var err error
	out := &kiokuv1.Event{
		Id:                 e.ID,
		InvocationId:       e.InvocationID,
		Author:             e.Author,
		Timestamp:          timestampOrNil(e.Timestamp),
		Partial:            e.Partial,
		TurnComplete:       e.TurnComplete,
		ErrorCode:          e.ErrorCode,
		ErrorMessage:       e.ErrorMessage,
		Sequence:           e.Sequence,
		Branch:             e.Branch,
		Interrupted:        e.Interrupted,
		LongRunningToolIds: e.LongRunningToolIDs,
		FinishReason:       e.FinishReason,
		ModelVersion:       e.ModelVersion,
		Actions: &kiokuv1.EventActions{
			ArtifactDelta:     e.Actions.ArtifactDelta,
			TransferToAgent:   e.Actions.TransferToAgent,
			Escalate:          e.Actions.Escalate,
			SkipSummarization: e.Actions.SkipSummarization,
		},
	}
	if c := e.Actions.Compaction; c != nil {
		out.Actions.Compaction = &kiokuv1.EventCompaction{
			StartSequence: c.StartSequence, EndSequence: c.EndSequence,
			StartTime: timestampOrNil(c.StartTime), EndTime: timestampOrNil(c.EndTime),
			Model: c.Model, PromptVersion: c.PromptVersion,
		}
	}
	if e.Sequence > 0 {
		out.Name = eventName(k, e.ID)
	}
	for _, f := range []struct {
		name string
		dst  **structpb.Struct
		src  map[string]any
	}{
		{"custom_metadata", &out.CustomMetadata, e.CustomMetadata},
		{"usage_metadata", &out.UsageMetadata, e.UsageMetadata},
		{"grounding_metadata", &out.GroundingMetadata, e.GroundingMetadata},
		{"citation_metadata", &out.CitationMetadata, e.CitationMetadata},
		{"extensions", &out.Extensions, e.Extensions},
		{"actions.state_delta", &out.Actions.StateDelta, e.Actions.StateDelta},
	} {
		if *f.dst, err = mapToStruct("event."+f.name, f.src); err != nil {
			return nil, err
		}
	}
	if out.Content, err = content.ToKioku(e.Content); err != nil {
		return nil, fault.Wrap(fault.Internal, err, "encoding event.content")
	}
	return out, nil
}

// eventFromProto converts a request's event to the domain. Output-only
// fields (name, sequence) are ignored.
func eventFromProto(e *kiokuv1.Event) (*sessiontype.Event, error) {
	if e == nil {
		return nil, fault.Invalidf("event is required")
	}
	ts, err := timeOrZero(e.GetTimestamp())
	if err != nil {
		return nil, fault.Invalidf("event.timestamp: %v", err)
	}
	out := &sessiontype.Event{
		ID:                 e.GetId(),
		InvocationID:       e.GetInvocationId(),
		Author:             e.GetAuthor(),
		Timestamp:          ts,
		Partial:            e.GetPartial(),
		TurnComplete:       e.GetTurnComplete(),
		ErrorCode:          e.GetErrorCode(),
		ErrorMessage:       e.GetErrorMessage(),
		CustomMetadata:     content.Map(e.GetCustomMetadata()),
		Branch:             e.GetBranch(),
		Interrupted:        e.GetInterrupted(),
		LongRunningToolIDs: e.GetLongRunningToolIds(),
		UsageMetadata:      content.Map(e.GetUsageMetadata()),
		GroundingMetadata:  content.Map(e.GetGroundingMetadata()),
		CitationMetadata:   content.Map(e.GetCitationMetadata()),
		FinishReason:       e.GetFinishReason(),
		ModelVersion:       e.GetModelVersion(),
		Extensions:         content.Map(e.GetExtensions()),
	}
	if a := e.GetActions(); a != nil {
		out.Actions = sessiontype.Actions{
			StateDelta:        content.Map(a.GetStateDelta()),
			ArtifactDelta:     a.GetArtifactDelta(),
			TransferToAgent:   a.GetTransferToAgent(),
			Escalate:          a.GetEscalate(),
			SkipSummarization: a.GetSkipSummarization(),
		}
		if len(out.Actions.ArtifactDelta) == 0 {
			out.Actions.ArtifactDelta = nil
		}
		if c := a.GetCompaction(); c != nil {
			start, end, err := timeRange("event.actions.compaction.", c.GetStartTime(), c.GetEndTime())
			if err != nil {
				return nil, err
			}
			out.Actions.Compaction = &sessiontype.Compaction{
				StartSequence: c.GetStartSequence(), EndSequence: c.GetEndSequence(), StartTime: start, EndTime: end,
				Model: c.GetModel(), PromptVersion: c.GetPromptVersion(),
			}
		}
	}
	out.Content = content.FromKioku(e.GetContent())
	return out, nil
}
