package server

import (
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/kioku-ai/kioku/fault"
	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/sessions"
)

// structToMap converts a Struct to a map (nil for nil).
func structToMap(s *structpb.Struct) map[string]any {
	if s == nil {
		return nil
	}
	return s.AsMap()
}

// mapToStruct converts a stored map to a Struct (nil for nil). Stored maps
// hold only JSON values, so the conversion cannot fail for them; a failure
// is reported as an internal error naming the field.
func mapToStruct(field string, m map[string]any) (*structpb.Struct, error) {
	if m == nil {
		return nil, nil
	}
	s, err := structpb.NewStruct(m)
	if err != nil {
		return nil, fault.Wrap(fault.Internal, err, "encoding %s", field)
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

func timestampOrNil(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

func sessionToProto(s *sessions.Session, events []*sessions.Event) (*kiokuv1.Session, error) {
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
	for _, e := range events {
		pe, err := eventToProto(s.Key, e)
		if err != nil {
			return nil, err
		}
		out.Events = append(out.Events, pe)
	}
	return out, nil
}

func eventToProto(k sessions.Key, e *sessions.Event) (*kiokuv1.Event, error) {
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
	if e.Content != nil {
		out.Content = &kiokuv1.Content{Role: e.Content.Role}
		for i, p := range e.Content.Parts {
			pp, err := partToProto(i, p)
			if err != nil {
				return nil, err
			}
			out.Content.Parts = append(out.Content.Parts, pp)
		}
	}
	return out, nil
}

func partToProto(i int, p sessions.Part) (*kiokuv1.Part, error) {
	out := &kiokuv1.Part{Text: p.Text, Thought: p.Thought, ThoughtSignature: p.ThoughtSignature}
	var err error
	if p.InlineData != nil {
		out.InlineData = &kiokuv1.Blob{MimeType: p.InlineData.MIMEType, Data: p.InlineData.Data, DisplayName: p.InlineData.DisplayName}
	}
	if p.FileData != nil {
		out.FileData = &kiokuv1.FileData{MimeType: p.FileData.MIMEType, FileUri: p.FileData.FileURI, DisplayName: p.FileData.DisplayName}
	}
	if c := p.FunctionCall; c != nil {
		out.FunctionCall = &kiokuv1.FunctionCall{Id: c.ID, Name: c.Name}
		if out.FunctionCall.Args, err = mapToStruct(fmt.Sprintf("parts[%d].function_call.args", i), c.Args); err != nil {
			return nil, err
		}
	}
	if r := p.FunctionResponse; r != nil {
		out.FunctionResponse = &kiokuv1.FunctionResponse{Id: r.ID, Name: r.Name}
		if out.FunctionResponse.Response, err = mapToStruct(fmt.Sprintf("parts[%d].function_response.response", i), r.Response); err != nil {
			return nil, err
		}
	}
	if out.Extensions, err = mapToStruct(fmt.Sprintf("parts[%d].extensions", i), p.Extensions); err != nil {
		return nil, err
	}
	return out, nil
}

// eventFromProto converts a request's event to the domain. Output-only
// fields (name, sequence) are ignored.
func eventFromProto(e *kiokuv1.Event) (*sessions.Event, error) {
	if e == nil {
		return nil, fault.Invalidf("event is required")
	}
	ts, err := timeOrZero(e.GetTimestamp())
	if err != nil {
		return nil, fault.Invalidf("event.timestamp: %v", err)
	}
	out := &sessions.Event{
		ID:                 e.GetId(),
		InvocationID:       e.GetInvocationId(),
		Author:             e.GetAuthor(),
		Timestamp:          ts,
		Partial:            e.GetPartial(),
		TurnComplete:       e.GetTurnComplete(),
		ErrorCode:          e.GetErrorCode(),
		ErrorMessage:       e.GetErrorMessage(),
		CustomMetadata:     structToMap(e.GetCustomMetadata()),
		Branch:             e.GetBranch(),
		Interrupted:        e.GetInterrupted(),
		LongRunningToolIDs: e.GetLongRunningToolIds(),
		UsageMetadata:      structToMap(e.GetUsageMetadata()),
		GroundingMetadata:  structToMap(e.GetGroundingMetadata()),
		CitationMetadata:   structToMap(e.GetCitationMetadata()),
		FinishReason:       e.GetFinishReason(),
		ModelVersion:       e.GetModelVersion(),
		Extensions:         structToMap(e.GetExtensions()),
	}
	if a := e.GetActions(); a != nil {
		out.Actions = sessions.Actions{
			StateDelta:        structToMap(a.GetStateDelta()),
			ArtifactDelta:     a.GetArtifactDelta(),
			TransferToAgent:   a.GetTransferToAgent(),
			Escalate:          a.GetEscalate(),
			SkipSummarization: a.GetSkipSummarization(),
		}
		if len(out.Actions.ArtifactDelta) == 0 {
			out.Actions.ArtifactDelta = nil
		}
	}
	if c := e.GetContent(); c != nil {
		out.Content = &sessions.Content{Role: c.GetRole()}
		for _, p := range c.GetParts() {
			out.Content.Parts = append(out.Content.Parts, partFromProto(p))
		}
	}
	return out, nil
}

func partFromProto(p *kiokuv1.Part) sessions.Part {
	out := sessions.Part{
		Text:             p.GetText(),
		Thought:          p.GetThought(),
		ThoughtSignature: p.GetThoughtSignature(),
		Extensions:       structToMap(p.GetExtensions()),
	}
	if b := p.GetInlineData(); b != nil {
		out.InlineData = &sessions.Blob{MIMEType: b.GetMimeType(), Data: b.GetData(), DisplayName: b.GetDisplayName()}
	}
	if f := p.GetFileData(); f != nil {
		out.FileData = &sessions.FileData{MIMEType: f.GetMimeType(), FileURI: f.GetFileUri(), DisplayName: f.GetDisplayName()}
	}
	if c := p.GetFunctionCall(); c != nil {
		out.FunctionCall = &sessions.FunctionCall{ID: c.GetId(), Name: c.GetName(), Args: structToMap(c.GetArgs())}
	}
	if r := p.GetFunctionResponse(); r != nil {
		out.FunctionResponse = &sessions.FunctionResponse{ID: r.GetId(), Name: r.GetName(), Response: structToMap(r.GetResponse())}
	}
	return out
}
