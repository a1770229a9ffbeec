package sessions

import (
	"context"
	"time"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/sessions/sessiondriver"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
)

// Watch calls send for every event appended to the session after the call,
// in sequence order, until ctx is done (it then returns ctx's error), send
// fails, or the session is deleted or expires (it then returns nil). With
// after set it first sends the stored events whose sequence is greater than
// *after.
func (s *Service) Watch(ctx context.Context, key sessiontype.Key, after *int64, send func(*sessiontype.Event) error) error {
	if err := ValidateKey(key); err != nil {
		return err
	}
	if after != nil && *after < 0 {
		return fault.Invalidf("after_sequence must not be negative")
	}
	wake, cancel := s.broker.Subscribe(key)
	defer cancel()
	sess, _, err := s.store.GetSession(ctx, key, sessiondriver.EventQuery{Now: s.now(), Skip: true})
	if err != nil {
		return err
	}
	cursor := sess.LastSequence
	if after != nil {
		cursor = *after
	}
	ticker := time.NewTicker(s.poll)
	defer ticker.Stop()
	const page = 100
	for {
		events, err := s.store.ListEvents(ctx, key, sessiondriver.EventQuery{Now: s.now(), AfterSeq: cursor, Limit: page})
		if fault.Is(err, fault.NotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		for _, e := range events {
			if err := send(e); err != nil {
				return err
			}
			cursor = e.Sequence
		}
		if len(events) == page {
			continue
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-wake:
		case <-ticker.C:
		}
	}
}
