package sessions

import (
	"context"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/sessions/sessiondriver"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
)

// AppendEvent appends an event to a session. See the package documentation
// for state scopes. The returned event is the stored one: id, timestamp and
// sequence set, "temp:" keys removed. An event with Partial set is returned
// as given and not stored. A retry of an earlier append (same id, same
// content) returns the stored event and changes nothing; the same id with
// other content is AlreadyExists. With expected set, the append fails with
// FailedPrecondition unless the session's last sequence equals *expected.
// Once the event is stored, the observers (Observe) are told, off this
// call's path.
func (s *Service) AppendEvent(ctx context.Context, key sessiontype.Key, ev *sessiontype.Event, expected *int64) (*sessiontype.Event, error) {
	if err := ValidateKey(key); err != nil {
		return nil, err
	}
	if ev == nil {
		return nil, fault.Invalidf("event is required")
	}
	if err := s.limits.validateEvent(ev); err != nil {
		return nil, err
	}
	if expected != nil && *expected < 0 {
		return nil, fault.Invalidf("expected_sequence must not be negative")
	}
	if ev.Partial {
		return ev, nil
	}
	now := s.now()
	e := *ev
	e.Sequence = 0
	if e.ID == "" {
		e.ID = s.newID()
	}
	callerTime := !e.Timestamp.IsZero() || e.KeepZeroTimestamp
	if !callerTime {
		e.Timestamp = now
	}
	e.Actions.StateDelta = sessiontype.StripTemp(e.Actions.StateDelta)
	if len(e.Actions.StateDelta) == 0 {
		e.Actions.StateDelta = nil
	}
	body, err := e.Marshal()
	if err != nil {
		return nil, fault.Invalidf("event is not encodable: %v", err)
	}
	if len(body) > s.limits.MaxEventBytes {
		return nil, fault.New(fault.ResourceExhausted, "event is %d bytes encoded; the limit is %d bytes (MaxEventBytes); store large data elsewhere and reference it with file_data", len(body), s.limits.MaxEventBytes)
	}
	e.Size = len(body)
	res, err := s.store.AppendEvent(ctx, &sessiondriver.AppendEventParams{
		Key:              key,
		Event:            &e,
		Body:             body,
		ExpectedSequence: expected,
		Deltas:           sessiontype.SplitDelta(e.Actions.StateDelta),
		Now:              now,
		MaxStateBytes:    s.limits.MaxStateBytes,
	})
	if err != nil {
		return nil, err
	}
	if res.Existing {
		if !res.Event.SameContent(&e) || callerTime && !res.Event.Timestamp.Equal(e.Timestamp) {
			return nil, fault.New(fault.AlreadyExists, "event %q already exists in session %s with different content; use a new event id", e.ID, key.Name())
		}
		return res.Event, nil
	}
	s.kickIndexer()
	s.broker.Notify(key)
	s.notify(Notice{Key: key, Sequence: res.Event.Sequence, Time: res.Event.Timestamp, Appends: 1, Bytes: int64(len(body))})
	return res.Event, nil
}
