package memorybank

import (
	"cmp"
	"context"
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"strings"
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
	if err := s.checkQueue(ctx, op); err != nil {
		return err
	}
	if err := s.store.CreateOperation(ctx, op); err != nil {
		return err
	}
	s.signal()
	return nil
}

// checkQueue refuses an operation when its scope, or its app, has as many
// operations waiting as Config allows.
func (s *Service) checkQueue(ctx context.Context, op *Operation) error {
	if op.ScopeKey != "" {
		n, err := s.store.CountPending(ctx, op.App, op.ScopeKey, s.cfg.MaxQueuedPerScope)
		if err != nil {
			return err
		}
		if n >= s.cfg.MaxQueuedPerScope {
			scope, _ := json.Marshal(ParseScopeKey(op.ScopeKey))
			return fault.New(fault.ResourceExhausted, "scope %s of app %s has %d memory operations waiting, the most one scope may have; wait for them (WaitOperation) and try again", scope, op.App, n)
		}
	}
	n, err := s.store.CountPending(ctx, op.App, "", s.cfg.MaxQueuedPerApp)
	if err != nil {
		return err
	}
	if n >= s.cfg.MaxQueuedPerApp {
		return fault.New(fault.ResourceExhausted, "app %s has %d memory operations waiting, the most one app may have; wait for them (WaitOperation) and try again", op.App, n)
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
	for _, op := range ops {
		s.compactionEnded(op)
	}
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
