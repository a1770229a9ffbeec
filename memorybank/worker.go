package memorybank

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/model"
)

// coalesceMax is the most operations of one scope claimed together.
const coalesceMax = 8

// Run runs this process's share of the memory bank's background work until
// ctx is done: Workers operation workers, the expiry sweeper, re-embedding
// of memories whose vectors come from another embedder, and the idle
// generation trigger.
func (s *Service) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for range s.cfg.Workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				n, err := s.RunOnce(ctx)
				if err != nil && ctx.Err() == nil {
					s.log.WarnContext(ctx, "memory bank worker", "error", err)
				}
				if n > 0 {
					continue
				}
				t := time.NewTimer(s.cfg.PollInterval)
				select {
				case <-ctx.Done():
				case <-s.wake:
				case <-t.C:
				}
				t.Stop()
			}
		})
	}
	wg.Go(func() { s.maintain(ctx) })
	wg.Wait()
}

// maintain runs the periodic jobs.
func (s *Service) maintain(ctx context.Context) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var lastSweep, lastEmbed time.Time
	if err := s.RecoverIdle(ctx); err != nil && ctx.Err() == nil {
		s.log.WarnContext(ctx, "re-arming idle triggers", "error", err)
	}
	for {
		now := s.now()
		if now.Sub(lastSweep) >= time.Minute {
			lastSweep = now
			if _, err := s.SweepExpired(ctx); err != nil && ctx.Err() == nil {
				s.log.WarnContext(ctx, "sweeping expired memories", "error", err)
			}
		}
		if now.Sub(lastEmbed) >= 30*time.Second {
			lastEmbed = now
			if _, err := s.Reembed(ctx); err != nil && ctx.Err() == nil {
				s.log.WarnContext(ctx, "re-embedding memories", "error", err)
			}
		}
		s.FireIdle(ctx)
		s.pruneTriggers(now)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
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

// SweepExpired deletes expired memories, recording a revision for each
// (their revisions remain until they expire themselves), then expired
// revisions, then finished operations older than the retention. It returns
// how many things it deleted.
func (s *Service) SweepExpired(ctx context.Context) (int, error) {
	total := 0
	for {
		n, err := s.store.DeleteFinishedOperations(ctx, s.now().Add(-s.cfg.OperationRetention), 500)
		total += n
		if err != nil {
			return total, err
		}
		if n < 500 {
			break
		}
	}
	for {
		now := s.now()
		mems, err := s.store.ExpiredMemories(ctx, now, 200)
		if err != nil {
			return total, err
		}
		if len(mems) == 0 {
			break
		}
		byApp := map[string]*Write{}
		for _, m := range mems {
			cfg, err := s.config(ctx, m.App)
			if err != nil {
				return total, err
			}
			w := byApp[m.App]
			if w == nil {
				w = &Write{App: m.App, Now: now}
				byApp[m.App] = w
			}
			old := m.Revision
			m.Deleted, m.Revision, m.UpdateTime = true, old+1, now
			w.Changes = append(w.Changes, Change{Memory: m, Revision: s.revision(cfg, m, Deleted, now, "expired", nil, ""), ExpectRevision: old})
		}
		for _, w := range byApp {
			if err := s.store.Write(ctx, w); err != nil && !fault.Is(err, fault.Aborted) {
				return total, err
			}
		}
		total += len(mems)
	}
	for {
		n, err := s.store.DeleteExpiredRevisions(ctx, s.now(), 500)
		total += n
		if err != nil || n < 500 {
			return total, err
		}
	}
}

// Reembed gives the memories whose vectors come from another embedder a
// vector of the current one (after the embedder was changed), 100 at a
// time, and returns how many it re-embedded. Such memories are not found by
// similarity until then.
func (s *Service) Reembed(ctx context.Context) (int, error) {
	total := 0
	for {
		mems, err := s.store.StaleEmbeddings(ctx, s.emb.Name(), 100, s.now())
		if err != nil || len(mems) == 0 {
			return total, err
		}
		texts := make([]string, len(mems))
		for i, m := range mems {
			texts[i] = m.Fact
		}
		vecs, err := s.emb.Embed(ctx, texts, model.TaskDocument)
		if err != nil {
			return total, err
		}
		byApp := map[string]*Write{}
		for i, m := range mems {
			m.Embedding, m.EmbeddingModel = vecs[i], s.emb.Name()
			w := byApp[m.App]
			if w == nil {
				w = &Write{App: m.App, Now: s.now()}
				byApp[m.App] = w
			}
			w.Changes = append(w.Changes, Change{Memory: m, ExpectRevision: m.Revision})
		}
		for _, w := range byApp {
			// A memory changed meanwhile got a fresh vector with its change.
			if err := s.store.Write(ctx, w); err != nil && !fault.Is(err, fault.Aborted) {
				return total, err
			}
		}
		total += len(mems)
	}
}

// RunOnce claims a batch of operations and runs it. It returns how many
// operations it claimed.
func (s *Service) RunOnce(ctx context.Context) (int, error) {
	ops, err := s.store.ClaimOperations(ctx, Claim{Owner: s.cfg.WorkerID, Now: s.now(), Lease: s.cfg.Lease, Max: coalesceMax, MaxAttempts: s.cfg.MaxAttempts})
	if err != nil || len(ops) == 0 {
		return 0, err
	}
	for _, group := range compatibleGroups(ops) {
		r := &run{s: s, ops: group}
		hctx, stop := context.WithCancel(ctx)
		go r.heartbeat(hctx)
		err := r.execute(ctx)
		stop()
		if err != nil {
			s.log.WarnContext(ctx, "memory operation", "operation", group[0].Name(), "error", err)
		}
	}
	return len(ops), nil
}

// compatibleGroups splits claimed operations into groups that can share one
// pipeline run: generations of one scope with the same options and the same
// kind of input (facts or events). A purge runs alone.
func compatibleGroups(ops []*Operation) [][]*Operation {
	key := func(op *Operation) string {
		if op.Method != MethodGenerate {
			return op.ID
		}
		g := op.Generate
		return fmt.Sprintf("%v|%v|%v", g.DisableConsolidation, g.AllowedTopics, len(g.Facts) > 0)
	}
	var groups [][]*Operation
	index := map[string]int{}
	for _, op := range ops {
		k := key(op)
		if i, ok := index[k]; ok {
			groups[i] = append(groups[i], op)
			continue
		}
		index[k] = len(groups)
		groups = append(groups, []*Operation{op})
	}
	return groups
}

// run is one pipeline run over claimed operations.
type run struct {
	s   *Service
	mu  sync.Mutex
	ops []*Operation
}

// update changes every operation of the run under the run's lock.
func (r *run) update(f func(op *Operation)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, op := range r.ops {
		f(op)
	}
}

// updates returns the store updates that replace the run's operations,
// each expected to be running at its claimed attempt.
func (r *run) updates(f func(op *Operation)) []OpUpdate {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []OpUpdate
	for _, op := range r.ops {
		c := *op
		f(&c)
		out = append(out, OpUpdate{Op: &c, ExpectState: OpRunning, ExpectAttempt: op.Attempt})
	}
	return out
}

// heartbeat renews the run's leases until ctx is done.
func (r *run) heartbeat(ctx context.Context) {
	s := r.s
	t := time.NewTicker(s.cfg.Lease / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		ups := r.updates(func(op *Operation) { op.LeaseExpiry = s.now().Add(s.cfg.Lease) })
		if err := s.store.Write(ctx, &Write{App: r.ops[0].App, Now: s.now(), Operations: ups}); err != nil && ctx.Err() == nil {
			s.log.WarnContext(ctx, "renewing operation lease", "operation", r.ops[0].Name(), "error", err)
		}
	}
}

// execute runs the pipeline and records its outcome.
func (r *run) execute(ctx context.Context) error {
	s := r.s
	var (
		w   *Write
		err error
	)
	switch r.ops[0].Method {
	case MethodGenerate:
		w, err = r.generate(ctx)
	case MethodPurge:
		w, err = r.purge(ctx)
	default:
		err = fault.Invalidf("unknown operation method %q", r.ops[0].Method)
	}
	if err == nil {
		err = s.store.Write(ctx, w)
		if err == nil {
			for _, u := range w.Operations {
				s.finished(u.Op)
			}
			return nil
		}
	}
	return r.fail(ctx, err)
}

// fail records a failed attempt: retried later for transient errors (with
// backoff, up to MaxAttempts), failed for good otherwise.
func (r *run) fail(ctx context.Context, cause error) error {
	s := r.s
	now := s.now()
	kind := fault.KindOf(cause)
	retry := kind == fault.Unavailable || kind == fault.Aborted || kind == fault.DeadlineExceeded
	ups := r.updates(func(op *Operation) {
		if retry && op.Attempt < s.cfg.MaxAttempts {
			op.State = OpPending
			op.LeaseOwner, op.LeaseExpiry = "", time.Time{}
			backoff := time.Duration(math.Pow(2, float64(op.Attempt))) * time.Second
			if kind == fault.Aborted {
				backoff = 0
			}
			op.NotBefore = now.Add(backoff)
			op.Progress = fmt.Sprintf("attempt %d failed (%v); retrying", op.Attempt, cause)
			return
		}
		op.State, op.EndTime = OpFailed, now
		op.ErrorKind, op.ErrorMessage = kind, cause.Error()
		if retry {
			op.ErrorMessage = fmt.Sprintf("gave up after %d attempts: %v", op.Attempt, cause)
		}
		op.Progress = "failed"
	})
	if err := s.store.Write(context.WithoutCancel(ctx), &Write{App: r.ops[0].App, Now: now, Operations: ups}); err != nil {
		if fault.Is(err, fault.Aborted) {
			return nil // cancelled or taken over meanwhile: not ours to record
		}
		return err
	}
	for _, u := range ups {
		if u.Op.State.Done() {
			s.finished(u.Op)
		}
	}
	return cause
}

func (r *run) progress(msg string) { r.update(func(op *Operation) { op.Progress = msg }) }

// generate runs the generation pipeline and returns the write that applies
// its result and completes the operations.
func (r *run) generate(ctx context.Context) (*Write, error) {
	s := r.s
	first := r.ops[0]
	app, scopeKey := first.App, first.ScopeKey
	scope := first.Generate.Scope
	cfg, err := s.store.GetConfig(ctx, app)
	if err != nil {
		return nil, err
	}

	// 1. Gather the input.
	r.progress("reading events")
	conv := &conversation{}
	watermarks := map[string]int64{}
	var cands []candidate
	for _, op := range r.ops {
		g := op.Generate
		if g.Session != nil {
			name := g.Session.Name()
			wm, err := s.store.Watermark(ctx, app, name)
			if err != nil {
				return nil, err
			}
			if w, ok := watermarks[name]; ok {
				wm = max(wm, w)
			}
			events, err := s.sess.EventsAfter(ctx, *g.Session, wm, g.From, g.To, MaxEventsPerOperation)
			if err != nil {
				return nil, err
			}
			if len(events) > 0 {
				conv.add(name, events...)
				watermarks[name] = events[len(events)-1].Sequence
			}
		}
		conv.add("", g.Events...)
		for _, f := range g.Facts {
			c := candidate{fact: f.Fact, topics: f.Topics}
			if g.FactsSession != nil {
				c.sources = []Source{{Session: g.FactsSession.Name(), EventIDs: g.FactsEventIDs}}
			}
			cands = append(cands, c)
		}
	}
	r.update(func(op *Operation) { op.EventsProcessed = len(conv.events) })

	// 2. Extract.
	allowed := first.Generate.AllowedTopics
	var extracted []string
	if len(conv.events) > 0 {
		start := time.Now()
		r.progress("extracting facts")
		facts, err := r.extract(ctx, cfg, allowed, conv)
		if err != nil {
			return nil, err
		}
		r.update(func(op *Operation) {
			op.ModelCalls++
			op.FactsExtracted = len(facts)
			op.ExtractionTime = time.Since(start)
		})
		for _, f := range facts {
			extracted = append(extracted, f.fact)
		}
		cands = append(cands, facts...)
	}
	cands = dedupeCandidates(cands)

	// 3. Consolidate.
	var plan []planned
	if len(cands) > 0 {
		start := time.Now()
		r.progress("consolidating")
		if plan, err = r.consolidate(ctx, app, scopeKey, cands, first.Generate.DisableConsolidation); err != nil {
			return nil, err
		}
		r.update(func(op *Operation) { op.Consolidation = time.Since(start) })
	}

	// 4. The write.
	r.progress("writing")
	now := s.now()
	w := &Write{App: app, Now: now, Watermarks: watermarks}
	var result []GeneratedMemory
	if err := s.applyPlan(ctx, cfg, app, scope, plan, extracted, first.Name(), now, w, &result); err != nil {
		return nil, err
	}
	var names []string
	for _, op := range r.ops {
		names = append(names, op.Name())
	}
	w.Operations = r.updates(func(op *Operation) {
		op.State, op.EndTime, op.Progress = OpSucceeded, now, "done"
		op.Generated = result
		op.LeaseOwner, op.LeaseExpiry = "", time.Time{}
		op.CoalescedWith = slices.DeleteFunc(slices.Clone(names), func(n string) bool { return n == op.Name() })
	})
	return w, nil
}

// extract makes the extraction call and returns the candidates.
func (r *run) extract(ctx context.Context, cfg *BankConfig, allowed []string, conv *conversation) ([]candidate, error) {
	s := r.s
	if s.gen == nil {
		return nil, fault.New(fault.FailedPrecondition, "generating memories from events needs a generation model; configure one with %s", model.Settings)
	}
	topics, desc := cfg.Topics()
	if len(allowed) > 0 {
		topics = slices.DeleteFunc(topics, func(t string) bool { return !slices.Contains(allowed, t) })
		if len(topics) == 0 {
			return nil, fault.Invalidf("allowed_topics %v names none of the app's topics", allowed)
		}
	}
	system, user := extractionPrompt(cfg, topics, desc, conv)
	resp, err := s.gen.Generate(ctx, &model.GenerateRequest{
		System:   system,
		Messages: []model.Message{{Role: "user", Text: user}},
		Schema:   extractionSchema(topics),
	})
	if err != nil {
		return nil, err
	}
	var reply extractionReply
	if err := decodeReply(resp.Text, &reply); err != nil {
		return nil, fault.Wrap(fault.Internal, err, "the model's extraction reply is not the JSON asked for")
	}
	var out []candidate
	for _, f := range reply.Facts {
		fact := strings.TrimSpace(f.Fact)
		if validateFact("fact", fact) != nil {
			continue // an empty or oversized fact is dropped, not stored
		}
		var tt []string
		if slices.Contains(topics, f.Topic) {
			tt = []string{f.Topic}
		} else if len(allowed) > 0 {
			continue // outside the allowed topics
		}
		out = append(out, candidate{fact: fact, topics: tt, sources: sourcesOf(conv, f.Events)})
	}
	return out, nil
}

// decodeReply decodes a model's JSON reply, tolerating a Markdown code
// fence around it (some OpenAI-compatible servers add one).
func decodeReply(text string, v any) error {
	t := strings.TrimSpace(text)
	if strings.HasPrefix(t, "```") {
		t = strings.TrimPrefix(t, "```json")
		t = strings.TrimPrefix(t, "```")
		t = strings.TrimSuffix(strings.TrimSpace(t), "```")
	}
	dec := json.NewDecoder(strings.NewReader(t))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w (reply: %s)", err, truncate(text, 200))
	}
	return nil
}

// dedupeCandidates merges candidates whose facts are the same text (after
// normalising case and spaces), keeping all their topics and sources.
func dedupeCandidates(cands []candidate) []candidate {
	var out []candidate
	seen := map[string]int{}
	for _, c := range cands {
		k := normalizeFact(c.fact)
		if i, ok := seen[k]; ok {
			for _, t := range c.topics {
				if !slices.Contains(out[i].topics, t) {
					out[i].topics = append(out[i].topics, t)
				}
			}
			out[i].sources = mergeSources(out[i].sources, c.sources)
			continue
		}
		seen[k] = len(out)
		out = append(out, c)
	}
	return out
}

func normalizeFact(f string) string {
	return strings.Join(strings.Fields(strings.ToLower(strings.TrimRight(strings.TrimSpace(f), "."))), " ")
}

// planned is one decided change.
type planned struct {
	action Action // Created, Updated, Deleted; ActionUnspecified for a skip that only adds sources
	// existing is the memory acted on (nil for a creation).
	existing *Memory
	fact     string
	cand     *candidate
}

// similarPerCandidate is how many similar memories each candidate brings
// into consolidation; maxShown caps their union.
const (
	similarPerCandidate = 5
	maxShown            = 30
	// nearDuplicate is the cosine above which a direct fact is the same as
	// a memory, when there is no model to ask.
	nearDuplicate = 0.9
)

// consolidate decides what each candidate does.
func (r *run) consolidate(ctx context.Context, app, scopeKey string, cands []candidate, disabled bool) ([]planned, error) {
	s := r.s
	if disabled {
		return createAll(cands), nil
	}
	texts := make([]string, len(cands))
	for i, c := range cands {
		texts[i] = c.fact
	}
	vecs, err := s.emb.Embed(ctx, texts, model.TaskQuery)
	if err != nil {
		return nil, err
	}
	var shown []*Memory
	best := map[string]float64{}
	for _, v := range vecs {
		hits, err := s.store.SearchMemories(ctx, SearchQuery{App: app, ScopeKey: scopeKey, Vector: v, Model: s.emb.Name(), K: similarPerCandidate, Now: s.now()})
		if err != nil {
			return nil, err
		}
		for _, h := range hits {
			if h.Score <= 0 {
				continue // shares nothing with the candidate
			}
			if _, ok := best[h.Memory.ID]; !ok {
				shown = append(shown, h.Memory)
			}
			best[h.Memory.ID] = max(best[h.Memory.ID], h.Score)
		}
	}
	slices.SortStableFunc(shown, func(a, b *Memory) int {
		switch {
		case best[a.ID] > best[b.ID]:
			return -1
		case best[a.ID] < best[b.ID]:
			return 1
		}
		return strings.Compare(a.ID, b.ID)
	})
	if len(shown) > maxShown {
		shown = shown[:maxShown]
	}
	if len(shown) == 0 {
		// Nothing to consolidate against: no model call needed.
		return createAll(cands), nil
	}
	if s.gen == nil {
		return s.nearDuplicates(ctx, cands, shown)
	}
	system, user := consolidationPrompt(shown, cands)
	resp, err := s.gen.Generate(ctx, &model.GenerateRequest{
		System:   system,
		Messages: []model.Message{{Role: "user", Text: user}},
		Schema:   consolidationSchema,
	})
	if err != nil {
		return nil, err
	}
	r.update(func(op *Operation) { op.ModelCalls++ })
	var reply consolidationReply
	if err := decodeReply(resp.Text, &reply); err != nil {
		return nil, fault.Wrap(fault.Internal, err, "the model's consolidation reply is not the JSON asked for")
	}
	return planFromReply(reply, cands, shown)
}

func createAll(cands []candidate) []planned {
	out := make([]planned, len(cands))
	for i := range cands {
		out[i] = planned{action: Created, fact: cands[i].fact, cand: &cands[i]}
	}
	return out
}

// planFromReply checks the model's decisions and turns them into changes.
// It refuses, with an error and no change at all, a reply that names a
// candidate or memory that was not shown or acts twice on one memory.
func planFromReply(reply consolidationReply, cands []candidate, shown []*Memory) ([]planned, error) {
	var out []planned
	handled := make([]bool, len(cands))
	touched := map[int]string{}
	for i, a := range reply.Actions {
		if a.Candidate < 1 || a.Candidate > len(cands) {
			return nil, fault.New(fault.Internal, "consolidation action %d names new fact %d, but only %d were shown", i+1, a.Candidate, len(cands))
		}
		c := &cands[a.Candidate-1]
		handled[a.Candidate-1] = true
		memory := func() (*Memory, error) {
			if a.Memory < 1 || a.Memory > len(shown) {
				return nil, fault.New(fault.Internal, "consolidation action %d (%s) names memory %d, but only memories 1 to %d were shown", i+1, a.Action, a.Memory, len(shown))
			}
			if prev, ok := touched[a.Memory]; ok {
				return nil, fault.New(fault.Internal, "consolidation acts twice on memory %d (%s, then %s)", a.Memory, prev, a.Action)
			}
			touched[a.Memory] = a.Action
			return shown[a.Memory-1], nil
		}
		fact := strings.TrimSpace(a.Fact)
		switch a.Action {
		case "CREATE":
			if fact == "" {
				fact = c.fact
			}
			if err := validateFact("consolidated fact", fact); err != nil {
				return nil, fault.Wrap(fault.Internal, err, "consolidation action %d", i+1)
			}
			out = append(out, planned{action: Created, fact: fact, cand: c})
		case "UPDATE":
			m, err := memory()
			if err != nil {
				return nil, err
			}
			if err := validateFact("consolidated fact", fact); err != nil {
				return nil, fault.Wrap(fault.Internal, err, "consolidation action %d", i+1)
			}
			out = append(out, planned{action: Updated, existing: m, fact: fact, cand: c})
		case "DELETE":
			m, err := memory()
			if err != nil {
				return nil, err
			}
			out = append(out, planned{action: Deleted, existing: m, cand: c})
		case "SKIP":
			if a.Memory == 0 {
				continue
			}
			m, err := memory()
			if err != nil {
				return nil, err
			}
			// The fact is known already; the memory gains the new sources.
			out = append(out, planned{action: ActionUnspecified, existing: m, cand: c})
		default:
			return nil, fault.New(fault.Internal, "consolidation action %d has the unknown action %q", i+1, a.Action)
		}
	}
	// A new fact the model said nothing about is kept: nothing is lost.
	for i := range cands {
		if !handled[i] {
			out = append(out, planned{action: Created, fact: cands[i].fact, cand: &cands[i]})
		}
	}
	return out, nil
}

// nearDuplicates consolidates without a model: a candidate whose text or
// vector nearly equals a shown memory's adds its sources to that memory;
// the others are created.
func (s *Service) nearDuplicates(ctx context.Context, cands []candidate, shown []*Memory) ([]planned, error) {
	texts := make([]string, len(cands))
	for i, c := range cands {
		texts[i] = c.fact
	}
	vecs, err := s.emb.Embed(ctx, texts, model.TaskDocument)
	if err != nil {
		return nil, err
	}
	var out []planned
	used := map[string]bool{}
	for i := range cands {
		var dup *Memory
		for _, m := range shown {
			if normalizeFact(m.Fact) == normalizeFact(cands[i].fact) || m.EmbeddingModel == s.emb.Name() && cosine(vecs[i], m.Embedding) >= nearDuplicate {
				dup = m
				break
			}
		}
		switch {
		case dup == nil:
			out = append(out, planned{action: Created, fact: cands[i].fact, cand: &cands[i]})
		case !used[dup.ID]:
			used[dup.ID] = true
			out = append(out, planned{action: ActionUnspecified, existing: dup, cand: &cands[i]})
		}
	}
	return out, nil
}

func cosine(a, b []float32) float64 {
	var dot, na, nb float64
	for i := range min(len(a), len(b)) {
		dot += float64(a[i]) * float64(b[i])
		na += float64(a[i]) * float64(a[i])
		nb += float64(b[i]) * float64(b[i])
	}
	if na == 0 || nb == 0 {
		return 0
	}
	return dot / math.Sqrt(na*nb)
}

// applyPlan turns planned changes into the write's changes and the
// operation's result. The memories shown to the model are read again so
// that the write's precondition is their current revision.
func (s *Service) applyPlan(ctx context.Context, cfg *BankConfig, app string, scope Scope, plan []planned, extracted []string, opName string, now time.Time, w *Write, result *[]GeneratedMemory) error {
	// Embed every new text in one call.
	var texts []string
	for _, p := range plan {
		if p.action == Created || p.action == Updated {
			texts = append(texts, p.fact)
		}
	}
	var vecs [][]float32
	if len(texts) > 0 {
		var err error
		if vecs, err = s.emb.Embed(ctx, texts, model.TaskDocument); err != nil {
			return err
		}
	}
	next := 0
	candFacts := func(p planned) []string {
		if extracted != nil {
			return extracted
		}
		return []string{p.cand.fact}
	}
	for _, p := range plan {
		var sources []Source
		if p.cand != nil {
			sources = p.cand.sources
		}
		switch p.action {
		case Created:
			m := &Memory{
				App: app, ID: s.newID(), Fact: p.fact, Scope: scope, Topics: slices.Clone(p.cand.topics),
				CreateTime: now, UpdateTime: now, Sources: mergeSources(nil, sources), Revision: 1,
				Embedding: vecs[next], EmbeddingModel: s.emb.Name(),
			}
			next++
			if cfg.MemoryTTL > 0 {
				m.ExpireTime = now.Add(cfg.MemoryTTL)
			}
			w.Changes = append(w.Changes, Change{Memory: m, Revision: s.revision(cfg, m, Created, now, "extracted", candFacts(p), opName)})
			*result = append(*result, GeneratedMemory{Memory: withoutVector(m), Action: Created})
		case Updated, Deleted, ActionUnspecified:
			m := p.existing.clone()
			m.Embedding, m.EmbeddingModel = p.existing.Embedding, p.existing.EmbeddingModel
			old := m.Revision
			merged := mergeSources(m.Sources, sources)
			action, reason := p.action, "consolidated"
			switch p.action {
			case Updated:
				m.Fact = p.fact
				m.Embedding, m.EmbeddingModel = vecs[next], s.emb.Name()
				next++
				for _, t := range p.cand.topics {
					if !slices.Contains(m.Topics, t) {
						m.Topics = append(m.Topics, t)
					}
				}
				m.Sources = merged
			case Deleted:
				m.Deleted = true
				reason = "contradicted by: " + p.cand.fact
			default:
				if len(merged) == len(m.Sources) && sourcesEqual(merged, m.Sources) {
					// Nothing new to record; the result says which memory
					// holds the fact.
					*result = append(*result, GeneratedMemory{Memory: withoutVector(p.existing), Action: Unchanged})
					continue
				}
				m.Sources = merged
				action, reason = Updated, "confirmed by a new source"
			}
			m.Revision, m.UpdateTime = old+1, now
			w.Changes = append(w.Changes, Change{Memory: m, Revision: s.revision(cfg, m, action, now, reason, candFacts(p), opName), ExpectRevision: old})
			*result = append(*result, GeneratedMemory{Memory: withoutVector(m), Action: action})
		}
	}
	return nil
}

// withoutVector returns a copy of m without its embedding, for results.
func withoutVector(m *Memory) *Memory {
	c := m.clone()
	c.Embedding, c.EmbeddingModel = nil, ""
	return c
}

func sourcesEqual(a, b []Source) bool {
	return slices.EqualFunc(a, b, func(x, y Source) bool { return x.Session == y.Session && slices.Equal(x.EventIDs, y.EventIDs) })
}

// purge runs a purge: counts, and with Force deletes, the matching
// memories. Deletions are written page by page with the count so far; a
// purge resumed after a crash continues from there.
func (r *run) purge(ctx context.Context) (*Write, error) {
	s := r.s
	op := r.ops[0]
	req := op.Purge
	f, err := ParseFilter(req.Filter)
	if err != nil {
		return nil, err
	}
	cfg, err := s.store.GetConfig(ctx, op.App)
	if err != nil {
		return nil, err
	}
	count := op.PurgeCount
	var after ListQuery
	for {
		now := s.now()
		q := ListQuery{App: op.App, ScopeKey: op.ScopeKey, Filter: f, Now: now, Limit: 500, AfterUpdate: after.AfterUpdate, AfterID: after.AfterID}
		page, err := s.store.ListMemories(ctx, q)
		if err != nil {
			return nil, err
		}
		if !req.Force {
			count += int64(len(page))
			if len(page) < q.Limit {
				break
			}
			last := page[len(page)-1]
			after = ListQuery{AfterUpdate: last.UpdateTime, AfterID: last.ID}
			continue
		}
		if len(page) == 0 {
			break
		}
		w := &Write{App: op.App, Now: now}
		for _, m := range page {
			old := m.Revision
			m.Deleted, m.Revision, m.UpdateTime = true, old+1, now
			w.Changes = append(w.Changes, Change{Memory: m, Revision: s.revision(cfg, m, Deleted, now, "purged", nil, op.Name()), ExpectRevision: old})
		}
		count += int64(len(page))
		c := count
		w.Operations = r.updates(func(o *Operation) { o.PurgeCount, o.Progress = c, fmt.Sprintf("deleted %d", c) })
		if err := s.store.Write(ctx, w); err != nil {
			return nil, err
		}
		r.update(func(o *Operation) { o.PurgeCount = c })
	}
	now := s.now()
	c := count
	return &Write{App: op.App, Now: now, Operations: r.updates(func(o *Operation) {
		o.State, o.EndTime, o.Progress = OpSucceeded, now, "done"
		o.PurgeCount = c
		o.LeaseOwner, o.LeaseExpiry = "", time.Time{}
	})}, nil
}
