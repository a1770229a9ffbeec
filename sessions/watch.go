package sessions

import (
	"context"
	"sync"
	"time"

	"github.com/kioku-ai/kioku/fault"
)

// broker wakes the watchers of a session when this process appends to it or
// deletes it. Watchers also poll, for changes made by other servers.
type broker struct {
	mu   sync.Mutex
	subs map[Key]map[chan struct{}]struct{}
}

func newBroker() *broker {
	return &broker{subs: make(map[Key]map[chan struct{}]struct{})}
}

func (b *broker) subscribe(key Key) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	b.mu.Lock()
	set := b.subs[key]
	if set == nil {
		set = make(map[chan struct{}]struct{})
		b.subs[key] = set
	}
	set[ch] = struct{}{}
	b.mu.Unlock()
	return ch, func() {
		b.mu.Lock()
		delete(set, ch)
		if len(set) == 0 {
			delete(b.subs, key)
		}
		b.mu.Unlock()
	}
}

func (b *broker) notify(key Key) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for ch := range b.subs[key] {
		select {
		case ch <- struct{}{}:
		default: // a wake-up is already pending
		}
	}
}

// Watch calls send for every event appended to the session after the call,
// in sequence order, until ctx is done (it then returns ctx's error), send
// fails, or the session is deleted or expires (it then returns nil). With
// after set it first sends the stored events whose sequence is greater than
// *after.
func (s *Service) Watch(ctx context.Context, key Key, after *int64, send func(*Event) error) error {
	if err := ValidateKey(key); err != nil {
		return err
	}
	if after != nil && *after < 0 {
		return fault.Invalidf("after_sequence must not be negative")
	}
	wake, cancel := s.broker.subscribe(key)
	defer cancel()
	sess, _, err := s.store.GetSession(ctx, key, EventQuery{Now: s.now(), Skip: true})
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
		events, err := s.store.ListEvents(ctx, key, EventQuery{Now: s.now(), AfterSeq: cursor, Limit: page})
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
