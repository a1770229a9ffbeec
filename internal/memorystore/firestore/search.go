package firestore

import (
	"context"
	"slices"

	"cloud.google.com/go/firestore"
	"github.com/kioku-ai/kioku/internal/firestoredb"
	"github.com/kioku-ai/kioku/memorybank/memorydriver"
	"github.com/kioku-ai/kioku/memorybank/memorytype"
	"github.com/kioku-ai/kioku/memorybank/retrieval"
	"github.com/kioku-ai/kioku/model"
)

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
func denseLimit(q memorydriver.SearchQuery) int {
	if !q.Filter.Empty() {
		return min(maxNearest, 10*q.K+50)
	}
	return min(maxNearest, q.K+denseMargin)
}

// lexicalBudget is the most memories the lexical pass reads: the query's
// rarest terms are looked up while the memories that may hold them (by
// the scope's document frequencies) fit it.
func lexicalBudget(q memorydriver.SearchQuery) int {
	if !q.Filter.Empty() {
		return min(maxNearest, 10*q.K+50)
	}
	return min(maxNearest, 2*q.K+10)
}

// SearchMemories implements memorydriver.Store. It reads the scope's
// statistics, then gathers candidates in two bounded queries, both
// pre-filtered on the scope and deleted = false: the dense side's
// FindNearest (dot product with the weighted query vector, pre-filtered on
// the embedding model too; K+5 memories, asked again for up to 1,000 when
// fewer than K of them are visible), and the lexical pass,
// array-contains-any on the memories' term IDs with the query's rarest
// terms (as many as the scope's document frequencies say fit in 2K+10
// memories, at most 30 terms; at most 2K+10 memories read, the first by
// document id when the rarest term alone is held by more). With a filter
// both sides read up to 10K+50 (see the bounds above). retrieval.Rank
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
func (s *Store) SearchMemories(ctx context.Context, q memorydriver.SearchQuery) ([]retrieval.Ranked[*memorytype.Memory], error) {
	if q.Filter.None || q.K <= 0 {
		return nil, nil
	}
	st, err := readStats(s.statsRef(q.App, q.ScopeKey).Get(ctx))
	if err != nil {
		return nil, firestoredb.Wrap(err)
	}
	base := s.memories(q.App).Where("scope_key", "==", q.ScopeKey).Where("deleted", "==", false)
	seen := map[string]bool{}
	var cands []retrieval.Candidate[*memorytype.Memory]
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
			ok := m.Visible(q.Now) && q.Filter.Matches(m)
			seen[snap.Ref.ID] = ok
			if !ok {
				continue
			}
			n++
			c := retrieval.Candidate[*memorytype.Memory]{Item: m, ID: m.ID, Terms: model.OfflineTerms(m.Fact), HasEventTime: !m.EventTime.IsZero()}
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
	rank := func() []retrieval.Ranked[*memorytype.Memory] {
		return retrieval.Rank(q.Ranking(), slices.Values(cands), ts, func(m *memorytype.Memory) *memorytype.Memory { return m })
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
		wq = retrieval.WeightedQuery(q.Vector, ms.N, ms.df)
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
func rareTerms(terms []model.Term, st retrieval.TermStats, budget int) (ids []any, all bool) {
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
