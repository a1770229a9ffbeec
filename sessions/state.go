package sessions

import (
	"context"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/sessions/sessiondriver"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
)

// GetState returns a shared scope's state.
func (s *Service) GetState(ctx context.Context, ref sessiontype.StateRef) (*sessiontype.SharedState, error) {
	if err := validateRef(ref); err != nil {
		return nil, err
	}
	st, t, err := s.store.GetState(ctx, ref)
	if err != nil {
		return nil, err
	}
	return &sessiontype.SharedState{Ref: ref, State: st, UpdateTime: t}, nil
}

// UpdateState applies a delta to a shared scope. Every key must carry the
// scope's prefix.
func (s *Service) UpdateState(ctx context.Context, ref sessiontype.StateRef, delta map[string]any) (*sessiontype.SharedState, error) {
	if err := validateRef(ref); err != nil {
		return nil, err
	}
	if err := s.limits.validateDelta("state_delta", delta); err != nil {
		return nil, err
	}
	want := sessiontype.ScopeApp
	if ref.User != "" {
		want = sessiontype.ScopeUser
	}
	for k := range delta {
		if sessiontype.ScopeOf(k) != want {
			return nil, fault.Invalidf("state_delta key %q does not start with %q, the prefix of this scope", k, ref.Prefix())
		}
	}
	st, t, err := s.store.UpdateState(ctx, &sessiondriver.UpdateStateParams{Ref: ref, Delta: delta, Now: s.now(), MaxStateBytes: s.limits.MaxStateBytes})
	if err != nil {
		return nil, err
	}
	return &sessiontype.SharedState{Ref: ref, State: st, UpdateTime: t}, nil
}
