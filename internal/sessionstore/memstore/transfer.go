package memstore

import (
	"bytes"
	"context"
	"maps"
	"slices"
	"time"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/sessions/sessiondriver"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
)

// Apps implements sessiondriver.Transferer: the apps that hold a session
// or a shared scope.
func (s *Store) Apps(_ context.Context, after string, limit int) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for id, a := range s.apps {
		if id > after && (len(a.sessions) > 0 || len(a.users) > 0 || a.state != nil) {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out[:min(len(out), limit)], nil
}

// ScanSessions implements sessiondriver.Transferer.
func (s *Store) ScanSessions(_ context.Context, p sessiondriver.ScanSessionsParams) ([]*sessiontype.Session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.apps[p.App]
	if a == nil {
		return nil, nil
	}
	var ids []string
	for id, ss := range a.sessions {
		if id > p.AfterID && (p.User == "" || ss.meta.User == p.User) && !ss.meta.Expired(p.Now) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	out := make([]*sessiontype.Session, 0, min(len(ids), p.Limit))
	for _, id := range ids[:min(len(ids), p.Limit)] {
		out = append(out, a.sessions[id].view(true))
	}
	return out, nil
}

// ScanUserStates implements sessiondriver.Transferer.
func (s *Store) ScanUserStates(_ context.Context, app, after string, limit int) ([]*sessiontype.SharedState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.apps[app]
	if a == nil {
		return nil, nil
	}
	var users []string
	for u := range a.users {
		if u > after {
			users = append(users, u)
		}
	}
	slices.Sort(users)
	var out []*sessiontype.SharedState
	for _, u := range users[:min(len(users), limit)] {
		sc := a.users[u]
		out = append(out, &sessiontype.SharedState{Ref: sessiontype.StateRef{App: app, User: u}, State: decodeState(sc.state), UpdateTime: sc.update})
	}
	return out, nil
}

// ImportSession implements sessiondriver.Transferer.
func (s *Store) ImportSession(_ context.Context, in *sessiontype.Session, now time.Time) (bool, error) {
	state, err := sessiondriver.EncodeState(in.State)
	if err != nil {
		return false, err
	}
	initial, err := sessiondriver.EncodeState(in.InitialState)
	if err != nil {
		return false, err
	}
	meta := *in
	meta.State, meta.InitialState = nil, nil
	meta.Labels = maps.Clone(in.Labels)
	if len(meta.Labels) == 0 {
		meta.Labels = nil
	}
	meta.CreateTime, meta.UpdateTime, meta.ExpireTime = norm(in.CreateTime), norm(in.UpdateTime), norm(in.ExpireTime)
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.appOf(in.App, true)
	old := a.sessions[in.ID]
	switch {
	case old == nil:
	case old.meta.Expired(now):
		a.remove(old)
		old = nil
	case old.meta.User != in.User || !old.meta.CreateTime.Equal(meta.CreateTime):
		return false, fault.New(fault.AlreadyExists, "session id %q of app %q is another session in this store (of user %q, created %v), not the archive's %s", in.ID, in.App, old.meta.User, old.meta.CreateTime, in.Name())
	case old.meta.LastSequence > in.LastSequence || old.meta.UpdateTime.After(meta.UpdateTime):
		return false, fault.New(fault.FailedPrecondition, "session %s moved on in this store (sequence %d, updated %v) past the archive's (sequence %d, updated %v)", in.Name(), old.meta.LastSequence, old.meta.UpdateTime, in.LastSequence, in.UpdateTime)
	default:
		o := &old.meta
		if o.UpdateTime.Equal(meta.UpdateTime) && o.ExpireTime.Equal(meta.ExpireTime) && o.LastSequence == meta.LastSequence &&
			o.DisplayName == meta.DisplayName && maps.Equal(o.Labels, meta.Labels) && bytes.Equal(old.state, state) &&
			bytes.Equal(old.initial, initial) && o.CompactionSequence == meta.CompactionSequence && o.CompactedThrough == meta.CompactedThrough {
			return false, nil
		}
		old.meta, old.state, old.initial = meta, state, initial
		old.events = append(old.events, make([]*event, int(meta.LastSequence)-len(old.events))...)
		return true, nil
	}
	a.sessions[in.ID] = &session{meta: meta, state: state, initial: initial, events: make([]*event, meta.LastSequence), byID: map[string]int64{}}
	return true, nil
}

// ImportEvents implements sessiondriver.Transferer: every event is checked
// before any is written.
func (s *Store) ImportEvents(_ context.Context, key sessiontype.Key, events []*sessiontype.Event, now time.Time) (int, error) {
	stored := make([]*event, len(events))
	for i, e := range events {
		var err error
		if stored[i], err = newEvent(e); err != nil {
			return 0, err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ss, err := s.visible(key, now)
	if err != nil {
		return 0, err
	}
	// What the batch writes, on top of what is stored.
	atSeq, seqOf := map[int64]string{}, map[string]int64{}
	var write []int
	for i, e := range events {
		if e.Sequence < 1 || e.Sequence > ss.meta.LastSequence {
			return 0, fault.Invalidf("event %q of session %s has sequence %d, outside the session's 1 to %d", e.ID, key.Name(), e.Sequence, ss.meta.LastSequence)
		}
		id, ok := atSeq[e.Sequence]
		if have := ss.events[e.Sequence-1]; have != nil {
			id, ok = have.id, true
		}
		switch {
		case ok && id == e.ID:
			continue
		case ok:
			return 0, fault.New(fault.AlreadyExists, "session %s holds event %q at sequence %d, not the archive's %q", key.Name(), id, e.Sequence, e.ID)
		}
		_, storedID := ss.byID[e.ID]
		if _, batchID := seqOf[e.ID]; storedID || batchID {
			return 0, fault.New(fault.AlreadyExists, "session %s holds event %q at another sequence than the archive's %d", key.Name(), e.ID, e.Sequence)
		}
		atSeq[e.Sequence], seqOf[e.ID] = e.ID, e.Sequence
		write = append(write, i)
	}
	a := s.apps[key.App]
	for _, i := range write {
		seq := events[i].Sequence
		ss.events[seq-1] = stored[i]
		ss.byID[events[i].ID] = seq
		a.index(ss, seq)
	}
	return len(write), nil
}

// ImportState implements sessiondriver.Transferer.
func (s *Store) ImportState(_ context.Context, st *sessiontype.SharedState) (bool, error) {
	enc, err := sessiondriver.EncodeState(st.State)
	if err != nil {
		return false, err
	}
	at := norm(st.UpdateTime)
	s.mu.Lock()
	defer s.mu.Unlock()
	if old := s.scopeOf(st.Ref); old != nil {
		switch {
		case old.update.After(at):
			return false, fault.New(fault.FailedPrecondition, "the state %s moved on in this store (updated %v) past the archive's (updated %v)", st.Ref.Name(), old.update, st.UpdateTime)
		case old.update.Equal(at) && bytes.Equal(old.state, enc):
			return false, nil
		}
	}
	s.setScope(st.Ref, &scope{state: enc, update: at})
	return true, nil
}

// EraseUser implements sessiondriver.Eraser.
func (s *Store) EraseUser(_ context.Context, app, user string, limit int) ([]sessiontype.Key, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.apps[app]
	if a == nil {
		return nil, nil
	}
	var keys []sessiontype.Key
	for _, ss := range a.sessions {
		if len(keys) == limit {
			break
		}
		if ss.meta.User == user {
			keys = append(keys, ss.meta.Key)
			a.remove(ss)
		}
	}
	if len(keys) == 0 {
		delete(a.users, user)
		delete(a.search, user)
	}
	return keys, nil
}
