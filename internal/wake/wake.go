// Package wake wakes the watchers of a key (a session, an app's change
// feed) when this process changes what the key names. A wake-up only says
// "look again": watchers read the store themselves, and also poll it for
// the changes of other servers.
package wake

import "sync"

// Broker holds the watchers of each key.
type Broker[K comparable] struct {
	mu   sync.Mutex
	subs map[K]map[chan struct{}]struct{}
}

// New returns a Broker with no watchers.
func New[K comparable]() *Broker[K] {
	return &Broker[K]{subs: map[K]map[chan struct{}]struct{}{}}
}

// Subscribe returns a channel that receives a value after each Notify of
// key (wake-ups that arrive while one is pending merge into it), and the
// function that ends the subscription.
func (b *Broker[K]) Subscribe(key K) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	b.mu.Lock()
	set := b.subs[key]
	if set == nil {
		set = map[chan struct{}]struct{}{}
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

// Notify wakes every watcher of key, without blocking.
func (b *Broker[K]) Notify(key K) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for ch := range b.subs[key] {
		select {
		case ch <- struct{}{}:
		default: // a wake-up is already pending
		}
	}
}
