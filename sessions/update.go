package sessions

import (
	"context"
	"time"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/unixnano"
	"github.com/kioku-ai/kioku/resource"
	"github.com/kioku-ai/kioku/sessions/sessiondriver"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
)

// UpdateSessionRequest lists the fields to change; nil fields stay.
type UpdateSessionRequest struct {
	DisplayName *string
	Labels      *map[string]string
	// ExpireTime sets the expiry (pointer to zero: never expires); TTL sets
	// it relative to now. Not both.
	ExpireTime *time.Time
	TTL        *time.Duration
}

// UpdateSession changes a session's metadata and returns it with its merged
// state.
func (s *Service) UpdateSession(ctx context.Context, key sessiontype.Key, r UpdateSessionRequest) (*sessiontype.Session, error) {
	if err := ValidateKey(key); err != nil {
		return nil, err
	}
	now := s.now()
	u := &sessiondriver.UpdateSessionParams{Now: now, DisplayName: r.DisplayName, Labels: r.Labels}
	if r.DisplayName != nil {
		if err := validateDisplayName(*r.DisplayName); err != nil {
			return nil, err
		}
	}
	if r.Labels != nil {
		if err := s.limits.validateLabels(*r.Labels); err != nil {
			return nil, err
		}
	}
	if r.ExpireTime != nil || r.TTL != nil {
		var at time.Time
		var ttl time.Duration
		if r.ExpireTime != nil {
			at = *r.ExpireTime
		}
		if r.TTL != nil {
			ttl = *r.TTL
			if ttl == 0 {
				return nil, fault.Invalidf("ttl must be positive; to remove the expiry set expire_time to nothing")
			}
		}
		e, err := unixnano.Expiry(now, at, ttl, 0)
		if err != nil {
			return nil, err
		}
		u.ExpireTime = &e
	}
	if _, err := s.store.UpdateSession(ctx, key, u); err != nil {
		return nil, err
	}
	got, _, err := s.store.GetSession(ctx, key, sessiondriver.EventQuery{Now: now, Skip: true})
	return got, err
}

// DeleteSession deletes a session and its events. Watchers of the session
// see their streams end; observers are told.
func (s *Service) DeleteSession(ctx context.Context, key sessiontype.Key) error {
	if err := ValidateKey(key); err != nil {
		return err
	}
	if err := s.store.DeleteSession(ctx, key, s.now()); err != nil {
		return err
	}
	s.broker.Notify(key)
	s.notify(Notice{Key: key, Deleted: true})
	return nil
}

// DeleteUser deletes everything the session store holds about a user of
// an app, for a data-subject request: every session of the user (expired
// ones too) with its events and search entries, then the "user:" scope
// and the user's search statistics (sessiondriver.Eraser). Watchers of the
// sessions see their streams end; observers are told of each deletion. It
// returns how many sessions it deleted; calling it again finishes an
// erasure that stopped. Sessions created while it runs may be left:
// revoke the user's keys first.
func (s *Service) DeleteUser(ctx context.Context, app, user string) (int, error) {
	if err := resource.ValidateID("app id", app, resource.AppIDChars); err != nil {
		return 0, err
	}
	if err := resource.ValidateID("user id", user, resource.UserIDChars); err != nil {
		return 0, err
	}
	eraser, ok := s.store.(sessiondriver.Eraser)
	if !ok {
		return 0, fault.New(fault.Unimplemented, "this session store does not erase users (sessiondriver.Eraser)")
	}
	n := 0
	for {
		keys, err := eraser.EraseUser(ctx, app, user, 100)
		for _, key := range keys {
			s.broker.Notify(key)
			s.notify(Notice{Key: key, Deleted: true})
		}
		n += len(keys)
		if err != nil || len(keys) == 0 {
			return n, err
		}
	}
}
