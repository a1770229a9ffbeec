package sessions

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
)

// CompactionTrigger compacts an app's sessions without the caller asking:
// once EventCount events, or EventBytes bytes of events, have been appended
// to a session since its last compaction (0: off).
type CompactionTrigger struct {
	EventCount int
	// EventBytes is counted in memory by the server the appends went
	// through; a restart starts the count again.
	EventBytes int64
	// KeepRecent is the compaction's KeepRecent (0: its default).
	KeepRecent int
}

// Validate checks a trigger.
func (t CompactionTrigger) Validate() error {
	if t.EventCount < 0 || t.EventBytes < 0 || t.KeepRecent < 0 {
		return fault.Invalidf("compaction_trigger values must not be negative")
	}
	return nil
}

// compactionFiredTTL is how long a fired trigger is remembered when its
// operation's end is not seen here (it ran on another server), and how
// long a session without appends keeps its count.
const compactionFiredTTL = time.Hour

// CompactionTriggers applies the apps' compaction triggers to the appends
// made through a Service: an Observer of it (see Service.Observe), which
// queues a compaction of a session through Queue once its app's trigger
// says so, and none other for the session until that one ends (Ended) or
// an hour passes. Problems are logged.
type CompactionTriggers struct {
	svc    *Service
	config func(ctx context.Context, app string) (CompactionTrigger, error)
	queue  func(ctx context.Context, key sessiontype.Key, keepRecent int) (string, error)

	mu       sync.Mutex
	sessions map[string]*compactionTracker
	pruned   time.Time
}

// compactionTracker is what the compaction triggers know of a session.
type compactionTracker struct {
	// bytes appended through this server since its last compaction.
	bytes int64
	// fired is the operation queued and not ended yet ("" when none), and
	// when it was queued.
	fired string
	at    time.Time
	// seen is when the tracker last changed, to forget idle sessions.
	seen time.Time
}

// CompactionTriggers returns the compaction triggers of the service's
// sessions: config returns an app's trigger (the zero trigger when it has
// none), and queue queues the compaction of a session, keeping keepRecent
// events out of it, and returns the operation's name.
func (s *Service) CompactionTriggers(config func(ctx context.Context, app string) (CompactionTrigger, error), queue func(ctx context.Context, key sessiontype.Key, keepRecent int) (string, error)) *CompactionTriggers {
	return &CompactionTriggers{svc: s, config: config, queue: queue, sessions: map[string]*compactionTracker{}}
}

// Observe implements Observer: once EventCount events (counted by the
// service since the session's latest compaction) or EventBytes bytes
// (counted here) are reached, it queues a compaction.
func (c *CompactionTriggers) Observe(ctx context.Context, n Notice) {
	name := n.Key.Name()
	now := c.svc.now()
	c.prune(now)
	if n.Deleted {
		c.mu.Lock()
		delete(c.sessions, name)
		c.mu.Unlock()
		return
	}
	t, err := c.config(ctx, n.Key.App)
	if err != nil {
		c.svc.log.WarnContext(ctx, "reading the compaction trigger", "app", n.Key.App, "error", err)
		return
	}
	if t.EventCount <= 0 && t.EventBytes <= 0 || c.svc.gen == nil {
		return
	}
	c.mu.Lock()
	tr := c.sessions[name]
	if tr == nil {
		tr = &compactionTracker{}
		c.sessions[name] = tr
	}
	tr.bytes += n.Bytes
	tr.seen = now
	if tr.fired != "" && now.Sub(tr.at) < compactionFiredTTL {
		c.mu.Unlock()
		return
	}
	bytes := tr.bytes
	c.mu.Unlock()

	why := ""
	if t.EventBytes > 0 && bytes >= t.EventBytes {
		why = "every " + strconv.FormatInt(t.EventBytes, 10) + " bytes"
	} else if t.EventCount > 0 {
		since, err := c.svc.EventsSinceCompaction(ctx, n.Key)
		if err != nil {
			c.svc.log.WarnContext(ctx, "reading a session for the compaction trigger", "session", name, "error", err)
			return
		}
		if since >= int64(t.EventCount) {
			why = "every " + strconv.Itoa(t.EventCount) + " events"
		}
	}
	if why == "" {
		return
	}
	op, err := c.queue(context.WithoutCancel(ctx), n.Key, t.KeepRecent)
	if err != nil {
		c.svc.log.WarnContext(ctx, "queueing a triggered compaction", "session", name, "error", err)
		return
	}
	c.mu.Lock()
	if tr := c.sessions[name]; tr != nil {
		tr.fired, tr.at, tr.bytes = op, now, 0
	}
	c.mu.Unlock()
	c.svc.log.InfoContext(ctx, "session compaction triggered", "session", name, "trigger", why, "operation", op)
}

// Ended lets the triggers queue the next compaction of a session whose
// compaction operation ended (its resource name).
func (c *CompactionTriggers) Ended(key sessiontype.Key, operation string) {
	c.mu.Lock()
	if tr := c.sessions[key.Name()]; tr != nil && tr.fired == operation {
		tr.fired, tr.bytes = "", 0
	}
	c.mu.Unlock()
}

// prune forgets, at most once a minute, the sessions that have seen no
// append for compactionFiredTTL.
func (c *CompactionTriggers) prune(now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if now.Sub(c.pruned) < time.Minute {
		return
	}
	c.pruned = now
	for name, tr := range c.sessions {
		if now.Sub(tr.seen) >= compactionFiredTTL {
			delete(c.sessions, name)
		}
	}
}
