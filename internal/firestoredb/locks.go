package firestoredb

import (
	"context"
	"sync"

	"github.com/kioku-ai/kioku/fault"
)

// Locks serialises one process's transactions on a document: they queue
// on the document's lock in the process instead of conflicting in
// Firestore, whose pessimistic transactions lock what they read, so that
// two that read a document and then write it wait on each other (the
// emulator until its lock timeout, 2 s). Transactions of other servers
// still conflict and are retried. The zero Locks is ready to use.
type Locks struct {
	mu    sync.Mutex
	locks map[string]*docLock
}

// docLock is a lock that a waiter can give up on: its channel holds a
// token while the lock is free.
type docLock struct {
	free chan struct{}
	refs int
}

// Lock takes the locks of keys, one after the other in their order (so
// callers that order their keys alike cannot deadlock), waiting at most
// until ctx is done: then it returns ctx's error as a domain error, saying
// that it waited for what, and holds nothing. The function it returns
// gives the locks back.
func (l *Locks) Lock(ctx context.Context, what string, keys ...string) (func(), error) {
	var unlock []func()
	release := func() {
		for i := len(unlock) - 1; i >= 0; i-- {
			unlock[i]()
		}
	}
	for _, k := range keys {
		u, err := l.lock(ctx, what, k)
		if err != nil {
			release()
			return nil, err
		}
		unlock = append(unlock, u)
	}
	return release, nil
}

func (l *Locks) lock(ctx context.Context, what, key string) (func(), error) {
	l.mu.Lock()
	if l.locks == nil {
		l.locks = map[string]*docLock{}
	}
	d := l.locks[key]
	if d == nil {
		d = &docLock{free: make(chan struct{}, 1)}
		d.free <- struct{}{}
		l.locks[key] = d
	}
	d.refs++
	l.mu.Unlock()
	drop := func() {
		l.mu.Lock()
		if d.refs--; d.refs == 0 {
			delete(l.locks, key)
		}
		l.mu.Unlock()
	}
	select {
	case <-d.free:
	case <-ctx.Done():
		drop()
		return nil, fault.Wrap(fault.KindOf(ctx.Err()), ctx.Err(), "waiting for %s", what)
	}
	return func() {
		d.free <- struct{}{}
		drop()
	}, nil
}
