package memorybank

import (
	"cmp"
	"context"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/aip"
	"github.com/kioku-ai/kioku/model"
	"github.com/kioku-ai/kioku/sessions"
)

// GenerateMemories validates a request and queues an operation for it. The
// operation runs in the background (Run); wait for it with WaitOperation.
func (s *Service) GenerateMemories(ctx context.Context, r *GenerateRequest) (*Operation, error) {
	if err := validateApp(r.App); err != nil {
		return nil, err
	}
	if (r.Session != nil || len(r.Events) > 0) && s.gen == nil {
		return nil, fault.New(fault.FailedPrecondition, "generating memories from events needs a generation model, and this server has none; configure one with %s (direct facts work without a model)", model.Settings)
	}
	sources := 0
	if r.Session != nil {
		sources++
		if err := sessions.ValidateKey(*r.Session); err != nil {
			return nil, err
		}
		if r.Session.App != r.App {
			return nil, fault.Invalidf("session_source.session %s is not in app %s", r.Session.Name(), r.App)
		}
		if len(r.Scope) == 0 {
			r.Scope = Scope{"user_id": r.Session.User}
		}
		if !r.To.IsZero() && !r.To.After(r.From) {
			return nil, fault.Invalidf("session_source.end_time must be after start_time")
		}
		if s.sess == nil {
			return nil, fault.New(fault.FailedPrecondition, "this server cannot read sessions for memory generation")
		}
		// The session must exist now (and be the named user's).
		if _, err := s.sess.EventsAfter(ctx, *r.Session, math.MaxInt64, time.Time{}, time.Time{}, 1); err != nil {
			return nil, err
		}
	}
	if len(r.Events) > 0 {
		sources++
		if len(r.Events) > MaxInlineEvents {
			return nil, fault.New(fault.ResourceExhausted, "events_source has %d events; the limit is %d", len(r.Events), MaxInlineEvents)
		}
	}
	if len(r.Facts) > 0 {
		sources++
		if len(r.Facts) > MaxDirectFacts {
			return nil, fault.New(fault.ResourceExhausted, "direct_memories_source has %d facts; the limit is %d", len(r.Facts), MaxDirectFacts)
		}
		for i, f := range r.Facts {
			if err := validateFact("direct_memories_source.memories["+strconv.Itoa(i)+"].fact", f.Fact); err != nil {
				return nil, err
			}
			if err := validateTopics("direct_memories_source.memories["+strconv.Itoa(i)+"].topics", f.Topics); err != nil {
				return nil, err
			}
		}
		if k := r.FactsSession; k != nil {
			if err := sessions.ValidateKey(*k); err != nil {
				return nil, err
			}
			if k.App != r.App {
				return nil, fault.Invalidf("direct_memories_source.source.session %s is not in app %s", k.Name(), r.App)
			}
		}
		if len(r.FactsEventIDs) > 0 && r.FactsSession == nil {
			return nil, fault.Invalidf("direct_memories_source.source.event_ids needs direct_memories_source.source.session")
		}
		if len(r.FactsEventIDs) > MaxSourceEventIDs {
			return nil, fault.New(fault.ResourceExhausted, "direct_memories_source.source.event_ids has %d ids; the limit is %d", len(r.FactsEventIDs), MaxSourceEventIDs)
		}
		for i, id := range r.FactsEventIDs {
			if err := aip.ValidateID("direct_memories_source.source.event_ids["+strconv.Itoa(i)+"]", id, aip.EventIDChars); err != nil {
				return nil, err
			}
		}
	}
	if sources != 1 {
		return nil, fault.Invalidf("give exactly one source: session_source, events_source or direct_memories_source")
	}
	if err := ValidateScope("scope", r.Scope); err != nil {
		return nil, err
	}
	if err := validateTopics("allowed_topics", r.AllowedTopics); err != nil {
		return nil, err
	}
	op := &Operation{
		App: r.App, ID: s.newID(), Method: MethodGenerate, State: OpPending,
		ScopeKey: r.Scope.Key(), Generate: r, CreateTime: s.now(), Progress: "queued",
	}
	return op, s.enqueue(ctx, op)
}

// PurgeMemories queues a purge: with Force it deletes the memories
// matching the scope and filter (recording revisions), without it only
// counts them.
func (s *Service) PurgeMemories(ctx context.Context, r *PurgeRequest) (*Operation, error) {
	if err := validateApp(r.App); err != nil {
		return nil, err
	}
	if len(r.Scope) > 0 {
		if err := ValidateScope("scope", r.Scope); err != nil {
			return nil, err
		}
	}
	if _, err := ParseFilter(r.Filter); err != nil {
		return nil, err
	}
	op := &Operation{App: r.App, ID: s.newID(), Method: MethodPurge, State: OpPending, Purge: r, CreateTime: s.now(), Progress: "queued"}
	if len(r.Scope) > 0 {
		op.ScopeKey = r.Scope.Key()
	}
	return op, s.enqueue(ctx, op)
}

func (s *Service) enqueue(ctx context.Context, op *Operation) error {
	if err := s.store.CreateOperation(ctx, op); err != nil {
		return err
	}
	select {
	case s.wake <- struct{}{}:
	default:
	}
	return nil
}

// GetOperation returns an operation.
func (s *Service) GetOperation(ctx context.Context, app, id string) (*Operation, error) {
	if err := validateApp(app); err != nil {
		return nil, err
	}
	if err := ValidateID("operation id", id); err != nil {
		return nil, err
	}
	return s.store.GetOperation(ctx, app, id)
}

// ListOperations returns a page of an app's operations, newest first,
// optionally only those in the given states.
func (s *Service) ListOperations(ctx context.Context, app string, states []OpState, pageSize int32, token string) ([]*Operation, string, error) {
	if err := validateApp(app); err != nil {
		return nil, "", err
	}
	size, err := aip.PageSize("page_size", pageSize)
	if err != nil {
		return nil, "", err
	}
	var names []string
	for _, st := range states {
		names = append(names, st.String())
	}
	digest := aip.QueryDigest("operations", app, strings.Join(names, ","))
	tok, err := aip.DecodePageToken(token, digest)
	if err != nil {
		return nil, "", err
	}
	q := OpQuery{App: app, States: states, AfterID: tok.ID, Limit: size + 1}
	if tok.ID != "" {
		q.AfterCreate = time.Unix(0, tok.Time)
	}
	ops, err := s.store.ListOperations(ctx, q)
	if err != nil {
		return nil, "", err
	}
	ops, next := aip.Page(ops, size, digest, func(last *Operation) aip.PageToken {
		return aip.PageToken{Time: last.CreateTime.UnixNano(), ID: last.ID}
	})
	return ops, next, nil
}

// WaitOperation returns an operation once it is done, or as it is when
// timeout passes or ctx ends first.
func (s *Service) WaitOperation(ctx context.Context, app, id string, timeout time.Duration) (*Operation, error) {
	op, err := s.GetOperation(ctx, app, id)
	if err != nil || op.State.Done() {
		return op, err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	done := s.subscribe(op.Name())
	defer s.unsubscribe(op.Name(), done)
	delay := 20 * time.Millisecond
	for {
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			// Report the operation as it is; the wait itself did not fail.
			cur, err := s.store.GetOperation(context.WithoutCancel(ctx), app, id)
			if err != nil {
				return op, nil
			}
			return cur, nil
		case <-done:
		case <-t.C:
		}
		t.Stop()
		cur, err := s.store.GetOperation(ctx, app, id)
		if err != nil {
			if ctx.Err() != nil {
				return op, nil // the wait timed out during the read
			}
			return nil, err
		}
		if op = cur; op.State.Done() {
			return op, nil
		}
		delay = min(2*delay, time.Second)
	}
}

func (s *Service) subscribe(name string) chan struct{} {
	ch := make(chan struct{}, 1)
	s.waitMu.Lock()
	s.waiters[name] = append(s.waiters[name], ch)
	s.waitMu.Unlock()
	return ch
}

func (s *Service) unsubscribe(name string, ch chan struct{}) {
	s.waitMu.Lock()
	defer s.waitMu.Unlock()
	s.waiters[name] = slices.DeleteFunc(s.waiters[name], func(c chan struct{}) bool { return c == ch })
	if len(s.waiters[name]) == 0 {
		delete(s.waiters, name)
	}
}

// finished wakes the waiters of operations that ended in this process,
// counts them, and forgets the triggers that queued them.
func (s *Service) finished(ops ...*Operation) {
	s.triggerMu.Lock()
	for _, op := range ops {
		if g := op.Generate; g != nil && g.Session != nil {
			delete(s.triggered, g.Session.Name())
		}
	}
	s.triggerMu.Unlock()
	s.waitMu.Lock()
	defer s.waitMu.Unlock()
	for _, op := range ops {
		s.ended[OperationCount{Method: op.Method, State: op.State}]++
		for _, ch := range s.waiters[op.Name()] {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
}

// OperationCount is how many operations of a method ended in a state.
type OperationCount struct {
	Method string
	State  OpState
	N      uint64
}

// EndedOperations counts the operations that ended in this process (run by
// its workers or cancelled through it) since it started, by method and
// final state.
func (s *Service) EndedOperations() []OperationCount {
	s.waitMu.Lock()
	defer s.waitMu.Unlock()
	out := make([]OperationCount, 0, len(s.ended))
	for k, n := range s.ended {
		k.N = n
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b OperationCount) int {
		return cmp.Or(strings.Compare(a.Method, b.Method), cmp.Compare(a.State, b.State))
	})
	return out
}

// CancelOperation cancels an operation that has not finished: a pending one
// never runs; a running one's result is discarded (its write is refused).
func (s *Service) CancelOperation(ctx context.Context, app, id string) (*Operation, error) {
	for attempt := 0; ; attempt++ {
		op, err := s.GetOperation(ctx, app, id)
		if err != nil {
			return nil, err
		}
		if op.State.Done() {
			return nil, fault.New(fault.FailedPrecondition, "operation %s has already finished (%s)", op.Name(), op.State)
		}
		prev, attemptN := op.State, op.Attempt
		op.State, op.EndTime, op.Progress = OpCancelled, s.now(), "cancelled"
		op.ErrorKind, op.ErrorMessage = fault.Canceled, "cancelled by request"
		err = s.store.Write(ctx, &Write{App: app, Now: s.now(), Operations: []OpUpdate{{Op: op, ExpectState: prev, ExpectAttempt: attemptN}}})
		if fault.Is(err, fault.Aborted) && attempt < 5 {
			continue
		}
		if err != nil {
			return nil, err
		}
		s.finished(op)
		return op, nil
	}
}

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

// fire queues a generation from a session for a trigger. The session is
// remembered until the operation ends (finished), the session is deleted,
// or firedTTL passes.
func (s *Service) fire(ctx context.Context, key sessions.Key, sequence int64, why string) {
	s.triggerMu.Lock()
	s.triggered[key.Name()] = firedTrigger{sequence: sequence, at: s.now()}
	s.triggerMu.Unlock()
	op, err := s.GenerateMemories(context.WithoutCancel(ctx), &GenerateRequest{App: key.App, Session: &key})
	if err != nil {
		s.forgetTrigger(key.Name())
		s.log.WarnContext(ctx, "queueing triggered memory generation", "session", key.Name(), "error", err)
		return
	}
	s.log.InfoContext(ctx, "memory generation triggered", "session", key.Name(), "trigger", why, "operation", op.Name())
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
	key      sessions.Key
	sequence int64
	at       time.Time
}

func (i *idleSessions) forget(name string) {
	i.mu.Lock()
	delete(i.last, name)
	i.mu.Unlock()
}

func (i *idleSessions) touch(key sessions.Key, seq int64, now time.Time) {
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
