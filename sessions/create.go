package sessions

import (
	"context"
	"maps"
	"time"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/unixnano"
	"github.com/kioku-ai/kioku/resource"
	"github.com/kioku-ai/kioku/sessions/sessiondriver"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
)

// CreateSessionRequest is the input of CreateSession.
type CreateSessionRequest struct {
	App, User string
	// ID is the session id; empty lets the service choose one.
	ID          string
	DisplayName string
	Labels      map[string]string
	// State is the initial state; prefixed keys go to their scopes, "temp:"
	// keys are dropped.
	State map[string]any
	// ExpireTime or TTL (not both) make the session expire.
	ExpireTime time.Time
	TTL        time.Duration
}

// CreateSession creates a session and returns it with its merged state.
func (s *Service) CreateSession(ctx context.Context, r CreateSessionRequest) (*sessiontype.Session, error) {
	now := s.now()
	key := sessiontype.Key{App: r.App, User: r.User, ID: r.ID}
	if key.ID == "" {
		key.ID = s.newID()
	}
	if err := ValidateKey(key); err != nil {
		return nil, err
	}
	if err := validateDisplayName(r.DisplayName); err != nil {
		return nil, err
	}
	if err := s.limits.validateLabels(r.Labels); err != nil {
		return nil, err
	}
	if err := s.limits.validateDelta("session.state", r.State); err != nil {
		return nil, err
	}
	expire, err := unixnano.Expiry(now, r.ExpireTime, r.TTL, 0)
	if err != nil {
		return nil, err
	}
	d := sessiontype.SplitDelta(r.State)
	own := sessiontype.ApplyDelta(nil, d.Session)
	sess := &sessiontype.Session{
		Key:         key,
		DisplayName: r.DisplayName,
		Labels:      maps.Clone(r.Labels),
		State:       own,
		CreateTime:  now,
		UpdateTime:  now,
		ExpireTime:  expire,
	}
	if _, _, err := sessiondriver.UpdatedState(nil, own, "session", s.limits.MaxStateBytes); err != nil {
		return nil, err
	}
	err = s.store.CreateSession(ctx, &sessiondriver.CreateSessionParams{
		Session:       sess,
		InitialState:  own,
		User:          d.User,
		App:           d.App,
		MaxStateBytes: s.limits.MaxStateBytes,
	})
	if err != nil {
		return nil, err
	}
	got, _, err := s.store.GetSession(ctx, key, sessiondriver.EventQuery{Now: now, Skip: true})
	return got, err
}

// ForkSessionRequest is the input of ForkSession.
type ForkSessionRequest struct {
	// ID is the new session's id; empty lets the service choose.
	ID string
	// EventID is the last event to copy; empty copies all events.
	EventID     string
	DisplayName string
}

// ForkSession creates a session of the same user holding copies of the
// source's events up to and including r.EventID (ids, timestamps and
// sequences kept), with the session state as of that event: the source's
// initial state with the copied events' session-scope deltas applied. The
// "user:" and "app:" scopes are shared, not copied. Labels are copied;
// expiry is not.
func (s *Service) ForkSession(ctx context.Context, src sessiontype.Key, r ForkSessionRequest) (*sessiontype.Session, error) {
	if err := ValidateKey(src); err != nil {
		return nil, err
	}
	dst := sessiontype.Key{App: src.App, User: src.User, ID: r.ID}
	if dst.ID == "" {
		dst.ID = s.newID()
	}
	if err := ValidateKey(dst); err != nil {
		return nil, err
	}
	if err := validateDisplayName(r.DisplayName); err != nil {
		return nil, err
	}
	now := s.now()
	source, _, err := s.store.GetSession(ctx, src, sessiondriver.EventQuery{Now: now, Skip: true})
	if err != nil {
		return nil, err
	}
	upTo := source.LastSequence
	if r.EventID != "" {
		if err := resource.ValidateID("event_id", r.EventID, resource.EventIDChars); err != nil {
			return nil, err
		}
		ev, err := s.store.FindEvent(ctx, src, r.EventID, now)
		if err != nil {
			return nil, err
		}
		upTo = ev.Sequence
	}
	if upTo > int64(s.limits.MaxForkEvents) {
		return nil, fault.New(fault.ResourceExhausted, "fork would copy %d events; the limit is %d (MaxForkEvents)", upTo, s.limits.MaxForkEvents)
	}
	events := make([]*sessiontype.Event, 0, upTo)
	state := maps.Clone(source.InitialState)
	for cursor := int64(0); cursor < upTo; {
		page, err := s.store.ListEvents(ctx, src, sessiondriver.EventQuery{Now: now, AfterSeq: cursor, BeforeSeq: upTo + 1, Limit: 1000})
		if err != nil {
			return nil, err
		}
		if len(page) == 0 {
			break
		}
		for _, e := range page {
			state = sessiontype.ApplyDelta(state, sessiontype.SplitDelta(e.Actions.StateDelta).Session)
		}
		events = append(events, page...)
		cursor = page[len(page)-1].Sequence
	}
	if int64(len(events)) != upTo {
		return nil, fault.New(fault.Aborted, "session %s changed while forking; retry", src.Name())
	}
	sess := &sessiontype.Session{
		Key:          dst,
		DisplayName:  r.DisplayName,
		Labels:       source.Labels,
		State:        state,
		CreateTime:   now,
		UpdateTime:   now,
		LastSequence: upTo,
	}
	for _, e := range events {
		if c := e.Actions.Compaction; c != nil && c.EndSequence > sess.CompactedThrough {
			sess.CompactionSequence, sess.CompactedThrough = e.Sequence, c.EndSequence
		}
	}
	err = s.store.CreateSession(ctx, &sessiondriver.CreateSessionParams{
		Session:       sess,
		InitialState:  source.InitialState,
		Events:        events,
		MaxStateBytes: s.limits.MaxStateBytes,
	})
	if err != nil {
		return nil, err
	}
	if len(events) > 0 {
		s.kickIndexer()
	}
	got, _, err := s.store.GetSession(ctx, dst, sessiondriver.EventQuery{Now: now, Skip: true})
	return got, err
}
