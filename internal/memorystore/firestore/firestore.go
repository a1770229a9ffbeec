// Package firestore is the memory bank store for deployments of several
// kioku servers, in Cloud Firestore (native mode). Any server can claim and
// finish any pending operation.
//
// # Document layout
//
// Under the root collection (kioku_apps by default):
//
//	kioku_apps/{app}/kioku_memories/{memory}
//	    scope_key, fact, scope (map), topics (array), metadata (map),
//	    sources (JSON text), source_sessions (array, for forgetting),
//	    create_ns, update_ns, expire_ns, revision, deleted, embedding
//	    (vector), embedding_model, terms (array: the IDs of the fact's
//	    model.OfflineTerms), terms_version (the offline embedder's name),
//	    event_ns, stated_ns (0: unknown)
//	kioku_apps/{app}/kioku_memories/{memory}/kioku_revisions/{number, 20 digits}
//	    number, expire_ns, body (the revision as JSON)
//	kioku_apps/{app}/kioku_config/memory_bank      body (JSON)
//	kioku_apps/{app}/kioku_operations/{operation}
//	    state (PENDING, RUNNING, ...), method, scope_key, create_ns,
//	    claim_ns (when it may be claimed: due time or lease expiry; 0 once
//	    finished), lease_expiry_ns, attempt, body (memorybank's operation
//	    record, JSON)
//	kioku_apps/{app}/kioku_watermarks/{sha256 of the session name}
//	    session, seq
//	kioku_apps/{app}/kioku_scope_stats/{sha256 of the scope key}
//	    body: per embedding model, the count of memories and, per vector
//	    coordinate, how many of them use it; under "kioku_terms" the same
//	    for the buckets of the memories' terms (for retrieval's weights)
//	kioku_apps_schema/memorybank
//	    version: the formats the documents are in (see Migrate)
//
// Records are memorybank's stored forms (MarshalOperation, MarshalConfig,
// Revision.MarshalBody, MarshalSources): tagged records with enums by name,
// the same in both stores.
//
// A Write is one transaction: it reads the operations, memories,
// watermarks and scope statistics it changes, checks every precondition
// (for a claim, with a query for a running operation of the scope), then
// writes. A worker's lease is fenced by the operation's attempt. Workers
// find work with one collection group query on claim_ns
// (QueuedOperations); idle servers run it with a backoff (memorybank's
// scheduler), so an idle deployment reads about one document per server
// every 30 seconds for its operations.
//
// # Retrieval
//
// SearchMemories reads the scope's statistics and gathers candidates with a
// vector search (FindNearest, dot product) and a bounded lexical pass
// (array-contains-any on the terms), both pre-filtered on the scope and
// deleted = false; topic and metadata filters and expiry are applied in
// the server, and memorybank.Rank ranks what is left (see SearchMemories).
// A retrieval costs the statistics document plus the candidates read, a
// number bounded by K (see SearchMemories): top_k 10 reads at most 46
// documents with the offline embedder, 76 with a model embedder or when
// the query names a period. With the offline embedder the lexical pass
// goes first, and when it reads every memory that holds a query term and
// finds at least K the dense side is not read: at most 31 then.
//
// # Indexes
//
// firestore.indexes.json at the repository root lists the composite and
// vector indexes production needs (the emulator needs none): the vector
// index on (scope_key, deleted, embedding_model, embedding) must have the
// embedder's dimension; create one per embedder in use. The lexical pass
// needs (terms array-contains, scope_key, deleted).
package firestore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/kioku-ai/kioku/internal/firestoredb"
	"github.com/kioku-ai/kioku/internal/unixnano"

	"cloud.google.com/go/firestore"
	firestorepb "cloud.google.com/go/firestore/apiv1/firestorepb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/memorybank"
	"github.com/kioku-ai/kioku/model"
)

// Options configures a Store.
type Options struct {
	// Root is the root collection. Default "kioku_apps".
	Root string
	// MaxAttempts bounds the tries of one transaction. Default 30.
	MaxAttempts int
}

// Store is the Firestore memory bank store.
type Store struct {
	c    *firestore.Client
	root string
	txn  []firestore.TransactionOption
}

var _ memorybank.Store = (*Store)(nil)

// New returns a Store on a Firestore client.
func New(c *firestore.Client, o Options) *Store {
	if o.Root == "" {
		o.Root = "kioku_apps"
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = 30
	}
	return &Store{c: c, root: o.Root, txn: []firestore.TransactionOption{firestore.MaxAttempts(o.MaxAttempts)}}
}

func (s *Store) app(app string) *firestore.DocumentRef { return s.c.Collection(s.root).Doc(app) }

func (s *Store) memories(app string) *firestore.CollectionRef {
	return s.app(app).Collection("kioku_memories")
}

func (s *Store) revisionRef(app, memoryID string, n int64) *firestore.DocumentRef {
	return s.memories(app).Doc(memoryID).Collection("kioku_revisions").Doc(fmt.Sprintf("%020d", n))
}

func (s *Store) opRef(app, id string) *firestore.DocumentRef {
	return s.app(app).Collection("kioku_operations").Doc(id)
}

func hashID(v string) string {
	h := sha256.Sum256([]byte(v))
	return hex.EncodeToString(h[:16])
}

func (s *Store) watermarkRef(app, session string) *firestore.DocumentRef {
	return s.app(app).Collection("kioku_watermarks").Doc(hashID(session))
}

func (s *Store) statsRef(app, scopeKey string) *firestore.DocumentRef {
	return s.app(app).Collection("kioku_scope_stats").Doc(hashID(scopeKey))
}

// memoryDoc is a memory document.
type memoryDoc struct {
	ScopeKey       string             `firestore:"scope_key"`
	Fact           string             `firestore:"fact"`
	Scope          map[string]string  `firestore:"scope"`
	Topics         []string           `firestore:"topics"`
	Metadata       map[string]string  `firestore:"metadata"`
	Sources        string             `firestore:"sources"`
	SourceSessions []string           `firestore:"source_sessions"`
	CreateNS       int64              `firestore:"create_ns"`
	UpdateNS       int64              `firestore:"update_ns"`
	ExpireNS       int64              `firestore:"expire_ns"`
	Revision       int64              `firestore:"revision"`
	Deleted        bool               `firestore:"deleted"`
	Embedding      firestore.Vector32 `firestore:"embedding,omitempty"`
	EmbeddingModel string             `firestore:"embedding_model"`
	// Terms are the IDs of model.OfflineTerms of the fact, of TermsVersion
	// (for the lexical pass of retrieval).
	Terms        []int64 `firestore:"terms"`
	TermsVersion string  `firestore:"terms_version"`
	EventNS      int64   `firestore:"event_ns"`
	StatedNS     int64   `firestore:"stated_ns"`
}

// termsVersion names the version of model.OfflineTerms that the terms of
// a memory document were computed with: that of the offline embedder, whose
// version changes with them.
var termsVersion = model.Offline{}.Name()

// termIDs returns the IDs of the terms of a fact.
func termIDs(fact string) []int64 {
	ts := model.OfflineTerms(fact)
	out := make([]int64, len(ts))
	for i, t := range ts {
		out[i] = int64(t.ID)
	}
	return out
}

func toDoc(m *memorybank.Memory) (*memoryDoc, error) {
	sources, err := memorybank.MarshalSources(m.Sources)
	if err != nil {
		return nil, err
	}
	d := &memoryDoc{
		ScopeKey: m.Scope.Key(), Fact: m.Fact, Scope: m.Scope, Topics: m.Topics, Metadata: m.Metadata,
		Sources: string(sources), CreateNS: unixnano.From(m.CreateTime), UpdateNS: unixnano.From(m.UpdateTime), ExpireNS: unixnano.From(m.ExpireTime),
		Revision: m.Revision, Deleted: m.Deleted, EmbeddingModel: m.EmbeddingModel,
		Terms: termIDs(m.Fact), TermsVersion: termsVersion,
		EventNS: unixnano.From(m.EventTime), StatedNS: unixnano.From(m.StatedTime),
	}
	if d.Topics == nil {
		d.Topics = []string{}
	}
	if d.Metadata == nil {
		d.Metadata = map[string]string{}
	}
	d.SourceSessions = []string{}
	for _, src := range m.Sources {
		d.SourceSessions = append(d.SourceSessions, src.Session)
	}
	if len(m.Embedding) > 0 {
		d.Embedding = firestore.Vector32(m.Embedding)
	}
	return d, nil
}

func fromSnap(app string, snap *firestore.DocumentSnapshot) (*memorybank.Memory, error) {
	var d memoryDoc
	if err := snap.DataTo(&d); err != nil {
		return nil, err
	}
	m := &memorybank.Memory{
		App: app, ID: snap.Ref.ID, Fact: d.Fact, Scope: d.Scope, Topics: d.Topics, Metadata: d.Metadata,
		CreateTime: unixnano.Time(d.CreateNS), UpdateTime: unixnano.Time(d.UpdateNS), ExpireTime: unixnano.Time(d.ExpireNS),
		Revision: d.Revision, Deleted: d.Deleted, EmbeddingModel: d.EmbeddingModel,
		EventTime: unixnano.Time(d.EventNS), StatedTime: unixnano.Time(d.StatedNS),
	}
	if len(d.Embedding) > 0 {
		m.Embedding = []float32(d.Embedding)
	}
	if len(m.Topics) == 0 {
		m.Topics = nil
	}
	if len(m.Metadata) == 0 {
		m.Metadata = nil
	}
	var err error
	if m.Sources, err = memorybank.UnmarshalSources([]byte(d.Sources)); err != nil {
		return nil, fmt.Errorf("decoding memory %s: %w", m.ID, err)
	}
	return m, nil
}

func appOf(snap *firestore.DocumentSnapshot) string { return snap.Ref.Parent.Parent.ID }

// GetMemory implements memorybank.Store.
func (s *Store) GetMemory(ctx context.Context, app, id string) (*memorybank.Memory, error) {
	snap, err := s.memories(app).Doc(id).Get(ctx)
	if firestoredb.IsNotFound(err) {
		return nil, fault.NotFoundf("memory apps/%s/memories/%s not found", app, id)
	}
	if err != nil {
		return nil, firestoredb.Wrap(err)
	}
	return fromSnap(app, snap)
}

// collect runs a query page by page until limit memories pass keep.
func collect(ctx context.Context, base firestore.Query, limit int, after []any, keep func(*memorybank.Memory) bool, app func(*firestore.DocumentSnapshot) string, cursor func(*memorybank.Memory) []any) ([]*memorybank.Memory, error) {
	var out []*memorybank.Memory
	for len(out) < limit {
		want := limit - len(out)
		q := base.Limit(want)
		if after != nil {
			q = q.StartAfter(after...)
		}
		snaps, err := q.Documents(ctx).GetAll()
		if err != nil {
			return nil, firestoredb.Wrap(err)
		}
		for _, snap := range snaps {
			m, err := fromSnap(app(snap), snap)
			if err != nil {
				return nil, err
			}
			if cursor != nil {
				after = cursor(m)
			}
			if keep(m) {
				out = append(out, m)
			}
		}
		if len(snaps) < want || cursor == nil {
			break
		}
	}
	return out, nil
}

// ListMemories implements memorybank.Store. The first topic and the
// metadata conditions are query filters; further topics and expiry are
// checked in the server, reading further pages as needed.
func (s *Store) ListMemories(ctx context.Context, q memorybank.ListQuery) ([]*memorybank.Memory, error) {
	if q.Filter.None {
		return nil, nil
	}
	base := s.memories(q.App).Where("deleted", "==", false)
	if q.ScopeKey != "" {
		base = base.Where("scope_key", "==", q.ScopeKey)
	}
	if len(q.Filter.Topics) > 0 {
		base = base.Where("topics", "array-contains", q.Filter.Topics[0])
	}
	for k, v := range q.Filter.Metadata {
		base = base.WherePath(firestore.FieldPath{"metadata", k}, "==", v)
	}
	base = base.OrderBy("update_ns", firestore.Desc).OrderBy(firestore.DocumentID, firestore.Desc)
	var after []any
	if q.AfterID != "" {
		after = []any{q.AfterUpdate.UnixNano(), q.AfterID}
	}
	return collect(ctx, base, q.Limit, after,
		func(m *memorybank.Memory) bool {
			return m.Visible(q.Now) && q.Filter.Matches(m.Topics, m.Metadata) && q.Filter.MatchesTimes(m.EventTime, m.StatedTime)
		},
		func(*firestore.DocumentSnapshot) string { return q.App },
		func(m *memorybank.Memory) []any { return []any{unixnano.From(m.UpdateTime), m.ID} })
}

// scopeStats is the document of a scope's vector statistics.
type scopeStats map[string]*modelStats

type modelStats struct {
	N  int     `json:"n"`
	DF []int32 `json:"df"`
}

func readStats(snap *firestore.DocumentSnapshot, err error) (scopeStats, error) {
	if firestoredb.IsNotFound(err) {
		return scopeStats{}, nil
	}
	if err != nil {
		return nil, err
	}
	body, err := snap.DataAt("body")
	if err != nil {
		return nil, err
	}
	st := scopeStats{}
	if err := json.Unmarshal([]byte(body.(string)), &st); err != nil {
		return nil, fmt.Errorf("decoding scope statistics: %w", err)
	}
	return st, nil
}

// termsKey is the entry of scopeStats that counts the memories' terms
// (memorybank.TermStats, by bucket) rather than the vectors of a model.
const termsKey = "kioku_terms"

// counted is what a memory document counts in its scope's term
// statistics: the buckets of the term IDs it holds, if it counts them at
// all.
type counted struct {
	terms []int64
	ok    bool
}

// countedNow is what a memory written now counts: its fact's terms.
func countedNow(m *memorybank.Memory) counted { return counted{terms: termIDs(m.Fact), ok: true} }

// countedIn returns what a stored memory document counts: a document
// written with terms, of this server's version or an older one, was
// counted with the terms it holds (a server of another version counts the
// same IDs), one written before memories had terms (no terms_version) was
// not counted. It also reports whether its terms are of this version.
func countedIn(snap *firestore.DocumentSnapshot) (c counted, current bool, err error) {
	var d struct {
		Terms        []int64 `firestore:"terms"`
		TermsVersion string  `firestore:"terms_version"`
	}
	if err := snap.DataTo(&d); err != nil {
		return counted{}, false, err
	}
	return counted{terms: d.Terms, ok: d.TermsVersion != ""}, d.TermsVersion == termsVersion, nil
}

// count adds (sign 1) or removes (sign -1) a memory's vector and what it
// counts of its terms.
func (st scopeStats) count(m *memorybank.Memory, c counted, sign int32) {
	if m == nil || m.Deleted {
		return
	}
	if c.ok {
		ts := st.entry(termsKey, model.OfflineDimensions)
		ts.N += int(sign)
		terms := make([]model.Term, len(c.terms))
		for i, id := range c.terms {
			terms[i] = model.Term{ID: uint32(id)}
		}
		for _, b := range memorybank.Buckets(terms) {
			ts.DF[b] += sign
		}
	}
	if len(m.Embedding) == 0 {
		return
	}
	ms := st.entry(m.EmbeddingModel, len(m.Embedding))
	ms.N += int(sign)
	for i, x := range m.Embedding {
		if x != 0 {
			ms.DF[i] += sign
		}
	}
}

// entry returns the statistics of a key, with at least dims coordinates.
func (st scopeStats) entry(key string, dims int) *modelStats {
	ms := st[key]
	if ms == nil {
		ms = &modelStats{}
		st[key] = ms
	}
	if len(ms.DF) < dims {
		ms.DF = append(ms.DF, make([]int32, dims-len(ms.DF))...)
	}
	return ms
}

// termStats returns the scope's term statistics.
func (st scopeStats) termStats() memorybank.TermStats {
	ts := st[termsKey]
	if ts == nil {
		return memorybank.TermStats{DF: func(int) int32 { return 0 }}
	}
	return memorybank.TermStats{N: ts.N, DF: ts.df}
}

// df returns how many vectors use coordinate i.
func (ms *modelStats) df(i int) int32 {
	if i < len(ms.DF) {
		return ms.DF[i]
	}
	return 0
}

// The bounds of a search's candidates, for a search of K per side: a
// retrieval reads at most 1 + (K+5) + (2K+10) documents (the scope's
// statistics, the dense side, the lexical side) when it has no filter and
// no expired memory awaits the sweeper; top_k 10 reads at most 46 with the
// offline embedder (K = 10) and 76 with a model embedder, whose sides
// each return 20 for fusion, or when the query names a period (or the
// request gives one), whose preference reorders the 20 best. A filter (topics, metadata, times) widens
// both sides to 10K+50, as the server drops what does not match.
const (
	// denseMargin is how many more than K the dense side's FindNearest
	// asks for, for memories that expired but are not yet swept.
	denseMargin = 5
	// maxNearest bounds the dense side's FindNearest, also when it asks
	// again for more (see dense).
	maxNearest = 1000
	// maxLexicalTerms is the most values array-contains-any takes.
	maxLexicalTerms = 30
)

// denseLimit is the FindNearest limit of a search.
func denseLimit(q memorybank.SearchQuery) int {
	if !q.Filter.Empty() {
		return min(maxNearest, 10*q.K+50)
	}
	return min(maxNearest, q.K+denseMargin)
}

// lexicalBudget is the most memories the lexical pass reads: the query's
// rarest terms are looked up while the memories that may hold them (by
// the scope's document frequencies) fit it.
func lexicalBudget(q memorybank.SearchQuery) int {
	if !q.Filter.Empty() {
		return min(maxNearest, 10*q.K+50)
	}
	return min(maxNearest, 2*q.K+10)
}

// SearchMemories implements memorybank.Store. It reads the scope's
// statistics, then gathers candidates in two bounded queries, both
// pre-filtered on the scope and deleted = false: the dense side's
// FindNearest (dot product with the weighted query vector, pre-filtered on
// the embedding model too; K+5 memories, asked again for up to 1,000 when
// fewer than K of them are visible), and the lexical pass,
// array-contains-any on the memories' term IDs with the query's rarest
// terms (as many as the scope's document frequencies say fit in 2K+10
// memories, at most 30 terms; at most 2K+10 memories read, the first by
// document id when the rarest term alone is held by more). With a filter
// both sides read up to 10K+50 (see the bounds above). memorybank.Rank
// ranks the candidates after the filters and expiry are applied in the
// server, as the SQLite store ranks the whole scope: the same dense side
// (FindNearest is exact on the emulator, approximate in production), and
// the same lexical side whenever the memories that SQLite ranks first are
// among the candidates, which the lexical pass ensures for every memory
// that shares one of the query's rare terms (held by at most 2K+10
// memories of the scope), and whenever the memories Rank's co-occurrence
// expansion draws on (those holding a query word at most 1 in 100 of the
// scope's memories hold) are too; when those words are held by more
// than 2K+10 memories together they may not all be, and the expansion,
// a tenth of the query's weight, may then differ.
//
// With q.DenseFillsOnly (the offline embedder, whose ranking takes the
// dense side only to fill K) the lexical pass goes first, and FindNearest
// is skipped when the pass was complete (it looked up every query term
// some memory holds and read fewer than its bound, so it read every
// memory that holds one) and Rank finds K memories by the lexical side
// among its memories alone: the dense side could only have added memories
// that hold none of the query's terms, which Rank reaches only through
// its feedback terms and at a third of the coverage of a memory that
// holds one query word (TestSearchReadsBounded compares the results with
// FindNearest run and skipped). Otherwise FindNearest runs as without it,
// and its candidates come first, so that Rank sees the same candidates in
// the same order.
func (s *Store) SearchMemories(ctx context.Context, q memorybank.SearchQuery) ([]memorybank.Scored, error) {
	if q.Filter.None || q.K <= 0 {
		return nil, nil
	}
	st, err := readStats(s.statsRef(q.App, q.ScopeKey).Get(ctx))
	if err != nil {
		return nil, firestoredb.Wrap(err)
	}
	base := s.memories(q.App).Where("scope_key", "==", q.ScopeKey).Where("deleted", "==", false)
	seen := map[string]bool{}
	var cands []memorybank.Candidate[*memorybank.Memory]
	// add makes candidates of the memories of snaps not seen yet and
	// returns how many of snaps are candidates, seen before or not.
	var wq []float32
	add := func(snaps []*firestore.DocumentSnapshot) (int, error) {
		n := 0
		for _, snap := range snaps {
			if ok, dup := seen[snap.Ref.ID]; dup {
				if ok {
					n++
				}
				continue
			}
			m, err := fromSnap(q.App, snap)
			if err != nil {
				return 0, err
			}
			ok := m.Visible(q.Now) && q.Filter.Matches(m.Topics, m.Metadata) && q.Filter.MatchesTimes(m.EventTime, m.StatedTime)
			seen[snap.Ref.ID] = ok
			if !ok {
				continue
			}
			n++
			c := memorybank.Candidate[*memorybank.Memory]{Item: m, ID: m.ID, Terms: model.OfflineTerms(m.Fact), HasEventTime: !m.EventTime.IsZero()}
			if wq != nil && m.EmbeddingModel == q.Model && len(m.Embedding) > 0 {
				for i, x := range m.Embedding {
					if i < len(wq) {
						c.Dense += float64(x) * float64(wq[i])
					}
				}
				c.HasDense = true
			}
			m.Embedding = nil
			cands = append(cands, c)
		}
		return n, nil
	}
	ts := st.termStats()
	budget := lexicalBudget(q)
	var lexical []*firestore.DocumentSnapshot
	// complete: the lexical pass read every memory that holds one of the
	// query's terms.
	complete := false
	lookUp := func() error {
		ids, all := rareTerms(q.Terms, ts, budget)
		if len(ids) == 0 {
			complete = all
			return nil
		}
		snaps, err := base.Where("terms", "array-contains-any", ids).Limit(budget).Documents(ctx).GetAll()
		lexical, complete = snaps, all && len(snaps) < budget
		return firestoredb.Wrap(err)
	}
	rank := func() []memorybank.Scored {
		return memorybank.Rank(q, slices.Values(cands), ts, func(m *memorybank.Memory) *memorybank.Memory { return m })
	}
	// When the dense side only fills K, the lexical pass goes first; when
	// it was complete and its memories alone give the lexical side K,
	// that is the result. Otherwise the candidates are gathered again,
	// the dense side's first.
	if q.DenseFillsOnly {
		if err := lookUp(); err != nil {
			return nil, err
		}
		if complete {
			if _, err := add(lexical); err != nil {
				return nil, err
			}
			ranked, n := rank(), 0
			for _, r := range ranked {
				n += min(r.LexicalRank, 1)
			}
			if n >= q.K {
				return ranked, nil
			}
			seen, cands = map[string]bool{}, nil
		}
	}
	if ms := st[q.Model]; ms != nil && ms.N > 0 && len(q.Vector) > 0 {
		wq = memorybank.WeightedQuery(q.Vector, ms.N, ms.df)
		// Ask again, for more, while the nearest hold fewer than K
		// candidates and there may be more: expired memories not yet
		// swept, or a filter's misses.
		for limit := denseLimit(q); ; limit = min(maxNearest, 4*limit) {
			snaps, err := base.Where("embedding_model", "==", q.Model).
				FindNearest("embedding", firestore.Vector32(wq), limit, firestore.DistanceMeasureDotProduct, nil).Documents(ctx).GetAll()
			if err != nil {
				return nil, firestoredb.Wrap(err)
			}
			n, err := add(snaps)
			if err != nil {
				return nil, err
			}
			if n >= q.K || len(snaps) < limit || limit == maxNearest {
				break
			}
		}
	}
	if !q.DenseFillsOnly {
		if err := lookUp(); err != nil {
			return nil, err
		}
	}
	// The dense side's candidates come first, as Rank's sums run in the
	// candidates' order.
	if _, err := add(lexical); err != nil {
		return nil, err
	}
	return rank(), nil
}

// rareTerms returns the IDs of the query's terms to look up: the rarest
// first while the memories that may hold them fit budget (always the
// rarest one), at most maxLexicalTerms, none that no memory holds.
func rareTerms(terms []model.Term, st memorybank.TermStats, budget int) (ids []any, all bool) {
	type term struct {
		id uint32
		df int32
	}
	var list []term
	for _, t := range terms {
		if df := st.DF(t.Bucket()); df > 0 {
			list = append(list, term{t.ID, df})
		}
	}
	slices.SortFunc(list, func(a, b term) int {
		if a.df != b.df {
			return int(a.df - b.df)
		}
		return int(int64(a.id) - int64(b.id))
	})
	total := 0
	for _, t := range list {
		if len(ids) == maxLexicalTerms || len(ids) > 0 && total+int(t.df) > budget {
			break
		}
		total += int(t.df)
		ids = append(ids, int64(t.id))
	}
	return ids, len(ids) == len(list)
}

// MemoriesBySource implements memorybank.Store.
func (s *Store) MemoriesBySource(ctx context.Context, app, session string, now time.Time) ([]*memorybank.Memory, error) {
	snaps, err := s.memories(app).Where("source_sessions", "array-contains", session).Where("deleted", "==", false).Documents(ctx).GetAll()
	if err != nil {
		return nil, firestoredb.Wrap(err)
	}
	var out []*memorybank.Memory
	for _, snap := range snaps {
		m, err := fromSnap(app, snap)
		if err != nil {
			return nil, err
		}
		if m.Visible(now) {
			out = append(out, m)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// StaleEmbeddings implements memorybank.Store. Besides the memories whose
// vectors are of another model it returns those whose terms are of an
// older version than this server's, so that re-embedding rewrites their
// terms too. (A document written before memories had terms has no
// terms_version, which no Firestore query can find; the lexical pass
// misses it until it is next written, while the dense side still finds
// it.)
func (s *Store) StaleEmbeddings(ctx context.Context, model string, limit int, now time.Time) ([]*memorybank.Memory, error) {
	visible := func(m *memorybank.Memory) bool { return m.Visible(now) }
	group := s.c.CollectionGroup("kioku_memories").Where("deleted", "==", false)
	out, err := collect(ctx, group.Where("embedding_model", "!=", model), limit, nil, visible, appOf, nil)
	if err != nil || len(out) == limit {
		return out, err
	}
	more, err := collect(ctx, group.Where("terms_version", "!=", termsVersion), limit-len(out), nil, func(m *memorybank.Memory) bool {
		return visible(m) && m.EmbeddingModel == model
	}, appOf, nil)
	return append(out, more...), err
}

// ExpiredMemories implements memorybank.Store.
func (s *Store) ExpiredMemories(ctx context.Context, now time.Time, limit int) ([]*memorybank.Memory, error) {
	base := s.c.CollectionGroup("kioku_memories").Where("deleted", "==", false).Where("expire_ns", ">", 0).Where("expire_ns", "<=", now.UnixNano())
	return collect(ctx, base, limit, nil, func(*memorybank.Memory) bool { return true }, appOf, nil)
}

// DeleteExpiredRevisions implements memorybank.Store.
func (s *Store) DeleteExpiredRevisions(ctx context.Context, now time.Time, limit int) (int, error) {
	return firestoredb.DeleteQuery(ctx, s.c, s.c.CollectionGroup("kioku_revisions").Where("expire_ns", ">", 0).Where("expire_ns", "<=", now.UnixNano()).Limit(limit))
}

// DeleteFinishedOperations implements memorybank.Store.
func (s *Store) DeleteFinishedOperations(ctx context.Context, before time.Time, limit int) (int, error) {
	return firestoredb.DeleteQuery(ctx, s.c, s.c.CollectionGroup("kioku_operations").Where("claim_ns", "==", 0).Where("create_ns", "<", before.UnixNano()).Limit(limit))
}

// revisionDoc is a revision document.
type revisionDoc struct {
	Number   int64  `firestore:"number"`
	ExpireNS int64  `firestore:"expire_ns"`
	Body     string `firestore:"body"`
}

func revisionToDoc(r *memorybank.Revision) (*revisionDoc, error) {
	body, err := r.MarshalBody()
	if err != nil {
		return nil, err
	}
	return &revisionDoc{Number: r.Number, ExpireNS: unixnano.From(r.ExpireTime), Body: string(body)}, nil
}

func revisionFromSnap(app, memoryID string, snap *firestore.DocumentSnapshot) (*memorybank.Revision, error) {
	var d revisionDoc
	if err := snap.DataTo(&d); err != nil {
		return nil, err
	}
	r, err := memorybank.UnmarshalRevision(app, memoryID, d.Number, []byte(d.Body))
	if err != nil {
		return nil, err
	}
	// The expiry is a field of the document (queries filter on it); bodies
	// written before it was also in the body lack it.
	r.ExpireTime = unixnano.Time(d.ExpireNS)
	return r, nil
}

// ListRevisions implements memorybank.Store.
func (s *Store) ListRevisions(ctx context.Context, app, memoryID string, before int64, limit int, now time.Time) ([]*memorybank.Revision, error) {
	q := s.memories(app).Doc(memoryID).Collection("kioku_revisions").OrderBy("number", firestore.Desc)
	if before > 0 {
		q = q.Where("number", "<", before)
	}
	var out []*memorybank.Revision
	for len(out) < limit {
		want := limit - len(out)
		snaps, err := q.Limit(want).Documents(ctx).GetAll()
		if err != nil {
			return nil, firestoredb.Wrap(err)
		}
		for _, snap := range snaps {
			r, err := revisionFromSnap(app, memoryID, snap)
			if err != nil {
				return nil, err
			}
			before = r.Number
			if r.ExpireTime.IsZero() || r.ExpireTime.After(now) {
				out = append(out, r)
			}
		}
		if len(snaps) < want {
			break
		}
		q = s.memories(app).Doc(memoryID).Collection("kioku_revisions").OrderBy("number", firestore.Desc).Where("number", "<", before)
	}
	return out, nil
}

// GetRevision implements memorybank.Store.
func (s *Store) GetRevision(ctx context.Context, app, memoryID string, number int64) (*memorybank.Revision, error) {
	snap, err := s.revisionRef(app, memoryID, number).Get(ctx)
	if firestoredb.IsNotFound(err) {
		return nil, fault.NotFoundf("revision %d of memory apps/%s/memories/%s not found", number, app, memoryID)
	}
	if err != nil {
		return nil, firestoredb.Wrap(err)
	}
	return revisionFromSnap(app, memoryID, snap)
}

func (s *Store) configRef(app string) *firestore.DocumentRef {
	return s.app(app).Collection("kioku_config").Doc("memory_bank")
}

// GetConfig implements memorybank.Store.
func (s *Store) GetConfig(ctx context.Context, app string) (*memorybank.BankConfig, error) {
	snap, err := s.configRef(app).Get(ctx)
	if firestoredb.IsNotFound(err) {
		return &memorybank.BankConfig{App: app}, nil
	}
	if err != nil {
		return nil, firestoredb.Wrap(err)
	}
	return decodeConfig(app, snap)
}

func decodeConfig(app string, snap *firestore.DocumentSnapshot) (*memorybank.BankConfig, error) {
	body, err := snap.DataAt("body")
	if err != nil {
		return nil, err
	}
	return memorybank.UnmarshalConfig(app, []byte(body.(string)))
}

// ListConfigs implements memorybank.Store. It lists the app documents
// (which may exist only as parents of collections) and reads their
// configuration documents: no index is needed.
func (s *Store) ListConfigs(ctx context.Context) ([]*memorybank.BankConfig, error) {
	apps, err := s.c.Collection(s.root).DocumentRefs(ctx).GetAll()
	if err != nil {
		return nil, firestoredb.Wrap(err)
	}
	refs := make([]*firestore.DocumentRef, len(apps))
	for i, a := range apps {
		refs[i] = s.configRef(a.ID)
	}
	var out []*memorybank.BankConfig
	for start := 0; start < len(refs); start += 300 {
		snaps, err := s.c.GetAll(ctx, refs[start:min(start+300, len(refs))])
		if err != nil {
			return nil, firestoredb.Wrap(err)
		}
		for i, snap := range snaps {
			if !snap.Exists() {
				continue
			}
			c, err := decodeConfig(apps[start+i].ID, snap)
			if err != nil {
				return nil, err
			}
			out = append(out, c)
		}
	}
	return out, nil
}

// PutConfig implements memorybank.Store.
func (s *Store) PutConfig(ctx context.Context, c *memorybank.BankConfig) error {
	body, err := memorybank.MarshalConfig(c)
	if err != nil {
		return err
	}
	_, err = s.configRef(c.App).Set(ctx, map[string]any{"body": string(body)})
	return firestoredb.Wrap(err)
}

// opDoc is an operation document: the operation's stored form (body)
// with what queries need beside it.
type opDoc struct {
	State         string `firestore:"state"`
	Method        string `firestore:"method"`
	ScopeKey      string `firestore:"scope_key"`
	CreateNS      int64  `firestore:"create_ns"`
	ClaimNS       int64  `firestore:"claim_ns"`
	LeaseExpiryNS int64  `firestore:"lease_expiry_ns"`
	Attempt       int    `firestore:"attempt"`
	Body          string `firestore:"body"`
}

func toOpDoc(op *memorybank.Operation) (*opDoc, error) {
	body, err := memorybank.MarshalOperation(op)
	if err != nil {
		return nil, err
	}
	d := &opDoc{
		State: op.State.String(), Method: op.Method, ScopeKey: op.ScopeKey, CreateNS: unixnano.From(op.CreateTime),
		LeaseExpiryNS: unixnano.From(op.LeaseExpiry), Attempt: op.Attempt, Body: string(body),
	}
	if !op.State.Done() {
		d.ClaimNS = op.ClaimTime().UnixNano()
	}
	return d, nil
}

func opFromSnap(snap *firestore.DocumentSnapshot) (*memorybank.Operation, error) {
	body, err := snap.DataAt("body")
	if err != nil {
		return nil, err
	}
	text, _ := body.(string)
	return memorybank.UnmarshalOperation(appOf(snap), snap.Ref.ID, []byte(text))
}

func opsFromSnaps(snaps []*firestore.DocumentSnapshot) ([]*memorybank.Operation, error) {
	var out []*memorybank.Operation
	for _, snap := range snaps {
		op, err := opFromSnap(snap)
		if err != nil {
			return nil, err
		}
		out = append(out, op)
	}
	return out, nil
}

// CreateOperation implements memorybank.Store.
func (s *Store) CreateOperation(ctx context.Context, op *memorybank.Operation) error {
	d, err := toOpDoc(op)
	if err != nil {
		return err
	}
	_, err = s.opRef(op.App, op.ID).Create(ctx, d)
	if status.Code(err) == codes.AlreadyExists {
		return fault.New(fault.AlreadyExists, "operation %s already exists", op.Name())
	}
	return firestoredb.Wrap(err)
}

// GetOperation implements memorybank.Store.
func (s *Store) GetOperation(ctx context.Context, app, id string) (*memorybank.Operation, error) {
	snap, err := s.opRef(app, id).Get(ctx)
	if firestoredb.IsNotFound(err) {
		return nil, fault.NotFoundf("operation apps/%s/operations/%s not found", app, id)
	}
	if err != nil {
		return nil, firestoredb.Wrap(err)
	}
	return opFromSnap(snap)
}

// ListOperations implements memorybank.Store.
func (s *Store) ListOperations(ctx context.Context, q memorybank.OpQuery) ([]*memorybank.Operation, error) {
	base := s.app(q.App).Collection("kioku_operations").Query
	if len(q.States) > 0 {
		var states []any
		for _, st := range q.States {
			states = append(states, st.String())
		}
		base = base.Where("state", "in", states)
	}
	base = base.OrderBy("create_ns", firestore.Desc).OrderBy(firestore.DocumentID, firestore.Desc)
	if q.AfterID != "" {
		base = base.StartAfter(q.AfterCreate.UnixNano(), q.AfterID)
	}
	snaps, err := base.Limit(q.Limit).Documents(ctx).GetAll()
	if err != nil {
		return nil, firestoredb.Wrap(err)
	}
	return opsFromSnaps(snaps)
}

// QueuedOperations implements memorybank.Store: one collection group query
// on claim_ns (0 once an operation is finished). Documents of other roots
// sharing the database are skipped.
func (s *Store) QueuedOperations(ctx context.Context, limit int) ([]*memorybank.Operation, error) {
	snaps, err := s.c.CollectionGroup("kioku_operations").Where("claim_ns", ">", 0).OrderBy("claim_ns", firestore.Asc).Limit(limit).Documents(ctx).GetAll()
	if err != nil {
		return nil, firestoredb.Wrap(err)
	}
	return opsFromSnaps(slices.DeleteFunc(snaps, func(snap *firestore.DocumentSnapshot) bool { return !s.ours(snap.Ref) }))
}

// ours reports whether an operation document is under this store's root.
func (s *Store) ours(ref *firestore.DocumentRef) bool {
	app := ref.Parent.Parent
	return app != nil && app.Parent.ID == s.root && app.Parent.Parent == nil
}

// CountPending implements memorybank.Store, with a count aggregation
// (one read per thousand operations counted).
func (s *Store) CountPending(ctx context.Context, app, scopeKey string, limit int) (int, error) {
	q := s.app(app).Collection("kioku_operations").Where("state", "==", memorybank.OpPending.String())
	if scopeKey != "" {
		q = q.Where("scope_key", "==", scopeKey)
	}
	limited := q.Limit(limit)
	res, err := limited.NewAggregationQuery().WithCount("n").Get(ctx)
	if err != nil {
		return 0, firestoredb.Wrap(err)
	}
	v, ok := res["n"].(*firestorepb.Value)
	if !ok {
		return 0, fmt.Errorf("counting pending operations of %s: no count in %v", app, res)
	}
	return int(v.GetIntegerValue()), nil
}

// PendingOperations implements memorybank.Store.
func (s *Store) PendingOperations(ctx context.Context, app, scopeKey, method string, now time.Time, limit int) ([]*memorybank.Operation, error) {
	snaps, err := s.app(app).Collection("kioku_operations").Where("scope_key", "==", scopeKey).Where("state", "==", memorybank.OpPending.String()).
		Where("method", "==", method).Where("claim_ns", "<=", now.UnixNano()).OrderBy("claim_ns", firestore.Asc).Limit(limit).Documents(ctx).GetAll()
	if err != nil {
		return nil, firestoredb.Wrap(err)
	}
	return opsFromSnaps(snaps)
}

// schemaVersion is the version of the documents' formats: 1 stored
// operations as Go's default JSON with numeric states and a due_ns field;
// 2 stores them in memorybank's operation record with states by name and
// claim_ns.
const schemaVersion = 2

// Migrate rewrites the operation documents of earlier formats under the
// store's root and records that it ran (in {root}_schema/memorybank), so
// that later calls read one document and nothing else. It returns how many
// documents it rewrote. Revisions of the first format (actions by number)
// and configurations are read as they are. kioku serve calls it before it
// serves; upgrade every server of one database together.
func (s *Store) Migrate(ctx context.Context) (int, error) {
	marker := s.c.Collection(s.root + "_schema").Doc("memorybank")
	snap, err := marker.Get(ctx)
	switch {
	case err == nil:
		if v, _ := snap.DataAt("version"); v != nil && v.(int64) >= schemaVersion {
			return 0, nil
		}
	case !firestoredb.IsNotFound(err):
		return 0, firestoredb.Wrap(err)
	}
	snaps, err := s.c.CollectionGroup("kioku_operations").Documents(ctx).GetAll()
	if err != nil {
		return 0, firestoredb.Wrap(err)
	}
	n := 0
	for _, snap := range snaps {
		if state, _ := snap.DataAt("state"); !s.ours(snap.Ref) || state == nil {
			continue
		} else if _, isName := state.(string); isName {
			continue
		}
		err := s.c.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
			cur, err := tx.Get(snap.Ref)
			if err != nil {
				return err
			}
			if state, _ := cur.DataAt("state"); state == nil {
				return nil
			} else if _, isName := state.(string); isName {
				return nil // rewritten meanwhile
			}
			op, err := opFromSnap(cur)
			if err != nil {
				return err
			}
			d, err := toOpDoc(op)
			if err != nil {
				return err
			}
			return tx.Set(snap.Ref, d)
		}, s.txn...)
		if err != nil {
			return n, fmt.Errorf("migrating operation %s: %w", snap.Ref.Path, firestoredb.Wrap(err))
		}
		n++
	}
	_, err = marker.Set(ctx, map[string]any{"version": schemaVersion})
	return n, firestoredb.Wrap(err)
}

// Watermark implements memorybank.Store.
func (s *Store) Watermark(ctx context.Context, app, session string) (int64, error) {
	snap, err := s.watermarkRef(app, session).Get(ctx)
	if firestoredb.IsNotFound(err) {
		return 0, nil
	}
	if err != nil {
		return 0, firestoredb.Wrap(err)
	}
	v, err := snap.DataAt("seq")
	if err != nil {
		return 0, err
	}
	return v.(int64), nil
}

// Write implements memorybank.Store.
func (s *Store) Write(ctx context.Context, w *memorybank.Write) error {
	err := s.c.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		// Reads first: operations, memories, scope statistics, watermarks.
		for _, u := range w.Operations {
			snap, err := tx.Get(s.opRef(u.Op.App, u.Op.ID))
			if firestoredb.IsNotFound(err) {
				return fault.NotFoundf("operation %s not found", u.Op.Name())
			}
			if err != nil {
				return err
			}
			var d opDoc
			if err := snap.DataTo(&d); err != nil {
				return err
			}
			if d.State != u.ExpectState.String() || d.Attempt != u.ExpectAttempt {
				return fault.New(fault.Aborted, "operation %s is %s at attempt %d, not %s at attempt %d", u.Op.Name(), d.State, d.Attempt, u.ExpectState, u.ExpectAttempt)
			}
			if u.ClaimScope && u.Op.ScopeKey != "" {
				busy, err := tx.Documents(s.app(u.Op.App).Collection("kioku_operations").Where("scope_key", "==", u.Op.ScopeKey).
					Where("state", "==", memorybank.OpRunning.String()).Where("lease_expiry_ns", ">", w.Now.UnixNano())).GetAll()
				if err != nil {
					return err
				}
				for _, b := range busy {
					if !slices.ContainsFunc(w.Operations, func(o memorybank.OpUpdate) bool { return o.Op.App == u.Op.App && o.Op.ID == b.Ref.ID }) {
						return fault.New(fault.Aborted, "scope %q of app %s has a running operation (%s)", u.Op.ScopeKey, u.Op.App, b.Ref.ID)
					}
				}
			}
		}
		olds := make([]*memorybank.Memory, len(w.Changes))
		oldTerms := make([]counted, len(w.Changes)) // what the stats count of the old memory's terms
		type scopeRef struct{ app, key string }
		stats := map[scopeRef]scopeStats{}
		for i, c := range w.Changes {
			m := c.Memory
			snap, err := tx.Get(s.memories(m.App).Doc(m.ID))
			switch {
			case firestoredb.IsNotFound(err):
				if c.ExpectRevision != 0 {
					return fault.New(fault.Aborted, "memory %s no longer exists", m.Name())
				}
			case err != nil:
				return err
			default:
				old, err := fromSnap(m.App, snap)
				if err != nil {
					return err
				}
				if c.ExpectRevision == 0 {
					return fault.New(fault.AlreadyExists, "memory %s already exists", m.Name())
				}
				if old.Revision != c.ExpectRevision {
					return fault.New(fault.Aborted, "memory %s changed meanwhile (revision %d, expected %d)", m.Name(), old.Revision, c.ExpectRevision)
				}
				olds[i] = old
				if oldTerms[i], _, err = countedIn(snap); err != nil {
					return err
				}
			}
			key := scopeRef{m.App, m.Scope.Key()}
			if _, ok := stats[key]; !ok {
				st, err := readStats(tx.Get(s.statsRef(key.app, key.key)))
				if err != nil {
					return err
				}
				stats[key] = st
			}
		}
		marks := map[string]int64{}
		for session, seq := range w.Watermarks {
			snap, err := tx.Get(s.watermarkRef(w.App, session))
			old := int64(0)
			if err == nil {
				v, _ := snap.DataAt("seq")
				old, _ = v.(int64)
			} else if !firestoredb.IsNotFound(err) {
				return err
			}
			marks[session] = max(old, seq)
		}
		// Writes.
		for i, c := range w.Changes {
			m := c.Memory
			st := stats[scopeRef{m.App, m.Scope.Key()}]
			st.count(olds[i], oldTerms[i], -1)
			st.count(m, countedNow(m), 1)
			d, err := toDoc(m)
			if err != nil {
				return err
			}
			if err := tx.Set(s.memories(m.App).Doc(m.ID), d); err != nil {
				return err
			}
			if c.Revision != nil {
				rd, err := revisionToDoc(c.Revision)
				if err != nil {
					return err
				}
				if err := tx.Create(s.revisionRef(m.App, m.ID, c.Revision.Number), rd); err != nil {
					return err
				}
			}
		}
		for key, st := range stats {
			body, err := json.Marshal(st)
			if err != nil {
				return err
			}
			if err := tx.Set(s.statsRef(key.app, key.key), map[string]any{"scope_key": key.key, "body": string(body)}); err != nil {
				return err
			}
		}
		for session, seq := range marks {
			if err := tx.Set(s.watermarkRef(w.App, session), map[string]any{"session": session, "seq": seq}); err != nil {
				return err
			}
		}
		for _, u := range w.Operations {
			d, err := toOpDoc(u.Op)
			if err != nil {
				return err
			}
			if err := tx.Set(s.opRef(u.Op.App, u.Op.ID), d); err != nil {
				return err
			}
		}
		return nil
	}, s.txn...)
	return firestoredb.Wrap(err)
}
