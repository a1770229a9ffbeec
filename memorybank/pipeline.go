package memorybank

import (
	"context"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/jobs"
	"github.com/kioku-ai/kioku/memorybank/appconfig"
	"github.com/kioku-ai/kioku/memorybank/memorydriver"
	"github.com/kioku-ai/kioku/memorybank/memorytype"
	"github.com/kioku-ai/kioku/model"
	"github.com/kioku-ai/kioku/redact"
)

// genRun is one run of the generation pipeline over a batch of
// generations of one scope.
type genRun struct {
	s     *Service
	batch *jobs.Batch
	ops   []*jobs.Operation
	reqs  []*GenerateRequest
	// gen is the Service's generator, redacting with red when the app's
	// configuration turns redaction on (nil red: off).
	gen model.Generator
	red *redact.Redactor
	// result holds the run's figures so far, and its memories at the end.
	result generateResult
}

// figures changes the run's figures and records them on its operations
// (the next lease renewal writes them).
func (r *genRun) figures(f func(res *generateResult)) {
	f(&r.result)
	r.batch.SetResult(encode(r.result))
}

// generate is the handler of KindGenerate: it runs the generation
// pipeline and returns the write that applies its result, to be committed
// with the operations' completion.
func (s *Service) generate(ctx context.Context, b *jobs.Batch) (*jobs.Outcome, error) {
	r := &genRun{s: s, batch: b, ops: b.Operations()}
	for _, op := range r.ops {
		g, err := decodeGenerate(op)
		if err != nil {
			return nil, fault.Wrap(fault.Internal, err, "operation %s", op.Name())
		}
		r.reqs = append(r.reqs, g)
	}
	first, req := r.ops[0], r.reqs[0]
	app, scopeKey, scope := first.App, first.Key, req.Scope
	cfg, err := s.store.GetConfig(ctx, app)
	if err != nil {
		return nil, err
	}
	if r.red, err = s.Redactor(cfg); err != nil {
		return nil, err
	}
	r.gen = s.charged(redact.Generator(s.gen, r.red), app)

	// 1. Gather the input.
	b.Progress("reading events")
	conv := &conversation{}
	watermarks := map[string]int64{}
	var cands []candidate
	for i, op := range r.ops {
		g := r.reqs[i]
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
			// A direct fact is stated when it was given: the request's time.
			c := candidate{fact: redactFact(r.red, f.Fact), topics: f.Topics, stated: op.CreateTime}
			if g.FactsSession != nil {
				c.sources = []memorytype.Source{{Session: g.FactsSession.Name(), EventIDs: g.FactsEventIDs}}
			}
			cands = append(cands, c)
		}
	}
	r.figures(func(res *generateResult) { res.EventsProcessed = len(conv.events) })

	// 2. Extract (with the profiles that apply, profile_generation.go).
	allowed := req.AllowedTopics
	prof, err := s.profiles(ctx, cfg, app, scope, len(conv.events) > 0)
	if err != nil {
		return nil, err
	}
	var fields []profileCandidate
	if len(conv.events) > 0 {
		start := time.Now()
		b.Progress("extracting facts")
		var facts []candidate
		facts, fields, err = r.extract(ctx, cfg, allowed, conv, prof)
		if err != nil {
			return nil, err
		}
		for i := range facts {
			facts[i].fact = redactFact(r.red, facts[i].fact)
		}
		redactFields(r.red, fields)
		r.figures(func(res *generateResult) {
			res.ModelCalls++
			res.FactsExtracted = len(facts)
			res.ExtractionNS = int64(time.Since(start))
		})
		cands = append(cands, facts...)
	}
	cands = dedupeCandidates(cands)

	// 3. Consolidate.
	var plan []planned
	if len(cands) > 0 {
		start := time.Now()
		b.Progress("consolidating")
		if plan, err = r.consolidate(ctx, app, scopeKey, cands, req.DisableConsolidation); err != nil {
			return nil, err
		}
		for i := range plan {
			plan[i].fact = redactFact(r.red, plan[i].fact)
		}
		r.figures(func(res *generateResult) { res.ConsolidationNS = int64(time.Since(start)) })
	}

	// 4. The write, committed with the operations' completion.
	b.Progress("writing")
	now := s.now()
	w := &memorydriver.Write{App: app, Now: now, Watermarks: watermarks}
	var generated []GeneratedMemory
	if err := s.applyPlan(ctx, cfg, app, scope, req.metadataChange(), plan, first.Name(), now, w, &generated); err != nil {
		return nil, err
	}
	if err := s.applyProfile(ctx, cfg, app, scope, prof, fields, first.Name(), now, w, &generated); err != nil {
		return nil, err
	}
	res := r.result
	res.Generated = nil
	for _, gm := range generated {
		res.Generated = append(res.Generated, generatedRecordOf(gm))
	}
	return &jobs.Outcome{Result: encode(res), Commit: func(ctx context.Context, done []jobs.Update) error {
		w.Operations = done
		return s.store.Write(ctx, w)
	}}, nil
}

// extract makes the extraction call and returns the candidates: the
// facts, and the fields of the profiles p asks for (nil: none).
func (r *genRun) extract(ctx context.Context, cfg *appconfig.Config, allowed []string, conv *conversation, p *profileRun) ([]candidate, []profileCandidate, error) {
	s := r.s
	if s.gen == nil {
		return nil, nil, fault.New(fault.FailedPrecondition, "generating memories from events needs a generation model; configure one with %s", model.Settings)
	}
	topics, desc := cfg.Topics()
	if len(allowed) > 0 {
		topics = slices.DeleteFunc(topics, func(t string) bool { return !slices.Contains(allowed, t) })
		if len(topics) == 0 {
			return nil, nil, fault.Invalidf("allowed_topics %v names none of the app's topics", allowed)
		}
	}
	system, user := extractionPrompt(cfg, topics, desc, conv)
	schema := extractionSchema(topics)
	if p != nil {
		system, user = p.prompt(system, user)
		schema = p.replySchema(schema)
	}
	resp, err := generate(ctx, r.gen, &model.GenerateRequest{
		System:   system,
		Messages: []model.Message{{Role: "user", Text: user}},
		Schema:   schema,
	})
	if err != nil {
		return nil, nil, err
	}
	facts, fields, err := parseExtraction(resp.Text, topics, allowed, conv, p)
	if err != nil {
		return nil, nil, model.BadReply(s.gen, "extraction", err)
	}
	return facts, fields, nil
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
			if c.stated.After(out[i].stated) {
				out[i].stated = c.stated
			}
			if out[i].event.IsZero() {
				out[i].event = c.event
			}
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
	action memorytype.Action // Created, Updated, Deleted; ActionUnspecified for a skip that only adds sources
	// existing is the memory acted on (nil for a creation).
	existing *memorytype.Memory
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
func (r *genRun) consolidate(ctx context.Context, app, scopeKey string, cands []candidate, disabled bool) ([]planned, error) {
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
	var shown []*memorytype.Memory
	best := map[string]float64{}
	for _, v := range vecs {
		hits, err := s.store.SearchMemories(ctx, memorydriver.SearchQuery{App: app, ScopeKey: scopeKey, Vector: v, Model: s.emb.Name(), K: similarPerCandidate, Filter: r.reqs[0].metadataChange().consolidation(), Now: s.now()})
		if err != nil {
			return nil, err
		}
		for _, h := range hits {
			if h.Score <= 0 {
				continue // shares nothing with the candidate
			}
			if _, ok := best[h.Item.ID]; !ok {
				shown = append(shown, h.Item)
			}
			best[h.Item.ID] = max(best[h.Item.ID], h.Score)
		}
	}
	slices.SortStableFunc(shown, func(a, b *memorytype.Memory) int {
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
	resp, err := generate(ctx, r.gen, &model.GenerateRequest{
		System:   system,
		Messages: []model.Message{{Role: "user", Text: user}},
		Schema:   consolidationSchema,
	})
	if err != nil {
		return nil, err
	}
	r.figures(func(res *generateResult) { res.ModelCalls++ })
	plan, err := parseConsolidation(resp.Text, cands, shown)
	if err != nil {
		return nil, model.BadReply(s.gen, "consolidation", err)
	}
	return plan, nil
}

func createAll(cands []candidate) []planned {
	out := make([]planned, len(cands))
	for i := range cands {
		out[i] = planned{action: memorytype.Created, fact: cands[i].fact, cand: &cands[i]}
	}
	return out
}

// nearDuplicates consolidates without a model: a candidate whose text or
// vector nearly equals a shown memory's adds its sources to that memory;
// the others are created.
func (s *Service) nearDuplicates(ctx context.Context, cands []candidate, shown []*memorytype.Memory) ([]planned, error) {
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
		var dup *memorytype.Memory
		for _, m := range shown {
			if normalizeFact(m.Fact) == normalizeFact(cands[i].fact) || m.EmbeddingModel == s.emb.Name() && cosine(vecs[i], m.Embedding) >= nearDuplicate {
				dup = m
				break
			}
		}
		switch {
		case dup == nil:
			out = append(out, planned{action: memorytype.Created, fact: cands[i].fact, cand: &cands[i]})
		case !used[dup.ID]:
			used[dup.ID] = true
			out = append(out, planned{action: memorytype.ActionUnspecified, existing: dup, cand: &cands[i]})
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

// embedAll embeds the new texts of a generation in one call (none: no
// call).
func (s *Service) embedAll(ctx context.Context, texts []string) ([][]float32, error) {
	if len(texts) == 0 {
		return nil, nil
	}
	return s.emb.Embed(ctx, texts, model.TaskDocument)
}

// applyPlan turns planned changes into the write's changes and the
// operation's result. The memories shown to the model are read again so
// that the write's precondition is their current revision. Each revision
// records what changed: the memory after it, and the candidate fact that
// led to it (not every fact of the run, which made the revisions of one
// generation grow with the square of its facts). meta is the generation's
// metadata and how it applies to the memories it updates.
func (s *Service) applyPlan(ctx context.Context, cfg *appconfig.Config, app string, scope memorytype.Scope, meta metadataChange, plan []planned, opName string, now time.Time, w *memorydriver.Write, result *[]GeneratedMemory) error {
	// Embed every new text in one call.
	var texts []string
	for _, p := range plan {
		if p.action == memorytype.Created || p.action == memorytype.Updated {
			texts = append(texts, p.fact)
		}
	}
	vecs, err := s.embedAll(ctx, texts)
	if err != nil {
		return err
	}
	next := 0
	candFacts := func(p planned) []string { return []string{p.cand.fact} }
	for _, p := range plan {
		var sources []memorytype.Source
		if p.cand != nil {
			sources = p.cand.sources
		}
		switch p.action {
		case memorytype.Created:
			m := &memorytype.Memory{
				App: app, ID: s.newID(), Fact: p.fact, Scope: scope, Topics: slices.Clone(p.cand.topics), Metadata: meta.created(),
				CreateTime: now, UpdateTime: now, Sources: mergeSources(nil, sources), Revision: 1,
				EventTime: p.cand.event, StatedTime: p.cand.stated,
				Embedding: vecs[next], EmbeddingModel: s.emb.Name(),
			}
			next++
			if cfg.MemoryTTL > 0 {
				m.ExpireTime = now.Add(cfg.MemoryTTL)
			}
			w.Changes = append(w.Changes, memorydriver.Change{Memory: m, Revision: s.revision(cfg, m, memorytype.Created, now, "extracted", candFacts(p), opName)})
			*result = append(*result, GeneratedMemory{Memory: withoutVector(m), Action: memorytype.Created})
		case memorytype.Updated, memorytype.Deleted, memorytype.ActionUnspecified:
			m := cloneMemory(p.existing)
			m.Embedding, m.EmbeddingModel = p.existing.Embedding, p.existing.EmbeddingModel
			if len(m.Embedding) == 0 && p.action != memorytype.Updated {
				// Memories found by similarity come without their vector;
				// the stored one is kept (the write checks the revision).
				cur, err := s.store.GetMemory(ctx, app, m.ID)
				if err != nil {
					return err
				}
				m.Embedding, m.EmbeddingModel = cur.Embedding, cur.EmbeddingModel
			}
			old := m.Revision
			merged := mergeSources(m.Sources, sources)
			action, reason := p.action, "consolidated"
			switch p.action {
			case memorytype.Updated:
				m.Fact = p.fact
				m.Embedding, m.EmbeddingModel = vecs[next], s.emb.Name()
				next++
				restate(m, p.cand)
				for _, t := range p.cand.topics {
					if !slices.Contains(m.Topics, t) {
						m.Topics = append(m.Topics, t)
					}
				}
				m.Sources = merged
				m.Metadata = meta.updated(m.Metadata)
			case memorytype.Deleted:
				m.Deleted = true
				reason = "contradicted by: " + p.cand.fact
			default:
				md := meta.updated(m.Metadata)
				if len(merged) == len(m.Sources) && sourcesEqual(merged, m.Sources) && md.Equal(m.Metadata) {
					// Nothing new to record; the result says which memory
					// holds the fact.
					*result = append(*result, GeneratedMemory{Memory: withoutVector(p.existing), Action: memorytype.Unchanged})
					continue
				}
				m.Sources, m.Metadata = merged, md
				restate(m, p.cand)
				action, reason = memorytype.Updated, "confirmed by a new source"
			}
			m.Revision, m.UpdateTime = old+1, now
			w.Changes = append(w.Changes, memorydriver.Change{Memory: m, Revision: s.revision(cfg, m, action, now, reason, candFacts(p), opName), ExpectRevision: old})
			*result = append(*result, GeneratedMemory{Memory: withoutVector(m), Action: action})
		}
	}
	return nil
}

// restate gives memory m the times of a candidate that updated or
// confirmed it: stated again when the candidate was (if later), about the
// candidate's date when it has one.
func restate(m *memorytype.Memory, c *candidate) {
	if c == nil {
		return
	}
	if c.stated.After(m.StatedTime) {
		m.StatedTime = c.stated
	}
	if !c.event.IsZero() {
		m.EventTime = c.event
	}
}

// withoutVector returns a copy of m without its embedding, for results.
func withoutVector(m *memorytype.Memory) *memorytype.Memory {
	c := cloneMemory(m)
	c.Embedding, c.EmbeddingModel = nil, ""
	return c
}

func sourcesEqual(a, b []memorytype.Source) bool {
	return slices.EqualFunc(a, b, func(x, y memorytype.Source) bool {
		return x.Session == y.Session && slices.Equal(x.EventIDs, y.EventIDs)
	})
}

// generate asks gen, telling the engine that the run waits meanwhile
// (jobs.Waiting) unless gen computes in this process (the offline
// extractor), so that the process runs others while a model answers.
func generate(ctx context.Context, gen model.Generator, req *model.GenerateRequest) (*model.GenerateResponse, error) {
	if !model.IsOfflineExtractor(gen) {
		defer jobs.Waiting(ctx)()
	}
	return gen.Generate(ctx, req)
}
