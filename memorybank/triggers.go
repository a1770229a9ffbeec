package memorybank

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/kioku-ai/kioku/jobs"
	"github.com/kioku-ai/kioku/sessions"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
)

// Observe implements sessions.Observer: the memory bank's generation
// triggers follow the appends and deletions of sessions. Package sessions
// calls it off the append path, so reading the app's configuration and the
// session's watermark here delays no append; problems are logged.
func (s *Service) Observe(ctx context.Context, n sessions.Notice) {
	name := n.Key.Name()
	if n.Deleted {
		s.forgetTrigger(name)
		s.idle.forget(name)
		return
	}
	cfg, err := s.config(ctx, n.Key.App)
	if err != nil {
		s.log.WarnContext(ctx, "reading memory bank config for triggers", "app", n.Key.App, "error", err)
		return
	}
	t := cfg.Trigger
	if t.IdleDuration > 0 {
		s.idle.touch(n.Key, n.Sequence, s.now())
	}
	if t.EventCount <= 0 {
		return
	}
	s.triggerMu.Lock()
	fired := s.triggered[name].sequence
	s.triggerMu.Unlock()
	if n.Sequence-fired < int64(t.EventCount) {
		return
	}
	wm, err := s.store.Watermark(ctx, n.Key.App, name)
	if err != nil {
		s.log.WarnContext(ctx, "reading watermark for triggers", "session", name, "error", err)
		return
	}
	if n.Sequence-max(wm, fired) < int64(t.EventCount) {
		return
	}
	s.fire(ctx, n.Key, n.Sequence, "every "+strconv.Itoa(t.EventCount)+" events")
}

// firedTrigger is a generation a trigger queued for a session: it keeps
// the count trigger from firing again while that generation waits.
type firedTrigger struct {
	sequence int64
	at       time.Time
}

// firedTTL is how long a fired trigger is remembered when its operation's
// end is not seen here (it ran on another server).
const firedTTL = time.Hour

// TriggerFunc is told of a trigger that fired for a session: the events
// the fired generation reads are those after sequence after (the
// session's watermark when it fired), up to sequence upTo. See OnTrigger.
type TriggerFunc func(ctx context.Context, key sessiontype.Key, after, upTo int64)

// OnTrigger registers fn, called each time a generation trigger fires for
// a session (the count trigger, or the idle trigger), after the
// generation is queued or refused. internal/workflow queues the
// background rewrite of the user's core memory blocks there. Call it
// before the triggers run; a later call replaces fn.
func (s *Service) OnTrigger(fn TriggerFunc) {
	s.triggerMu.Lock()
	s.onTrigger = fn
	s.triggerMu.Unlock()
}

// fire queues a generation from a session for a trigger, then tells the
// OnTrigger function. The session is remembered until the operation ends
// (generationEnded), the session is deleted, or firedTTL passes.
func (s *Service) fire(ctx context.Context, key sessiontype.Key, sequence int64, why string) {
	s.triggerMu.Lock()
	s.triggered[key.Name()] = firedTrigger{sequence: sequence, at: s.now()}
	then := s.onTrigger
	s.triggerMu.Unlock()
	if then != nil {
		wm, err := s.store.Watermark(ctx, key.App, key.Name())
		if err != nil {
			s.log.WarnContext(ctx, "reading watermark for triggers", "session", key.Name(), "error", err)
		}
		defer then(context.WithoutCancel(ctx), key, wm, sequence)
	}
	op, err := s.GenerateMemories(context.WithoutCancel(ctx), &GenerateRequest{App: key.App, Session: &key})
	if err != nil {
		s.forgetTrigger(key.Name())
		s.log.WarnContext(ctx, "queueing triggered memory generation", "session", key.Name(), "error", err)
		return
	}
	s.log.InfoContext(ctx, "memory generation triggered", "session", key.Name(), "trigger", why, "operation", op.Name())
}

// generationEnded forgets the trigger of the session a generation that
// ended on this process read (the jobs engine calls it).
func (s *Service) generationEnded(op *jobs.Operation) {
	g, err := decodeGenerate(op)
	if err != nil || g.Session == nil {
		return
	}
	s.forgetTrigger(g.Session.Name())
}

func (s *Service) forgetTrigger(session string) {
	s.triggerMu.Lock()
	delete(s.triggered, session)
	s.triggerMu.Unlock()
}

// pruneTriggers forgets fired triggers older than firedTTL.
func (s *Service) pruneTriggers(now time.Time) {
	s.triggerMu.Lock()
	defer s.triggerMu.Unlock()
	for name, f := range s.triggered {
		if now.Sub(f.at) >= firedTTL {
			delete(s.triggered, name)
		}
	}
}

// TriggerSessions returns how many sessions the triggers remember: those
// timed for the idle trigger and those whose triggered generation has not
// ended yet.
func (s *Service) TriggerSessions() (idle, fired int) {
	s.triggerMu.Lock()
	fired = len(s.triggered)
	s.triggerMu.Unlock()
	s.idle.mu.Lock()
	idle = len(s.idle.last)
	s.idle.mu.Unlock()
	return idle, fired
}

// maxIdleRecovery bounds the sessions per app that RecoverIdle looks at.
const maxIdleRecovery = 10000

// RecoverIdle re-arms the idle triggers when a server starts (Run calls
// it): for each app with an idle trigger, the sessions updated since the
// trigger was configured that still have events the memory bank has not
// processed are timed from their last update. A session that went idle
// while no server ran, or whose server stopped before its timer fired, so
// still gets its memories. It looks at the most recently updated
// maxIdleRecovery sessions of each app.
func (s *Service) RecoverIdle(ctx context.Context) error {
	if s.sess == nil {
		return nil
	}
	cfgs, err := s.store.ListConfigs(ctx)
	if err != nil {
		return err
	}
	for _, c := range cfgs {
		if c.Trigger.IdleDuration <= 0 {
			continue
		}
		token, seen := "", 0
	pages:
		for {
			list, next, err := s.sess.ListSessions(ctx, sessions.ListSessionsRequest{App: c.App, PageSize: 100, PageToken: token})
			if err != nil {
				return err
			}
			for _, ss := range list {
				if ss.UpdateTime.Before(c.UpdateTime) || seen == maxIdleRecovery {
					break pages
				}
				seen++
				wm, err := s.store.Watermark(ctx, c.App, ss.Key.Name())
				if err != nil {
					return err
				}
				if ss.LastSequence > wm {
					s.idle.touch(ss.Key, ss.LastSequence, ss.UpdateTime)
				}
			}
			if next == "" {
				break
			}
			token = next
		}
	}
	return nil
}

// idleSessions remembers the last append of each session of apps with an
// idle trigger. It lives in memory, re-armed from the stores by
// RecoverIdle when a server starts.
type idleSessions struct {
	mu   sync.Mutex
	last map[string]idleEntry
}

type idleEntry struct {
	key      sessiontype.Key
	sequence int64
	at       time.Time
}

func (i *idleSessions) forget(name string) {
	i.mu.Lock()
	delete(i.last, name)
	i.mu.Unlock()
}

func (i *idleSessions) touch(key sessiontype.Key, seq int64, now time.Time) {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.last == nil {
		i.last = map[string]idleEntry{}
	}
	i.last[key.Name()] = idleEntry{key: key, sequence: seq, at: now}
}

// due removes and returns the sessions idle for at least idle(app).
func (i *idleSessions) due(now time.Time, idle func(app string) time.Duration) []idleEntry {
	i.mu.Lock()
	defer i.mu.Unlock()
	var out []idleEntry
	for name, e := range i.last {
		if d := idle(e.key.App); d > 0 && now.Sub(e.at) >= d {
			out = append(out, e)
			delete(i.last, name)
		}
	}
	return out
}

// FireIdle queues generations for sessions idle long enough. Run calls it
// on every maintenance tick.
func (s *Service) FireIdle(ctx context.Context) {
	due := s.idle.due(s.now(), func(app string) time.Duration {
		cfg, err := s.config(ctx, app)
		if err != nil {
			return 0
		}
		return cfg.Trigger.IdleDuration
	})
	for _, e := range due {
		s.triggerMu.Lock()
		fired := s.triggered[e.key.Name()].sequence
		s.triggerMu.Unlock()
		if e.sequence > fired {
			s.fire(ctx, e.key, e.sequence, "idle")
		}
	}
}
