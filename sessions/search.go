package sessions

import (
	"cmp"
	"context"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/aip"
	"github.com/kioku-ai/kioku/internal/sessionsearch"
	"github.com/kioku-ai/kioku/internal/terms"
	"github.com/kioku-ai/kioku/resource"
	"github.com/kioku-ai/kioku/sessions/sessiondriver"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
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

// queryTerms returns a query's distinct terms with their weights.
func queryTerms(query string) []sessiondriver.SearchTerm {
	var out []sessiondriver.SearchTerm
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
		out = append(out, sessiondriver.SearchTerm{Term: t, Weight: w})
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
func (s *Service) SearchEvents(ctx context.Context, r SearchEventsRequest) ([]sessiontype.SearchHit, string, error) {
	searcher, ok := s.store.(sessiondriver.Searcher)
	if !ok {
		return nil, "", fault.New(fault.Unimplemented, "this session store does not search events (sessiondriver.Searcher)")
	}
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
	found, err := searcher.SearchEvents(ctx, &sessiondriver.SearchEventsParams{
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
	n := aip.PageLen(hits, size, s.limits.MaxReadBytes, func(h sessiontype.SearchHit) int { return h.Event.Size })
	if len(hits) <= n {
		return hits, "", nil
	}
	return hits[:n], aip.EncodePageToken(aip.PageToken{Query: digest, Offset: tok.Offset + n}), nil
}

// rank scores the candidates with BM25 from their text and sorts them,
// the best first, then the newest.
func rank(c *sessiondriver.SearchCandidates, qt []sessiondriver.SearchTerm) []sessiontype.SearchHit {
	n := max(c.Docs, float64(len(c.Hits)))
	avg := c.AvgLength
	if avg <= 0 {
		avg = 1
	}
	idf := make(map[string]float64, len(qt))
	for _, t := range qt {
		idf[t.Term] = t.Weight * sessionsearch.IDF(n, c.DocFreq[t.Term])
	}
	hits := slices.Clone(c.Hits)
	for i := range hits {
		tf := map[string]float64{}
		length := 0.0
		terms.Each(sessionsearch.Text(hits[i].Event), func(t string, _ terms.Kind) {
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
	hits = slices.DeleteFunc(hits, func(h sessiontype.SearchHit) bool { return h.Score <= 0 })
	slices.SortStableFunc(hits, func(a, b sessiontype.SearchHit) int {
		return cmp.Or(
			cmp.Compare(b.Score, a.Score),
			b.Event.Timestamp.Compare(a.Event.Timestamp),
			strings.Compare(a.Session.ID, b.Session.ID),
			cmp.Compare(b.Event.Sequence, a.Event.Sequence),
		)
	})
	return hits
}
