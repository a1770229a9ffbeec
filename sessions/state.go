package sessions

import (
	"context"
	"encoding/json"
	"maps"
	"strings"
	"time"

	"github.com/kioku-ai/kioku/fault"
)

// The state key prefixes that choose a key's scope.
const (
	PrefixApp  = "app:"
	PrefixUser = "user:"
	PrefixTemp = "temp:"
)

// Scope is where a state key lives.
type Scope int

// The scopes, chosen by a key's prefix.
const (
	ScopeSession Scope = iota // no prefix
	ScopeUser                 // "user:"
	ScopeApp                  // "app:"
	ScopeTemp                 // "temp:", never stored
)

// ScopeOf returns the scope of a state key.
func ScopeOf(key string) Scope {
	switch {
	case strings.HasPrefix(key, PrefixApp):
		return ScopeApp
	case strings.HasPrefix(key, PrefixUser):
		return ScopeUser
	case strings.HasPrefix(key, PrefixTemp):
		return ScopeTemp
	}
	return ScopeSession
}

// Deltas is a state delta split by scope. Temp keys are dropped. Keys keep
// their prefixes; a nil value deletes the key.
type Deltas struct {
	Session map[string]any
	User    map[string]any
	App     map[string]any
}

// Empty reports whether no scope changes.
func (d Deltas) Empty() bool {
	return len(d.Session) == 0 && len(d.User) == 0 && len(d.App) == 0
}

// SplitDelta splits a delta by scope, dropping "temp:" keys.
func SplitDelta(delta map[string]any) Deltas {
	var d Deltas
	for k, v := range delta {
		var m *map[string]any
		switch ScopeOf(k) {
		case ScopeSession:
			m = &d.Session
		case ScopeUser:
			m = &d.User
		case ScopeApp:
			m = &d.App
		default:
			continue
		}
		if *m == nil {
			*m = make(map[string]any)
		}
		(*m)[k] = v
	}
	return d
}

// StripTemp returns delta without its "temp:" keys; delta itself when it has
// none.
func StripTemp(delta map[string]any) map[string]any {
	n := 0
	for k := range delta {
		if ScopeOf(k) == ScopeTemp {
			n++
		}
	}
	if n == 0 {
		return delta
	}
	out := make(map[string]any, len(delta)-n)
	for k, v := range delta {
		if ScopeOf(k) != ScopeTemp {
			out[k] = v
		}
	}
	return out
}

// ApplyDelta returns state with delta applied: each value replaces the old
// one whole, and a nil value deletes the key. state is not modified.
func ApplyDelta(state, delta map[string]any) map[string]any {
	out := make(map[string]any, len(state)+len(delta))
	maps.Copy(out, state)
	for k, v := range delta {
		if v == nil {
			delete(out, k)
		} else {
			out[k] = v
		}
	}
	return out
}

// UpdatedState applies delta to a scope's state (ApplyDelta) and encodes
// the result (EncodeState); an encoding over max bytes is
// RESOURCE_EXHAUSTED, naming the scope ("session", "user", "app").
func UpdatedState(old, delta map[string]any, scope string, max int) (map[string]any, []byte, error) {
	st := ApplyDelta(old, delta)
	enc, err := EncodeState(st)
	if err != nil {
		return nil, nil, err
	}
	if len(enc) > max {
		return nil, nil, StateTooLarge(scope, len(enc), max)
	}
	return st, enc, nil
}

// Merge returns the merged view of the three scopes.
func Merge(session, user, app map[string]any) map[string]any {
	out := make(map[string]any, len(session)+len(user)+len(app))
	maps.Copy(out, session)
	maps.Copy(out, user)
	maps.Copy(out, app)
	return out
}

// EncodeState returns the stored encoding of a scope's state.
func EncodeState(state map[string]any) ([]byte, error) {
	if len(state) == 0 {
		return []byte("{}"), nil
	}
	return json.Marshal(state)
}

// DecodeState decodes a scope's state stored with EncodeState.
func DecodeState(b []byte) (map[string]any, error) {
	if len(b) == 0 {
		return map[string]any{}, nil
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	if m == nil {
		m = map[string]any{}
	}
	return m, nil
}

// SharedState is a "user:" or "app:" scope's state.
type SharedState struct {
	Ref        StateRef
	State      map[string]any
	UpdateTime time.Time
}

// GetState returns a shared scope's state.
func (s *Service) GetState(ctx context.Context, ref StateRef) (*SharedState, error) {
	if err := validateRef(ref); err != nil {
		return nil, err
	}
	st, t, err := s.store.GetState(ctx, ref)
	if err != nil {
		return nil, err
	}
	return &SharedState{Ref: ref, State: st, UpdateTime: t}, nil
}

// UpdateState applies a delta to a shared scope. Every key must carry the
// scope's prefix.
func (s *Service) UpdateState(ctx context.Context, ref StateRef, delta map[string]any) (*SharedState, error) {
	if err := validateRef(ref); err != nil {
		return nil, err
	}
	if err := s.limits.validateDelta("state_delta", delta); err != nil {
		return nil, err
	}
	want := ScopeApp
	if ref.User != "" {
		want = ScopeUser
	}
	for k := range delta {
		if ScopeOf(k) != want {
			return nil, fault.Invalidf("state_delta key %q does not start with %q, the prefix of this scope", k, ref.Prefix())
		}
	}
	st, t, err := s.store.UpdateState(ctx, &StateUpdate{Ref: ref, Delta: delta, Now: s.now(), MaxStateBytes: s.limits.MaxStateBytes})
	if err != nil {
		return nil, err
	}
	return &SharedState{Ref: ref, State: st, UpdateTime: t}, nil
}
