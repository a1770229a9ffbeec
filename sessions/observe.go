package sessions

import (
	"context"
	"fmt"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Notice tells an Observer what happened to a session: events were
// appended to it, or it was deleted. Notices are small (no event bodies):
// an observer that needs the events reads them from the Service.
type Notice struct {
	Key sessiontype.Key
	// Sequence and Time are the sequence and timestamp of the latest event
	// appended (zero for a deletion).
	Sequence int64
	Time     time.Time
	// Appends is how many appends the notice stands for: the notices of
	// one session merge while they wait for the observer. Bytes is the
	// sum of those events' encoded sizes.
	Appends int
	Bytes   int64
	// Deleted reports that the session was deleted through the Service.
	// A deletion replaces the appends waiting before it.
	Deleted bool
}

// Observer is told of the appends and deletions made through a Service,
// after they are durable, on a goroutine of its own: an observer never
// delays an append, and a slow one delays no other observer.
type Observer interface {
	Observe(ctx context.Context, n Notice)
}

// ObserverFunc adapts a function to Observer.
type ObserverFunc func(ctx context.Context, n Notice)

// Observe calls f.
func (f ObserverFunc) Observe(ctx context.Context, n Notice) { f(ctx, n) }

// DefaultObserverQueue is the default bound of an observer's queue, in
// sessions with a notice waiting.
const DefaultObserverQueue = 10_000

// ObserveOptions tune one observer.
type ObserveOptions struct {
	// Queue bounds the sessions with a notice waiting for the observer
	// (DefaultObserverQueue when zero). The notices of one session merge
	// into one, so the queue fills only when more sessions than this
	// change while the observer is busy; a notice that finds the queue full
	// is dropped and counted (ObserverStats.Dropped). Observers must
	// therefore not need every notice: a later append to the session
	// brings its state again (its Sequence), and a server restart loses
	// every waiting notice anyway.
	Queue int
}

// ObserverStats are an observer's counts since it was added.
type ObserverStats struct {
	Name string
	// Waiting is how many sessions have a notice waiting now.
	Waiting int
	// Delivered and Dropped count notices handed to the observer and
	// dropped because its queue was full.
	Delivered, Dropped uint64
}

// observation is one observer with its queue: a map of waiting notices by
// session and their arrival order.
type observation struct {
	name string
	o    Observer
	max  int
	log  *slog.Logger

	mu      sync.Mutex
	waiting map[sessiontype.Key]*Notice
	order   []sessiontype.Key
	wake    chan struct{}

	delivered, dropped atomic.Uint64
}

// Observe adds an observer named name (for metrics and logs) and delivers
// notices to it on a goroutine of its own until ctx ends. Notices of
// appends and deletions made before the call are not delivered.
func (s *Service) Observe(ctx context.Context, name string, o Observer, opts ObserveOptions) {
	if opts.Queue <= 0 {
		opts.Queue = DefaultObserverQueue
	}
	ob := &observation{name: name, o: o, max: opts.Queue, log: s.log, waiting: map[sessiontype.Key]*Notice{}, wake: make(chan struct{}, 1)}
	s.obsMu.Lock()
	s.observers = append(s.observers, ob)
	s.obsMu.Unlock()
	go func() {
		defer func() {
			s.obsMu.Lock()
			s.observers = slices.DeleteFunc(s.observers, func(x *observation) bool { return x == ob })
			s.obsMu.Unlock()
		}()
		ob.run(ctx)
	}()
}

// Observers returns the counts of the observers added, by name.
func (s *Service) Observers() []ObserverStats {
	s.obsMu.Lock()
	obs := slices.Clone(s.observers)
	s.obsMu.Unlock()
	out := make([]ObserverStats, len(obs))
	for i, ob := range obs {
		ob.mu.Lock()
		out[i] = ObserverStats{Name: ob.name, Waiting: len(ob.waiting), Delivered: ob.delivered.Load(), Dropped: ob.dropped.Load()}
		ob.mu.Unlock()
	}
	slices.SortFunc(out, func(a, b ObserverStats) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// notify queues a notice for every observer. It never blocks on one.
func (s *Service) notify(n Notice) {
	s.obsMu.Lock()
	obs := s.observers
	s.obsMu.Unlock()
	for _, ob := range obs {
		ob.offer(n)
	}
}

// offer queues n, merged with a notice of the same session that waits.
func (ob *observation) offer(n Notice) {
	ob.mu.Lock()
	if w := ob.waiting[n.Key]; w != nil {
		switch {
		case n.Deleted:
			*w = n
		case w.Deleted:
			// Appended again after a deletion: the new session's appends.
			*w = n
		default:
			w.Appends += n.Appends
			w.Bytes += n.Bytes
			if n.Sequence > w.Sequence {
				w.Sequence, w.Time = n.Sequence, n.Time
			}
		}
		ob.mu.Unlock()
		return
	}
	if len(ob.waiting) >= ob.max {
		ob.mu.Unlock()
		ob.dropped.Add(1)
		return
	}
	c := n
	ob.waiting[n.Key] = &c
	ob.order = append(ob.order, n.Key)
	ob.mu.Unlock()
	select {
	case ob.wake <- struct{}{}:
	default:
	}
}

// next removes and returns the oldest waiting notice.
func (ob *observation) next() (Notice, bool) {
	ob.mu.Lock()
	defer ob.mu.Unlock()
	if len(ob.order) == 0 {
		return Notice{}, false
	}
	k := ob.order[0]
	ob.order[0] = sessiontype.Key{}
	ob.order = ob.order[1:]
	if len(ob.order) == 0 {
		ob.order = nil // let the backing array go
	}
	n := ob.waiting[k]
	delete(ob.waiting, k)
	return *n, true
}

func (ob *observation) run(ctx context.Context) {
	for {
		for ctx.Err() == nil {
			n, ok := ob.next()
			if !ok {
				break
			}
			ob.deliver(ctx, n)
		}
		select {
		case <-ctx.Done():
			return
		case <-ob.wake:
		}
	}
}

// deliver calls the observer; a panic is logged, not fatal to the server.
func (ob *observation) deliver(ctx context.Context, n Notice) {
	defer func() {
		if r := recover(); r != nil {
			ob.log.ErrorContext(ctx, "session observer panicked", "observer", ob.name, "session", n.Key.Name(), "panic", fmt.Sprint(r))
		}
	}()
	ob.delivered.Add(1)
	ob.o.Observe(ctx, n)
}
