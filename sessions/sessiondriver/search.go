package sessiondriver

import (
	"time"

	"github.com/kioku-ai/kioku/internal/sessionsearch"
	"github.com/kioku-ai/kioku/internal/terms"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
)

// MaxIndexedTerms bounds the distinct terms indexed for one event (the
// first ones of its text).
const MaxIndexedTerms = 1000

// SearchTerm is one normalised term of a query with its weight (terms of
// little meaning weigh less; see package internal/terms).
type SearchTerm struct {
	Term   string
	Weight float64
}

// SearchEventsParams is the input of Searcher.SearchEvents.
type SearchEventsParams struct {
	App, User string
	// Session, when set, limits the search to this session of the user.
	Session string
	// Terms are the query's distinct terms.
	Terms  []SearchTerm
	Author string
	// From and To bound the event timestamps (zero: open).
	From, To time.Time
	// Now decides expiry.
	Now time.Time
	// Limit is how many candidates to return.
	Limit int
}

// SearchCandidates is what Searcher.SearchEvents found: the candidates and the
// statistics that rank them.
type SearchCandidates struct {
	// Hits are the candidates (Score unset), at most Limit, the most
	// promising first: by the sum of Weight × IDF of the query terms they
	// contain, then newest first.
	Hits []sessiontype.SearchHit
	// Docs is how many indexed events the search ran over (the user's, or
	// the session's), AvgLength their average length in terms.
	Docs, AvgLength float64
	// DocFreq is, per query term, how many of those events contain it
	// (estimated where a store reads only a term's newest postings).
	DocFreq map[string]float64
}

// IndexedTerms is what the search index keeps of an event (IndexTerms).
type IndexedTerms struct {
	// Distinct are the distinct terms of its searchable text, at most
	// MaxIndexedTerms.
	Distinct []string
	// Length is its length in terms.
	Length int
}

// IndexTerms returns the terms the search index keeps of an event: none
// for an event without text, and none for a compaction event (its summary
// repeats what the events it covers said, and those are found
// themselves). It costs CPU in proportion to the text, so stores call it
// outside the transactions other writers wait for.
func IndexTerms(e *sessiontype.Event) IndexedTerms {
	var t IndexedTerms
	if e.Actions.Compaction != nil {
		return t
	}
	seen := map[string]bool{}
	terms.Each(sessionsearch.Text(e), func(term string, _ terms.Kind) {
		t.Length++
		if !seen[term] && len(t.Distinct) < MaxIndexedTerms {
			seen[term] = true
			t.Distinct = append(t.Distinct, term)
		}
	})
	return t
}

// Candidates hands out the events a store found for a query, the most
// promising first: by the sum of Weight × IDF of the query terms whose
// postings hold them, then newer first. It orders lazily (a heap), so
// taking the first few of many costs little.
type Candidates[D comparable] struct {
	heap  []scoredDoc[D]
	newer func(a, b D) int
}

type scoredDoc[D comparable] struct {
	doc   D
	score float64
}

// CandidateOrder scores the events of postings (each query term's events,
// as a store read them) with the IDF of n events and the terms' document
// frequencies, for Candidates to hand out. newer(a, b) < 0 when a is
// newer. Stores choose their candidates with it, so that every store
// chooses the same way.
func CandidateOrder[D comparable](qt []SearchTerm, postings map[string][]D, n float64, df map[string]float64, newer func(a, b D) int) *Candidates[D] {
	index := map[D]int{}
	c := &Candidates[D]{newer: newer}
	for _, t := range qt {
		w := t.Weight * sessionsearch.IDF(n, df[t.Term])
		for _, d := range postings[t.Term] {
			i, ok := index[d]
			if !ok {
				i = len(c.heap)
				index[d] = i
				c.heap = append(c.heap, scoredDoc[D]{doc: d})
			}
			c.heap[i].score += w
		}
	}
	for i := len(c.heap)/2 - 1; i >= 0; i-- {
		c.down(i)
	}
	return c
}

// Len is how many candidates are left.
func (c *Candidates[D]) Len() int { return len(c.heap) }

// Next returns the most promising candidate left; false when none is.
func (c *Candidates[D]) Next() (D, bool) {
	if len(c.heap) == 0 {
		var zero D
		return zero, false
	}
	top := c.heap[0].doc
	last := len(c.heap) - 1
	c.heap[0] = c.heap[last]
	c.heap = c.heap[:last]
	c.down(0)
	return top, true
}

// Take returns up to n candidates, the most promising first.
func (c *Candidates[D]) Take(n int) []D {
	var out []D
	for range n {
		d, ok := c.Next()
		if !ok {
			break
		}
		out = append(out, d)
	}
	return out
}

func (c *Candidates[D]) before(i, j int) bool {
	a, b := c.heap[i], c.heap[j]
	if a.score != b.score {
		return a.score > b.score
	}
	return c.newer(a.doc, b.doc) < 0
}

func (c *Candidates[D]) down(i int) {
	for {
		l := 2*i + 1
		if l >= len(c.heap) {
			return
		}
		m := l
		if r := l + 1; r < len(c.heap) && c.before(r, l) {
			m = r
		}
		if !c.before(m, i) {
			return
		}
		c.heap[i], c.heap[m] = c.heap[m], c.heap[i]
		i = m
	}
}
