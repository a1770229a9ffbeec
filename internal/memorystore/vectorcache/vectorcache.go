// Package vectorcache is the SQLite memory store's cache of scopes for
// similarity search: a scope's visible memories, in a compact form, with
// the document frequencies of their vectors and terms, kept current write
// by write, so that a search of a held scope reads nothing from the
// database and ranks the scope's memories in memory with retrieval.Rank.
// Score ranks by the same rule memories a store gathered itself (the
// in-memory store ranks every memory of the scope with it).
package vectorcache

import (
	"context"
	"hash/maphash"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/kioku-ai/kioku/internal/unixnano"
	"github.com/kioku-ai/kioku/memorybank/memorydriver"
	"github.com/kioku-ai/kioku/memorybank/memorytype"
	"github.com/kioku-ai/kioku/memorybank/metadata"
	"github.com/kioku-ai/kioku/memorybank/profile"
	"github.com/kioku-ai/kioku/memorybank/retrieval"
	"github.com/kioku-ai/kioku/model"
)

// DefaultBytes is the default budget of a Cache.
const DefaultBytes = 64 << 20

// Cache keeps the memories of recently searched scopes in memory for
// stores that search by themselves (the SQLite store): a scope is loaded on
// the search that misses it and kept current with Put after each committed
// write, and the least recently searched scopes are evicted to keep the
// cache's size within its byte budget. An evicted scope is loaded again on
// its next search and ranks exactly as before: its statistics are
// recomputed from the same memories.
//
// Sizes are estimates of the heap a scope holds (its memories' texts,
// vectors, document frequencies and the structures around them), close to
// but below what the Go runtime sees, which adds its allocation classes and,
// between collections, garbage.
//
// Loading races with writes; write generations settle it. A writer calls
// Touch for each scope it changes before it commits, and Put after. A
// search that misses reads the scope's generation before it loads the
// scope, and installs what it loaded only if no writer touched the scope
// meanwhile (it still answers from it: the search overlapped the write).
// Generations live in a fixed table indexed by a hash of the scope, so they
// take the same memory however many scopes are written; two scopes that
// share a slot only cost an occasional extra load.
type Cache struct {
	budget int64
	seed   maphash.Seed

	mu         sync.Mutex
	scopes     map[string]*scopeIndex
	head, tail *scopeIndex // most and least recently searched

	size                    atomic.Int64
	gens                    [genSlots]atomic.Uint64
	hits, misses, evictions atomic.Uint64
	installed, notInstalled atomic.Uint64
}

const genSlots = 4096

// New returns an empty cache of budget bytes; a budget of 0 or less keeps
// nothing (every search loads its scope).
func New(budget int64) *Cache {
	return &Cache{budget: budget, seed: maphash.MakeSeed(), scopes: map[string]*scopeIndex{}}
}

// Stats are a cache's figures.
type Stats struct {
	// Bytes is the estimated size of the scopes held, Budget its bound.
	Bytes, Budget int64
	// Scopes is how many scopes are held.
	Scopes int
	// Hits and Misses count searches that found their scope held or had to
	// load it; Evictions counts scopes evicted to stay within the budget.
	Hits, Misses, Evictions uint64
}

// Stats returns the cache's figures.
func (c *Cache) Stats() Stats {
	c.mu.Lock()
	n := len(c.scopes)
	c.mu.Unlock()
	return Stats{
		Bytes: c.size.Load(), Budget: c.budget, Scopes: n,
		Hits: c.hits.Load(), Misses: c.misses.Load(), Evictions: c.evictions.Load(),
	}
}

func indexKey(app, scopeKey string) string { return app + "\x00" + scopeKey }

func (c *Cache) gen(key string) *atomic.Uint64 {
	return &c.gens[maphash.String(c.seed, key)%genSlots]
}

// Touch marks a scope as being written: call it before the write commits.
func (c *Cache) Touch(app, scopeKey string) { c.gen(indexKey(app, scopeKey)).Add(1) }

// Loaded reports whether a scope is held.
func (c *Cache) Loaded(app, scopeKey string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.scopes[indexKey(app, scopeKey)] != nil
}

// Put adds, replaces or (for a deleted memory) removes a memory in its
// scope, if the scope is held: call it after the write committed.
func (c *Cache) Put(m *memorytype.Memory) {
	key := indexKey(m.App, m.Scope.Key())
	c.gen(key).Add(1) // a load that read the generation before now is stale
	c.mu.Lock()
	s := c.scopes[key]
	c.mu.Unlock()
	if s == nil {
		return
	}
	s.mu.Lock()
	if !s.resident {
		s.mu.Unlock()
		return
	}
	before := s.bytes
	s.remove(m.ID)
	if !m.Deleted {
		s.put(m)
	}
	c.size.Add(s.bytes - before)
	s.mu.Unlock()
	c.evict()
}

// installAttempts bounds the loads of one search whose results writers
// keep making stale; the last one answers the search without being kept.
const installAttempts = 3

// Search ranks the scope's visible memories that pass the query's filter
// with retrieval.Rank: the q.K best of each side. A scope not held is
// loaded with load (its visible memories) and kept.
func (c *Cache) Search(ctx context.Context, q memorydriver.SearchQuery, load func(ctx context.Context) ([]*memorytype.Memory, error)) ([]retrieval.Ranked[*memorytype.Memory], error) {
	key := indexKey(q.App, q.ScopeKey)
	c.mu.Lock()
	s := c.scopes[key]
	if s != nil {
		c.toFront(s)
	}
	c.mu.Unlock()
	if s != nil {
		s.mu.RLock()
		res, resident := s.search(q), s.resident
		s.mu.RUnlock()
		if resident {
			c.hits.Add(1)
			return res, nil
		}
		// Evicted meanwhile: it may have missed a write since.
	}
	c.misses.Add(1)
	for attempt := 1; ; attempt++ {
		g := c.gen(key)
		gen := g.Load()
		mems, err := load(ctx)
		if err != nil {
			return nil, err
		}
		s := newScopeIndex(q.App, q.ScopeKey, mems)
		if c.install(key, s, g, gen) || attempt == installAttempts {
			s.mu.RLock() // installed, writers may change it already
			defer s.mu.RUnlock()
			return s.search(q), nil
		}
	}
}

// install keeps s unless a writer touched the scope since gen was read, or
// the scope alone exceeds the budget. It reports whether s is current (it
// may still not be kept).
func (c *Cache) install(key string, s *scopeIndex, g *atomic.Uint64, gen uint64) bool {
	c.mu.Lock()
	if g.Load() != gen {
		c.mu.Unlock()
		c.notInstalled.Add(1)
		return false
	}
	if old := c.scopes[key]; old != nil || s.bytes > c.budget {
		// Another search installed it meanwhile, or it does not fit.
		c.mu.Unlock()
		return true
	}
	s.resident = true
	c.scopes[key] = s
	c.toFront(s)
	c.size.Add(s.bytes)
	c.mu.Unlock()
	c.installed.Add(1)
	c.evict()
	return true
}

// evict removes the least recently searched scopes until the cache is
// within its budget. A scope being searched or written is passed over.
func (c *Cache) evict() {
	if c.size.Load() <= c.budget {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for s := c.tail; s != nil && c.size.Load() > c.budget; {
		prev := s.prev
		if s.mu.TryLock() {
			c.unlink(s)
			delete(c.scopes, indexKey(s.app, s.scopeKey))
			s.resident = false
			c.size.Add(-s.bytes)
			s.mu.Unlock()
			c.evictions.Add(1)
		}
		s = prev
	}
}

// toFront makes s the most recently searched scope. c.mu is held.
func (c *Cache) toFront(s *scopeIndex) {
	if c.head == s {
		return
	}
	c.unlink(s)
	s.next = c.head
	if c.head != nil {
		c.head.prev = s
	}
	c.head = s
	if c.tail == nil {
		c.tail = s
	}
}

// unlink removes s from the recency list. c.mu is held.
func (c *Cache) unlink(s *scopeIndex) {
	if s.prev != nil {
		s.prev.next = s.next
	} else if c.head == s {
		c.head = s.next
	}
	if s.next != nil {
		s.next.prev = s.prev
	} else if c.tail == s {
		c.tail = s.prev
	}
	s.prev, s.next = nil, nil
}

// scopeIndex holds one scope: its visible memories, in a compact form, the
// document frequencies of each embedding model, and those of the memories'
// terms (lexical retrieval).
type scopeIndex struct {
	app, scopeKey string
	scope         memorytype.Scope // every memory of the scope has this scope

	mu       sync.RWMutex
	entries  []indexEntry
	pos      map[string]int32 // memory id → index in entries
	models   []modelStats
	terms    retrieval.DocFreq // by bucket of the memories' terms
	bytes    int64             // the estimated size of all of the above
	resident bool              // held by the cache (false once evicted)

	prev, next *scopeIndex // the cache's recency list, under the cache's mu
}

// modelStats are the document frequencies of one embedding model.
type modelStats struct {
	name string
	df   retrieval.DocFreq
}

// indexEntry is a memory as a scope index keeps it: what searches filter
// on and return, without its scope (the scope index's) and app.
type indexEntry struct {
	id                           string
	fact                         string
	names                        *entryNames // nil when all are empty
	topics                       []string
	metadata                     metadata.Map
	sources                      []memorytype.Source
	createNS, updateNS, expireNS int64
	eventNS, statedNS            int64
	revision                     int64
	model                        int32 // index in models; -1 without a vector
	vec                          retrieval.Vector
	terms                        []model.Term
}

// entryNames are a memory's display name and description, and its
// profile field (nil: a natural-language memory), which most memories
// lack (a pointer costs an entry less than two strings and a pointer).
type entryNames struct {
	displayName, description string
	profile                  *profile.Field
}

// The estimated fixed sizes of the structures, in bytes: Go's own sizes
// plus what a map slot and a string or slice header around them take.
var (
	scopeOverhead = int64(unsafe.Sizeof(scopeIndex{})) + 64 /* map headers */ + 48 /* cache map slot */ + 160 /* the Scope map */
	entryStruct   = int64(unsafe.Sizeof(indexEntry{}))                                                        // per slot of the entries slice's capacity
	termSize      = int64(unsafe.Sizeof(model.Term{}))
	modelOverhead = int64(unsafe.Sizeof(modelStats{}))
)

// entrySize is an entry's slot in its scope's map of ids.
const entrySize = 32

func newScopeIndex(app, scopeKey string, memories []*memorytype.Memory) *scopeIndex {
	s := &scopeIndex{
		app: app, scopeKey: scopeKey, scope: memorytype.ParseScopeKey(scopeKey),
		pos: make(map[string]int32, len(memories)), entries: make([]indexEntry, 0, len(memories)),
	}
	s.bytes = scopeOverhead + int64(len(app)+2*len(scopeKey)) + entryStruct*int64(cap(s.entries))
	for _, m := range memories {
		s.put(m)
	}
	return s
}

// put adds a memory that is not in the index.
func (s *scopeIndex) put(m *memorytype.Memory) {
	if m.Deleted {
		return
	}
	idx := int32(-1)
	if len(m.Embedding) > 0 {
		idx = int32(slices.IndexFunc(s.models, func(ms modelStats) bool { return ms.name == m.EmbeddingModel }))
		if idx < 0 {
			idx = int32(len(s.models))
			s.models = append(s.models, modelStats{name: m.EmbeddingModel})
			s.bytes += modelOverhead + int64(len(m.EmbeddingModel))
		}
	}
	e := indexEntry{
		id: m.ID, fact: m.Fact, topics: slices.Clone(m.Topics), metadata: m.Metadata.Clone(),
		sources:  cloneSources(m.Sources),
		createNS: unixnano.From(m.CreateTime), updateNS: unixnano.From(m.UpdateTime), expireNS: unixnano.From(m.ExpireTime),
		eventNS: unixnano.From(m.EventTime), statedNS: unixnano.From(m.StatedTime),
		revision: m.Revision, model: idx, terms: model.OfflineTerms(m.Fact),
	}
	if m.DisplayName != "" || m.Description != "" || m.Profile != nil {
		e.names = &entryNames{displayName: m.DisplayName, description: m.Description}
		if m.Profile != nil {
			p := *m.Profile
			e.names.profile = &p
		}
	}
	if idx >= 0 {
		e.vec = retrieval.NewVector(m.Embedding)
		s.count(&s.models[idx].df, e.vec, 1)
	}
	s.count(&s.terms, bucketVector(e.terms), 1)
	s.bytes += e.size()
	s.pos[m.ID] = int32(len(s.entries))
	c := cap(s.entries)
	s.entries = append(s.entries, e)
	s.bytes += entryStruct * int64(cap(s.entries)-c)
}

// count adds (sign 1) or removes (sign -1) a vector from document
// frequencies, keeping the scope's size current.
func (s *scopeIndex) count(st *retrieval.DocFreq, v retrieval.Vector, sign int32) {
	before := st.Bytes()
	st.Add(v, sign)
	s.bytes += st.Bytes() - before
}

// bucketVector returns the buckets of terms as a sparse vector, for the
// document frequencies of terms.
func bucketVector(terms []model.Term) retrieval.Vector {
	b := retrieval.Buckets(terms)
	idx := make([]uint16, len(b))
	for i, x := range b {
		idx[i] = uint16(x)
	}
	return retrieval.SparseVector(model.OfflineDimensions, idx)
}

// remove removes a memory if it is in the index.
func (s *scopeIndex) remove(id string) {
	i, ok := s.pos[id]
	if !ok {
		return
	}
	e := &s.entries[i]
	if e.model >= 0 {
		s.count(&s.models[e.model].df, e.vec, -1)
	}
	s.count(&s.terms, bucketVector(e.terms), -1)
	s.bytes -= e.size()
	last := int32(len(s.entries) - 1)
	if i != last {
		s.entries[i] = s.entries[last]
		s.pos[s.entries[i].id] = i
	}
	s.entries[last] = indexEntry{}
	s.entries = s.entries[:last]
	delete(s.pos, id)
}

// size estimates the heap an entry holds.
func (e *indexEntry) size() int64 {
	n := entrySize + int64(len(e.id)+len(e.fact)) + e.vec.Bytes() + termSize*int64(len(e.terms))
	if e.names != nil {
		n += int64(unsafe.Sizeof(entryNames{})) + int64(len(e.names.displayName)+len(e.names.description))
	}
	if p := e.profile(); p != nil {
		n += 64 + int64(len(p.SchemaID)+len(p.Field)+len(profile.ValueText(p.Value)))
	}
	for _, t := range e.topics {
		n += 16 + int64(len(t))
	}
	if e.metadata != nil {
		n += 48
		for k, v := range e.metadata {
			n += 48 + int64(len(k)+len(v.Text()))
		}
	}
	for _, src := range e.sources {
		n += int64(unsafe.Sizeof(src)) + int64(len(src.Session))
		for _, id := range src.EventIDs {
			n += 16 + int64(len(id))
		}
	}
	return n
}

// profile returns the entry's profile field (nil: none).
func (e *indexEntry) profile() *profile.Field {
	if e.names == nil {
		return nil
	}
	return e.names.profile
}

// memoryType returns the type of the entry's memory.
func (e *indexEntry) memoryType() memorytype.MemoryType {
	if e.profile() != nil {
		return memorytype.StructuredProfile
	}
	return memorytype.NaturalLanguage
}

// memory returns the entry as a Memory (without its vector).
func (s *scopeIndex) memory(e *indexEntry) *memorytype.Memory {
	m := s.view(e)
	m.Scope, m.Topics, m.Metadata, m.Sources = maps.Clone(s.scope), slices.Clone(e.topics), e.metadata.Clone(), cloneSources(e.sources)
	return m
}

// view returns the entry as a Memory that shares the entry's scope,
// topics, metadata and sources, for a filter to read.
func (s *scopeIndex) view(e *indexEntry) *memorytype.Memory {
	m := &memorytype.Memory{
		App: s.app, ID: e.id, Fact: e.fact, Scope: s.scope,
		Topics: e.topics, Metadata: e.metadata, Sources: e.sources,
		CreateTime: unixnano.Time(e.createNS), UpdateTime: unixnano.Time(e.updateNS), ExpireTime: unixnano.Time(e.expireNS),
		EventTime: unixnano.Time(e.eventNS), StatedTime: unixnano.Time(e.statedNS),
		Revision: e.revision, EmbeddingModel: s.modelName(e.model),
	}
	if e.names != nil {
		m.DisplayName, m.Description = e.names.displayName, e.names.description
	}
	if p := e.profile(); p != nil {
		c := *p
		m.Profile = &c
	}
	return m
}

func (s *scopeIndex) modelName(i int32) string {
	if i < 0 {
		return ""
	}
	return s.models[i].name
}

// search ranks the scope's visible memories that pass the filter with
// Rank: dense scores of the memories of q.Model against the weighted query
// vector, lexical similarity of all of them to q.Terms.
func (s *scopeIndex) search(q memorydriver.SearchQuery) []retrieval.Ranked[*memorytype.Memory] {
	if q.K <= 0 {
		return nil
	}
	mi := int32(slices.IndexFunc(s.models, func(m modelStats) bool { return m.name == q.Model }))
	var wq []float32
	if mi >= 0 && s.models[mi].df.N() > 0 && len(q.Vector) > 0 {
		st := &s.models[mi].df
		wq = retrieval.WeightedQuery(q.Vector, st.N(), st.Get)
	}
	now := unixnano.From(q.Now)
	return retrieval.Rank(q.Ranking(), func(yield func(retrieval.Candidate[*indexEntry]) bool) {
		for i := range s.entries {
			e := &s.entries[i]
			if e.expireNS != 0 && now >= e.expireNS || !q.Filter.MatchesType(e.memoryType()) || !q.Filter.MatchesTopics(e.topics) ||
				!q.Filter.MatchesTimes(unixnano.Time(e.eventNS), unixnano.Time(e.statedNS)) || q.Filter.Residual() && !q.Filter.MatchesRest(s.view(e)) {
				continue
			}
			c := retrieval.Candidate[*indexEntry]{Item: e, ID: e.id, Terms: e.terms, HasEventTime: e.eventNS != 0}
			if wq != nil && e.model == mi {
				c.Dense, c.HasDense = e.vec.Dot(wq), true
			}
			if !yield(c) {
				return
			}
		}
	}, retrieval.TermStats{N: s.terms.N(), DF: s.terms.Get}, s.memory)
}

// Score ranks memories by the same rule as Cache.Search: those of a scope
// loaded afresh, or candidates a store fetched by other means.
func Score(q memorydriver.SearchQuery, memories []*memorytype.Memory) []retrieval.Ranked[*memorytype.Memory] {
	return newScopeIndex(q.App, q.ScopeKey, memories).search(q)
}

// cloneSources returns a deep copy of sources.
func cloneSources(sources []memorytype.Source) []memorytype.Source {
	if len(sources) == 0 {
		return nil
	}
	out := make([]memorytype.Source, len(sources))
	for i, s := range sources {
		out[i] = memorytype.Source{Session: s.Session, EventIDs: slices.Clone(s.EventIDs)}
	}
	return out
}
