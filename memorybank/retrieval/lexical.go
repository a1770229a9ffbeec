package retrieval

import (
	"cmp"
	"iter"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/kioku-ai/kioku/model"
)

// The constants of lexical retrieval (see Rank).
const (
	lengthPivot       = 64   // s at which a memory's length stops counting
	coverageSmoothing = 0.5  // added to both sides of coverage's share
	feedbackDocs      = 2    // memories the feedback takes terms from
	feedbackTerms     = 30   // terms it adds
	feedbackWeight    = 0.35 // their weight against the query's
	undatedFactor     = 0.8  // an undated memory's share of its similarity when the query asks when
	rareShare         = 100  // a query word held by at most 1 in rareShare memories is rare
	cooccurTerms      = 30   // terms the co-occurrence expansion adds
	cooccurWeight     = 0.1  // their weight against the query's
)

// TermStats are the document frequencies of lexical retrieval in a scope:
// how many memories there are (N) and how many hold a term of each bucket
// (Term.Bucket).
type TermStats struct {
	N  int
	DF func(bucket int) int32
}

// idf returns the inverse document frequency of a bucket.
func (s TermStats) idf(bucket int) float64 {
	n, df := float64(s.N), float64(s.DF(bucket))
	return math.Log(1 + (n-df+0.5)/(df+0.5))
}

// Buckets returns the distinct buckets of terms, in order.
func Buckets(terms []model.Term) []int {
	out := make([]int, len(terms))
	for i, t := range terms {
		out[i] = t.Bucket()
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Query is what Rank ranks a search's candidates against.
type Query struct {
	// Terms are model.OfflineTerms of the query.
	Terms []model.Term
	// AsksWhen: the query asks for a time (AsksWhen), and the lexical side
	// prefers dated memories (see Rank).
	AsksWhen bool
	// K is how many memories each side returns.
	K int
}

// Ranked is a memory a search found, with its scores and ranks.
type Ranked[M any] struct {
	Item M
	// Score is the dense score: the dot product of the memory's vector with
	// the weighted query vector (higher is closer).
	Score float64
	// Lexical is the lexical similarity, in [0, 1] (see Rank).
	Lexical float64
	// DenseRank and LexicalRank are the memory's ranks by Score and by
	// Lexical (1 the best); 0 when it is not among the K best of that side.
	DenseRank, LexicalRank int
}

// Candidate is a memory a store considers for a search; Item is what the
// store knows it by, which Rank turns into the results' items only.
type Candidate[T any] struct {
	Item T
	// ID is the memory's id (ties go to the smaller).
	ID string
	// Terms are model.OfflineTerms of the memory's fact.
	Terms []model.Term
	// Dense is the memory's dense score (the dot product of its vector with
	// the weighted query vector) when HasDense.
	Dense    float64
	HasDense bool
	// HasEventTime: the memory has an event time (it is dated, see Rank).
	HasEventTime bool
}

// weightedTerm is a query term with its weight.
type weightedTerm struct {
	id   uint32
	w    float64
	word bool // one of the query's own words (coverage counts it)
	// rare is the IDF of a word of the query that few memories hold
	// (rareShare), 0 for any other term.
	rare float64
}

// lexicalQuery is a query's terms, IDF-weighted and of unit length.
type lexicalQuery struct {
	terms []weightedTerm // sorted by id
	words int            // how many of terms are the query's words
	when  bool           // the query asks when (Query.AsksWhen)
	// buckets has a bit set for each term's bucket, so that a memory that
	// shares nothing with the query is passed over at a glance.
	buckets [model.OfflineDimensions / 64]uint64
}

// index sets the buckets of the query's terms, but for those that weigh
// less than a fiftieth of the heaviest: a word nearly every memory of the
// scope holds ("user" in "The user ...") weighs nearly nothing, and a
// memory that shares nothing else with the query is passed over rather
// than scored near 0 (which would cost a scan of the whole scope).
func (q *lexicalQuery) index() {
	q.buckets = [model.OfflineDimensions / 64]uint64{}
	var heaviest float64
	for _, t := range q.terms {
		heaviest = max(heaviest, t.w)
	}
	for _, t := range q.terms {
		if t.w < heaviest/50 {
			continue
		}
		b := t.id % model.OfflineDimensions
		q.buckets[b/64] |= 1 << (b % 64)
	}
}

// touches reports whether terms may share one with the query.
func (q *lexicalQuery) touches(terms []model.Term) bool {
	for _, t := range terms {
		b := t.ID % model.OfflineDimensions
		if q.buckets[b/64]&(1<<(b%64)) != 0 {
			return true
		}
	}
	return false
}

func newLexicalQuery(terms []model.Term, when bool, st TermStats) lexicalQuery {
	q := lexicalQuery{terms: make([]weightedTerm, 0, len(terms)), when: when}
	var norm float64
	rareDF := max(1, st.N/rareShare)
	for _, t := range terms {
		idf := st.idf(t.Bucket())
		w := float64(t.Weight) * idf
		wt := weightedTerm{id: t.ID, w: w, word: t.Word()}
		if wt.word && int(st.DF(t.Bucket())) <= rareDF {
			wt.rare = idf
		}
		q.terms = append(q.terms, wt)
		norm += w * w
		if t.Word() {
			q.words++
		}
	}
	q.scale(norm)
	q.index()
	return q
}

// scale divides the weights by the square root of norm (their squared
// length).
func (q *lexicalQuery) scale(norm float64) {
	if norm == 0 {
		return
	}
	n := 1 / math.Sqrt(norm)
	for i := range q.terms {
		q.terms[i].w *= n
	}
}

// score returns a memory's lexical similarity (see Rank); dated: the
// memory has an event time.
func (q *lexicalQuery) score(terms []model.Term, dated bool) float64 {
	var dot, norm float64
	matched := 0
	i := 0
	for _, t := range terms {
		w := float64(t.Weight)
		norm += w * w
		for i < len(q.terms) && q.terms[i].id < t.ID {
			i++
		}
		if i < len(q.terms) && q.terms[i].id == t.ID {
			dot += q.terms[i].w * w
			if q.terms[i].word {
				matched++
			}
		}
	}
	if dot <= 0 || norm == 0 {
		return 0
	}
	s := dot / math.Sqrt(norm)
	if q.words > 0 {
		s *= (float64(matched) + coverageSmoothing) / (float64(q.words) + coverageSmoothing)
	}
	s *= min(1, math.Sqrt(math.Sqrt(norm/lengthPivot)))
	if q.when && !dated && !namesTime(terms) {
		s *= undatedFactor
	}
	return s
}

// rareWeight returns the summed IDF of the query's rare words that terms
// hold (weightedTerm.rare).
func (q *lexicalQuery) rareWeight(terms []model.Term) float64 {
	var sum float64
	i := 0
	for _, t := range terms {
		for i < len(q.terms) && q.terms[i].id < t.ID {
			i++
		}
		if i < len(q.terms) && q.terms[i].id == t.ID {
			sum += q.terms[i].rare
		}
	}
	return sum
}

// accumulate adds into acc the terms of a memory, each weighing its share
// of the memory's length times its IDF times scale: for feedback, scale is
// one over the number of memories drawn on; for the co-occurrence
// expansion, the summed IDF of the query's rare words the memory holds.
func accumulate(acc map[uint32]float64, terms []model.Term, scale float64, st TermStats) {
	var norm float64
	for _, t := range terms {
		norm += float64(t.Weight) * float64(t.Weight)
	}
	for _, t := range terms {
		acc[t.ID] += scale * float64(t.Weight) / math.Sqrt(norm) * st.idf(t.Bucket())
	}
}

// timeTerms are the IDs of the words that place a fact in time: the
// names of months and days, the words of relative time ("yesterday", "last
// week", "two years ago") and the years 1900 to 2099. May is not among
// them: the stop list drops "may" (the verb) before it is a term, so "on
// May 7" says when only with its year or the memory's event time.
var timeTerms = func() map[uint32]bool {
	words := strings.Fields(`yesterday today tomorrow tonight last next ago recently lately soon
earlier morning evening night week weekend month year decade
monday tuesday wednesday thursday friday saturday sunday
january february march april june july august september october november december
jan feb mar apr jun jul aug sep sept oct nov dec`)
	for y := 1900; y < 2100; y++ {
		words = append(words, strconv.Itoa(y))
	}
	m := map[uint32]bool{}
	for _, t := range model.OfflineTerms(strings.Join(words, " ")) {
		m[t.ID] = true
	}
	return m
}()

// namesTime reports whether terms hold a word of timeTerms.
func namesTime(terms []model.Term) bool {
	for _, t := range terms {
		if timeTerms[t.ID] {
			return true
		}
	}
	return false
}

// expand returns the query with the feedback of its best memories added.
func (q *lexicalQuery) expand(best [][]model.Term, st TermStats) lexicalQuery {
	acc := map[uint32]float64{}
	for _, terms := range best {
		accumulate(acc, terms, 1/float64(len(best)), st)
	}
	return q.add(heaviest(acc, feedbackTerms, nil), feedbackWeight)
}

// expandCooccur returns the query with the terms that co-occur with its rare
// words across the scope (acc, see accumulate) added: the heaviest
// cooccurTerms of those the query does not hold yet, together weighing
// cooccurWeight of it. Feedback draws on the two best memories; this draws
// on every memory that holds a rare word of the query, so that "kiln",
// said with "pottery" in a memory that ranks third, finds a memory that
// says "kiln" but not "pottery".
func (q *lexicalQuery) expandCooccur(acc map[uint32]float64) lexicalQuery {
	held := make(map[uint32]bool, len(q.terms))
	for _, t := range q.terms {
		held[t.id] = true
	}
	return q.add(heaviest(acc, cooccurTerms, held), cooccurWeight)
}

// heaviest returns the n heaviest terms of acc that are not in skip,
// heaviest first (ties by id).
func heaviest(acc map[uint32]float64, n int, skip map[uint32]bool) []weightedTerm {
	out := make([]weightedTerm, 0, len(acc))
	for id, w := range acc {
		if !skip[id] {
			out = append(out, weightedTerm{id: id, w: w})
		}
	}
	slices.SortFunc(out, func(a, b weightedTerm) int {
		if c := cmp.Compare(b.w, a.w); c != 0 {
			return c
		}
		return cmp.Compare(a.id, b.id)
	})
	return out[:min(len(out), n)]
}

// add returns the query with terms added, together weighing weight of the
// query, and of unit length again.
func (q *lexicalQuery) add(terms []weightedTerm, weight float64) lexicalQuery {
	var norm float64
	for _, t := range terms {
		norm += t.w * t.w
	}
	if norm == 0 {
		return *q
	}
	merged := map[uint32]weightedTerm{}
	for _, t := range q.terms {
		merged[t.id] = t
	}
	for _, t := range terms {
		m := merged[t.id]
		m.id = t.id
		m.w += weight * t.w / math.Sqrt(norm)
		merged[t.id] = m
	}
	out := lexicalQuery{words: q.words, when: q.when, terms: make([]weightedTerm, 0, len(merged))}
	for _, t := range merged {
		out.terms = append(out.terms, t)
	}
	slices.SortFunc(out.terms, func(a, b weightedTerm) int { return cmp.Compare(a.id, b.id) })
	var total float64 // summed in order, so that a query always weighs the same
	for _, t := range out.terms {
		total += t.w * t.w
	}
	out.scale(total)
	out.index()
	return out
}

// Rank scores a search's candidates (visible memories of the scope that
// pass the filter) and returns those among the q.K best by dense score or
// the q.K best by lexical similarity, with their ranks on each side; the
// dense ones first by rank, then the others by lexical rank, each made an
// item of the results by item. st holds the scope's term statistics. Every
// store ranks by this function, so that they agree.
//
// The lexical side matches the query's terms (model.OfflineTerms: stems,
// CJK bigrams) with each memory's, the same way whatever the embedder. A
// memory's lexical similarity to the query is, in [0, 1], the product of:
//
//   - the cosine of the query's and the memory's weighted terms, each query
//     term weighted by its inverse document frequency among the scope's
//     memories, ln(1 + (n - df + 0.5) / (df + 0.5)), so that rare words
//     (names, places) count most. Document frequencies are kept per bucket
//     (Term.Bucket, 2,048 of them), so that a store can keep them in one
//     small record per scope;
//   - coverage, the share of the query's words the memory holds, as
//     (matched + ½) / (words + ½): a memory that answers all of a question
//     beats one that repeats one of its words;
//   - a length factor, min(1, (s / 64)^¼), s the memory's sum of squared
//     term weights (about its number of distinct terms): a memory of a few
//     words says less than one of a sentence or two, as in BM25's length
//     normalisation;
//   - when the query asks when (Query.AsksWhen: "When did ...",
//     "what year", "how long"), 0.8 for a memory that is not dated: one
//     that names no time (no month or weekday, no "yesterday" or "last
//     week", no year; May counts only with its year, see timeTerms) and
//     has no event time. The answer to such a question
//     is a time, so of two memories about the event the one that says when
//     comes first.
//
// Pseudo-relevance feedback then adds to the query the most distinctive
// terms of its two best memories (30 terms, together weighing 0.35 of the
// query) and scores again, so that a memory that shares those terms but
// none of the query's words is found too ("pottery" finds the pottery
// class "at the ceramics studio", then "the ceramics studio fires the
// bowls"); coverage still counts the query's own words. With it the query
// gains, at 0.1 of its weight, the 30 terms that co-occur most with its
// rare words (those at most 1 in 100 of the scope's memories hold, or one
// memory in a scope of fewer than 200) across every memory of the scope
// that holds them, gathered in the first scan (expandCooccur).
func Rank[T, M any](q Query, candidates iter.Seq[Candidate[T]], st TermStats, item func(T) M) []Ranked[M] {
	if q.K <= 0 {
		return nil
	}
	dense := newTopK(q.K, func(h hit[T]) float64 { return h.c.Dense })
	lexical := newTopK(q.K, func(h hit[T]) float64 { return h.lexical })
	var lq *lexicalQuery
	if len(q.Terms) > 0 && st.N > 0 {
		x := newLexicalQuery(q.Terms, q.AsksWhen, st)
		lq = &x
	}
	co := map[uint32]float64{}
	for c := range candidates {
		if c.HasDense {
			dense.offer(hit[T]{c: c})
		}
		if lq != nil && lq.touches(c.Terms) {
			if s := lq.score(c.Terms, c.HasEventTime); s > 0 {
				lexical.offer(hit[T]{c: c, lexical: s})
			}
			if rw := lq.rareWeight(c.Terms); rw > 0 {
				accumulate(co, c.Terms, rw, st)
			}
		}
	}
	if lq != nil {
		var best [][]model.Term
		lb := lexical.best()
		for _, h := range lb[:min(feedbackDocs, len(lb))] {
			best = append(best, h.c.Terms)
		}
		if len(best) > 0 {
			eq := lq.expand(best, st)
			eq = eq.expandCooccur(co)
			lq = &eq
			lexical = newTopK(q.K, lexical.score)
			for c := range candidates {
				if lq.touches(c.Terms) {
					if s := lq.score(c.Terms, c.HasEventTime); s > 0 {
						lexical.offer(hit[T]{c: c, lexical: s})
					}
				}
			}
		}
	}
	out := make([]Ranked[M], 0, 2*q.K)
	at := map[string]int{} // memory id → index in out
	add := func(h hit[T]) *Ranked[M] {
		if i, ok := at[h.c.ID]; ok {
			return &out[i]
		}
		at[h.c.ID] = len(out)
		out = append(out, Ranked[M]{Item: item(h.c.Item)})
		if h.c.HasDense {
			out[len(out)-1].Score = h.c.Dense
		}
		return &out[len(out)-1]
	}
	for i, h := range dense.best() {
		s := add(h)
		s.DenseRank = i + 1
		if lq != nil {
			s.Lexical = lq.score(h.c.Terms, h.c.HasEventTime)
		}
	}
	for i, h := range lexical.best() {
		s := add(h)
		s.LexicalRank, s.Lexical = i+1, h.lexical
	}
	return out
}

// hit is a candidate with its lexical similarity.
type hit[T any] struct {
	c       Candidate[T]
	lexical float64
}

// topK keeps the k best hits by a score, ties broken by memory id: a
// min-heap of the best so far, worst at the root.
type topK[T any] struct {
	k     int
	score func(hit[T]) float64
	list  []hit[T]
}

func newTopK[T any](k int, score func(hit[T]) float64) *topK[T] {
	return &topK[T]{k: k, score: score}
}

// worse reports whether a ranks below b.
func (t *topK[T]) worse(a, b hit[T]) bool {
	if sa, sb := t.score(a), t.score(b); sa != sb {
		return sa < sb
	}
	return a.c.ID > b.c.ID
}

func (t *topK[T]) offer(h hit[T]) {
	if len(t.list) < t.k {
		t.list = append(t.list, h)
		for i := len(t.list) - 1; i > 0; {
			p := (i - 1) / 2
			if !t.worse(t.list[i], t.list[p]) {
				break
			}
			t.list[i], t.list[p] = t.list[p], t.list[i]
			i = p
		}
		return
	}
	if !t.worse(t.list[0], h) {
		return
	}
	t.list[0] = h
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(t.list) && t.worse(t.list[l], t.list[m]) {
			m = l
		}
		if r < len(t.list) && t.worse(t.list[r], t.list[m]) {
			m = r
		}
		if m == i {
			break
		}
		t.list[i], t.list[m] = t.list[m], t.list[i]
		i = m
	}
}

// best returns the k best, best first.
func (t *topK[T]) best() []hit[T] {
	out := slices.Clone(t.list)
	slices.SortFunc(out, func(a, b hit[T]) int {
		switch {
		case t.worse(b, a):
			return -1
		case t.worse(a, b):
			return 1
		}
		return 0
	})
	return out
}
