package sessions

import (
	"cmp"
	"context"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/aip"
	"github.com/kioku-ai/kioku/internal/terms"
	"github.com/kioku-ai/kioku/resource"
)

// Search limits, part of the API contract.
const (
	// MaxSearchQueryBytes bounds a search query's length.
	MaxSearchQueryBytes = 1024
	// MaxSearchTerms is how many distinct terms of a query are searched
	// (the first ones; the rest are ignored).
	MaxSearchTerms = 32
	// MaxSearchHits is how many ranked events one search yields over all
	// its pages.
	MaxSearchHits = 100
	// DefaultSearchPageSize and MaxSearchPageSize bound a page of hits.
	DefaultSearchPageSize = 10
	MaxSearchPageSize     = 100
	// MaxIndexedTerms bounds the distinct terms indexed for one event (the
	// first ones of its text).
	MaxIndexedTerms = 1000
)

// BM25's parameters: term frequency saturation and length normalisation.
const (
	bm25K1 = 1.2
	bm25B  = 0.75
)

// SearchEventsRequest is the input of SearchEvents.
type SearchEventsRequest struct {
	App, User string
	// Session, when set, searches this session of the user only.
	Session string
	// Query is the text to look for.
	Query string
	// Author, when set, keeps only events of this author.
	Author string
	// From and To bound the event timestamps: From <= t < To (zero: open).
	From, To  time.Time
	PageSize  int32
	PageToken string
}

// SearchHit is one event found by SearchEvents.
type SearchHit struct {
	// Session is the event's session.
	Session Key
	Event   *Event
	// Score is the event's BM25 score for the query (higher is better).
	Score float64
}

// SearchTerm is one normalised term of a query with its weight (terms of
// little meaning weigh less; see package internal/terms).
type SearchTerm struct {
	Term   string
	Weight float64
}

// SearchQuery is a Store.SearchEvents request.
type SearchQuery struct {
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

// SearchCandidates is what Store.SearchEvents found: the candidates and the
// statistics that rank them.
type SearchCandidates struct {
	// Hits are the candidates (Score unset), at most Limit, the most
	// promising first: by the sum of Weight × IDF of the query terms they
	// contain, then newest first.
	Hits []SearchHit
	// Docs is how many indexed events the search ran over (the user's, or
	// the session's), AvgLength their average length in terms.
	Docs, AvgLength float64
	// DocFreq is, per query term, how many of those events contain it
	// (estimated where a store reads only a term's newest postings).
	DocFreq map[string]float64
}

// IDF is BM25's inverse document frequency of a term found in df of n
// events.
func IDF(n, df float64) float64 {
	df = min(max(df, 0), n)
	return math.Log(1 + (n-df+0.5)/(df+0.5))
}

// SearchText returns the text of an event that search indexes: its author
// ("Caroline: ...", so that a question naming a speaker finds what they
// said) and the text parts of its content, thoughts left out. Tool calls
// and results are not searched.
func SearchText(e *Event) string { return e.Author + ": " + e.Content.Text() }

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
func IndexTerms(e *Event) IndexedTerms {
	var t IndexedTerms
	if e.Actions.Compaction != nil {
		return t
	}
	seen := map[string]bool{}
	terms.Each(SearchText(e), func(term string, _ terms.Kind) {
		t.Length++
		if !seen[term] && len(t.Distinct) < MaxIndexedTerms {
			seen[term] = true
			t.Distinct = append(t.Distinct, term)
		}
	})
	return t
}

// queryTerms returns a query's distinct terms with their weights.
func queryTerms(query string) []SearchTerm {
	var out []SearchTerm
	seen := map[string]bool{}
	terms.Each(query, func(t string, k terms.Kind) {
		if seen[t] || len(out) == MaxSearchTerms {
			return
		}
		seen[t] = true
		w := 1.0
		switch k {
		case terms.Weak:
			w = 1.0 / 3
		case terms.Han:
			w = 0.3
		case terms.Single:
			w = 0.5
		}
		out = append(out, SearchTerm{Term: t, Weight: w})
	})
	return out
}

// SearchEvents searches a user's events (across their sessions, or in one)
// for a text query and returns a page of hits, the best first, and the
// next page token. Events are ranked by BM25 (k1 1.2, b 0.75) over the
// normalised terms of package internal/terms, with the statistics of the
// events searched; ties go to the newer event. A search yields at most
// MaxSearchHits hits over all its pages; a page ends early at
// Limits.MaxReadBytes of events, as a ListEvents page does. Only visible events are found: an
// expired or deleted session's events never are, and neither are other
// users'.
func (s *Service) SearchEvents(ctx context.Context, r SearchEventsRequest) ([]SearchHit, string, error) {
	if err := resource.ValidateID("app id", r.App, resource.AppIDChars); err != nil {
		return nil, "", err
	}
	if err := resource.ValidateID("user id", r.User, resource.UserIDChars); err != nil {
		return nil, "", err
	}
	if r.Session != "" {
		if err := resource.ValidateID("session id", r.Session, resource.SessionIDChars); err != nil {
			return nil, "", err
		}
	}
	if strings.TrimSpace(r.Query) == "" {
		return nil, "", fault.Invalidf("query is required")
	}
	if len(r.Query) > MaxSearchQueryBytes {
		return nil, "", fault.Invalidf("query is %d bytes; the limit is %d", len(r.Query), MaxSearchQueryBytes)
	}
	if len(r.Author) > resource.MaxIDBytes {
		return nil, "", fault.Invalidf("author is %d bytes; the limit is %d", len(r.Author), resource.MaxIDBytes)
	}
	if !validTime(r.From) || !validTime(r.To) {
		return nil, "", fault.Invalidf("start_time and end_time must be within years 1678 to 2261")
	}
	size, err := aip.PageSizeWithin("page_size", r.PageSize, DefaultSearchPageSize, MaxSearchPageSize)
	if err != nil {
		return nil, "", err
	}
	digest := aip.QueryDigest("search", r.App, r.User, r.Session, r.Query, r.Author,
		strconv.FormatInt(r.From.UnixNano(), 10), strconv.FormatInt(r.To.UnixNano(), 10))
	tok, err := aip.DecodePageToken(r.PageToken, digest)
	if err != nil {
		return nil, "", err
	}
	qt := queryTerms(r.Query)
	if len(qt) == 0 {
		return nil, "", fault.Invalidf("query %q has no word to search for (only common words such as \"the\" or punctuation)", r.Query)
	}
	if tok.Offset >= MaxSearchHits {
		return nil, "", nil
	}
	found, err := s.store.SearchEvents(ctx, &SearchQuery{
		App: r.App, User: r.User, Session: r.Session, Terms: qt, Author: r.Author,
		From: r.From, To: r.To, Now: s.now(), Limit: MaxSearchHits,
	})
	if err != nil {
		return nil, "", err
	}
	hits := rank(found, qt)
	if tok.Offset >= len(hits) {
		return nil, "", nil
	}
	hits = hits[tok.Offset:]
	n := aip.PageLen(hits, size, s.limits.MaxReadBytes, func(h SearchHit) int { return h.Event.Size })
	if len(hits) <= n {
		return hits, "", nil
	}
	return hits[:n], aip.EncodePageToken(aip.PageToken{Query: digest, Offset: tok.Offset + n}), nil
}

// rank scores the candidates with BM25 from their text and sorts them,
// the best first, then the newest.
func rank(c *SearchCandidates, qt []SearchTerm) []SearchHit {
	n := max(c.Docs, float64(len(c.Hits)))
	avg := c.AvgLength
	if avg <= 0 {
		avg = 1
	}
	idf := make(map[string]float64, len(qt))
	for _, t := range qt {
		idf[t.Term] = t.Weight * IDF(n, c.DocFreq[t.Term])
	}
	hits := slices.Clone(c.Hits)
	for i := range hits {
		tf := map[string]float64{}
		length := 0.0
		terms.Each(SearchText(hits[i].Event), func(t string, _ terms.Kind) {
			length++
			if _, ok := idf[t]; ok {
				tf[t]++
			}
		})
		norm := bm25K1 * (1 - bm25B + bm25B*length/avg)
		score := 0.0
		for t, f := range tf {
			score += idf[t] * f * (bm25K1 + 1) / (f + norm)
		}
		hits[i].Score = score
	}
	hits = slices.DeleteFunc(hits, func(h SearchHit) bool { return h.Score <= 0 })
	slices.SortStableFunc(hits, func(a, b SearchHit) int {
		return cmp.Or(
			cmp.Compare(b.Score, a.Score),
			b.Event.Timestamp.Compare(a.Event.Timestamp),
			strings.Compare(a.Session.ID, b.Session.ID),
			cmp.Compare(b.Event.Sequence, a.Event.Sequence),
		)
	})
	return hits
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
		w := t.Weight * IDF(n, df[t.Term])
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
