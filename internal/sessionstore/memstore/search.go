package memstore

import (
	"cmp"
	"context"

	"github.com/kioku-ai/kioku/sessions/sessiondriver"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
)

// The search index: per user of an app, the events with terms to index
// (docs), numbered in the order they were indexed, so that a larger number
// is a newer doc. A search reads every doc of the user (or of the session
// searched): exact statistics, at a cost in proportion to what the user
// has, which a store kept in memory can pay.

// userIndex is one user's docs.
type userIndex struct {
	next int64
	docs map[int64]*doc // by number
}

// doc is an indexed event: what sessiondriver.IndexTerms gives for it,
// and where it is.
type doc struct {
	number  int64
	session string
	seq     int64
	author  string
	terms   sessiondriver.IndexedTerms
}

// newDoc returns the search entry of an event; nil when it has no terms.
func newDoc(e *sessiontype.Event) *doc {
	t := sessiondriver.IndexTerms(e)
	if len(t.Distinct) == 0 {
		return nil
	}
	return &doc{author: e.Author, terms: t}
}

// index adds the event of ss at seq to its user's docs.
func (a *app) index(ss *session, seq int64) {
	d := ss.events[seq-1].doc
	if d == nil {
		return
	}
	ui := a.search[ss.meta.User]
	if ui == nil {
		ui = &userIndex{docs: map[int64]*doc{}}
		a.search[ss.meta.User] = ui
	}
	ui.next++
	d.number, d.session, d.seq = ui.next, ss.meta.ID, seq
	ui.docs[d.number] = d
}

// unindex removes an event of the user from the index.
func (a *app) unindex(user string, e *event) {
	if e == nil || e.doc == nil {
		return
	}
	if ui := a.search[user]; ui != nil {
		delete(ui.docs, e.doc.number)
	}
}

// SearchEvents implements sessiondriver.Searcher.
func (s *Store) SearchEvents(_ context.Context, p *sessiondriver.SearchEventsParams) (*sessiondriver.SearchCandidates, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := &sessiondriver.SearchCandidates{DocFreq: map[string]float64{}}
	if p.Session != "" {
		if _, err := s.visible(sessiontype.Key{App: p.App, User: p.User, ID: p.Session}, p.Now); err != nil {
			return nil, err
		}
	}
	a := s.apps[p.App]
	if a == nil || a.search[p.User] == nil {
		return out, nil
	}
	wanted := map[string]bool{}
	for _, t := range p.Terms {
		wanted[t.Term] = true
	}
	postings := map[string][]*doc{}
	length := 0
	for _, d := range a.search[p.User].docs {
		if p.Session != "" && d.session != p.Session {
			continue
		}
		out.Docs++
		length += d.terms.Length
		if p.Author != "" && d.author != p.Author {
			continue
		}
		for _, t := range d.terms.Distinct {
			if wanted[t] {
				postings[t] = append(postings[t], d)
			}
		}
	}
	if out.Docs == 0 {
		return out, nil
	}
	out.AvgLength = float64(length) / out.Docs
	for _, t := range p.Terms {
		out.DocFreq[t.Term] = float64(len(postings[t.Term]))
	}
	order := sessiondriver.CandidateOrder(p.Terms, postings, out.Docs, out.DocFreq, func(x, y *doc) int { return cmp.Compare(y.number, x.number) })
	for len(out.Hits) < p.Limit {
		d, ok := order.Next()
		if !ok {
			break
		}
		ss := a.sessions[d.session]
		if ss == nil || ss.meta.User != p.User || ss.meta.Expired(p.Now) {
			continue
		}
		e := ss.events[d.seq-1]
		if !p.From.IsZero() && e.ts.Before(p.From) || !p.To.IsZero() && !e.ts.Before(p.To) {
			continue
		}
		out.Hits = append(out.Hits, sessiontype.SearchHit{Session: ss.meta.Key, Event: e.decode(d.seq)})
	}
	return out, nil
}
