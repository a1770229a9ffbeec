package firestore

import (
	"cmp"
	"context"
	"strings"

	"cloud.google.com/go/firestore"

	"github.com/kioku-ai/kioku/internal/firestoredb"
	"github.com/kioku-ai/kioku/internal/terms"
	"github.com/kioku-ai/kioku/internal/unixnano"
	"github.com/kioku-ai/kioku/sessions/sessiondriver"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
)

// Event search on Firestore: no document of its own. Each event document
// carries what its search needs: owner (the store's root, app and user),
// session, author, terms (the distinct terms of sessiondriver.IndexTerms, an
// array) and nterms (its length in terms). A search runs, per query term,
// one query over the user's events (a collection group query on owner, or
// one over the session's events collection) for the events whose terms
// contain it, newest first, reading at most searchReads/len(terms)
// (at least minTermReads) of them; terms with more matches are counted with
// an aggregation. One more aggregation counts the events searched and
// averages their length. The candidates are chosen with
// sessiondriver.CandidateOrder and their sessions read (in one batch) to drop
// those of expired or deleted sessions whose events are not removed yet.
//
// So an append writes no extra document (the event document has the
// fields; its terms add one index entry per distinct term to each index
// below), and a search costs about: one read per event it reads (at most
// searchReads, plus minTermReads per term beyond), one read per 1,000 index
// entries per aggregation (1 + one per term whose matches were not all
// read), and one read per distinct session among the candidates. It grows
// with the user's matching events, never with the app's.
//
// When package terms changes (terms.Version), the events of sessions whose
// search_v is older get their search fields again in the background
// (ReindexSearch, from the sweeper): one read and one write per event,
// once.
//
// Composite indexes (firestore.indexes.json): events, collection group
// scope, (owner, terms array-contains, ts_ns desc) and (owner, author,
// terms array-contains, ts_ns desc), and (owner) and (owner, author) for
// the aggregations; collection scope (terms array-contains, ts_ns desc) and
// (author, terms array-contains, ts_ns desc).

const (
	// searchReads is the most event documents one search reads.
	searchReads = 400
	// minTermReads is the fewest read per term.
	minTermReads = 25
)

// owner is the value of an event document's owner field: one user of one
// app under this store's root.
func (s *Store) owner(app, user string) string { return s.root + "/" + app + "/" + user }

// searchFields returns the search fields of an event document.
func (s *Store) searchFields(app, user, session string, e *sessiontype.Event) map[string]any {
	return s.searchFieldsOf(app, user, session, e, sessiondriver.IndexTerms(e))
}

// searchFieldsOf is searchFields with the event's terms found beforehand.
func (s *Store) searchFieldsOf(app, user, session string, e *sessiontype.Event, t sessiondriver.IndexedTerms) map[string]any {
	distinct := t.Distinct
	if distinct == nil {
		distinct = []string{}
	}
	return map[string]any{
		"owner":   s.owner(app, user),
		"session": session,
		"author":  e.Author,
		"terms":   distinct,
		"nterms":  t.Length,
	}
}

// eventData is the whole document of an event.
func (s *Store) eventData(app, user, session string, e *sessiontype.Event, body string) map[string]any {
	return s.eventDataOf(app, user, session, e, body, sessiondriver.IndexTerms(e))
}

// eventDataOf is eventData with the event's terms found beforehand.
func (s *Store) eventDataOf(app, user, session string, e *sessiontype.Event, body string, t sessiondriver.IndexedTerms) map[string]any {
	m := s.searchFieldsOf(app, user, session, e, t)
	m["seq"] = e.Sequence
	m["id"] = e.ID
	m["ts_ns"] = unixnano.From(e.Timestamp)
	m["body"] = body
	return m
}

// candidate is an event document a search read.
type candidate struct {
	path    string
	session string
	inc     string // the incarnation its path names
	doc     eventDoc
}

// SearchEvents implements sessiondriver.Searcher.
func (s *Store) SearchEvents(ctx context.Context, q *sessiondriver.SearchEventsParams) (*sessiondriver.SearchCandidates, error) {
	out := &sessiondriver.SearchCandidates{DocFreq: map[string]float64{}}
	var base firestore.Query
	if q.Session != "" {
		d, err := s.visible(ctx, sessiontype.Key{App: q.App, User: q.User, ID: q.Session}, q.Now)
		if err != nil {
			return nil, err
		}
		base = s.dataRef(q.App, d.Incarnation).Collection("events").Query
	} else {
		base = s.c.CollectionGroup("events").Where("owner", "==", s.owner(q.App, q.User))
	}
	if q.Author != "" {
		base = base.Where("author", "==", q.Author)
	}
	if !q.From.IsZero() {
		base = base.Where("ts_ns", ">=", q.From.UnixNano())
	}
	if !q.To.IsZero() {
		base = base.Where("ts_ns", "<", q.To.UnixNano())
	}
	stats, err := base.NewAggregationQuery().WithCount("n").WithAvg("nterms", "avg").Get(ctx)
	if err != nil {
		return nil, firestoredb.Wrap(err)
	}
	data := stats.Data()
	n, _ := data["n"].(int64)
	if n == 0 {
		return out, nil
	}
	out.Docs = float64(n)
	out.AvgLength, _ = data["avg"].(float64)

	perTerm := max(minTermReads, searchReads/len(q.Terms))
	found := map[string]*candidate{}
	postings := map[string][]string{}
	for _, t := range q.Terms {
		tq := base.Where("terms", "array-contains", t.Term)
		var list []string
		err := firestoredb.EachDoc(tq.OrderBy("ts_ns", firestore.Desc).Limit(perTerm).Documents(ctx), func(snap *firestore.DocumentSnapshot) error {
			path := snap.Ref.Path
			if found[path] == nil {
				c := &candidate{path: path, inc: snap.Ref.Parent.Parent.ID}
				if err := snap.DataTo(&c.doc); err != nil {
					return err
				}
				if v, err := snap.DataAt("session"); err == nil {
					c.session, _ = v.(string)
				}
				found[path] = c
			}
			list = append(list, path)
			return nil
		})
		if err != nil {
			return nil, err
		}
		postings[t.Term] = list
		df := float64(len(list))
		if len(list) == perTerm {
			res, err := tq.NewAggregationQuery().WithCount("n").Get(ctx)
			if err != nil {
				return nil, firestoredb.Wrap(err)
			}
			if c, ok := res.Data()["n"].(int64); ok {
				df = float64(c)
			}
		}
		out.DocFreq[t.Term] = df
	}
	order := sessiondriver.CandidateOrder(q.Terms, postings, out.Docs, out.DocFreq, func(a, b string) int {
		return cmp.Or(cmp.Compare(found[b].doc.TSNS, found[a].doc.TSNS), strings.Compare(b, a))
	})
	return out, s.keepVisible(ctx, q, order, found, out)
}

// keepVisible fills out.Hits with the candidates, in order, whose sessions
// are visible and still the incarnation the event belongs to, up to
// q.Limit. It reads the sessions of the candidates it looks at, q.Limit
// candidates at a time.
func (s *Store) keepVisible(ctx context.Context, q *sessiondriver.SearchEventsParams, order *sessiondriver.Candidates[string], found map[string]*candidate, out *sessiondriver.SearchCandidates) error {
	live := map[string]string{} // session id → incarnation, when visible
	read := map[string]bool{}
	for len(out.Hits) < q.Limit && order.Len() > 0 {
		chunk := order.Take(q.Limit - len(out.Hits))
		var refs []*firestore.DocumentRef
		for _, p := range chunk {
			if id := found[p].session; !read[id] {
				read[id] = true
				refs = append(refs, s.sessionRef(q.App, id))
			}
		}
		if len(refs) > 0 {
			snaps, err := s.c.GetAll(ctx, refs)
			if err != nil {
				return firestoredb.Wrap(err)
			}
			for _, snap := range snaps {
				if !snap.Exists() {
					continue
				}
				var d sessionDoc
				if err := snap.DataTo(&d); err != nil {
					return err
				}
				if d.User == q.User && !d.expired(q.Now) {
					live[snap.Ref.ID] = d.Incarnation
				}
			}
		}
		for _, p := range chunk {
			c := found[p]
			if inc, ok := live[c.session]; !ok || inc != c.inc {
				continue
			}
			e, err := c.doc.event()
			if err != nil {
				return err
			}
			out.Hits = append(out.Hits, sessiontype.SearchHit{Session: sessiontype.Key{App: q.App, User: q.User, ID: c.session}, Event: e})
		}
	}
	return nil
}

// ReindexSearch implements sessiondriver.SearchReindexer: it rewrites the search
// fields of the events of up to limit sessions indexed with an older
// terms.Version (a collection group query on search_v), then marks the
// sessions current.
func (s *Store) ReindexSearch(ctx context.Context, limit int) (int, error) {
	snaps, err := s.c.CollectionGroup("kioku_sessions").Where("search_v", "<", terms.Version).Limit(limit).Documents(ctx).GetAll()
	if err != nil {
		return 0, firestoredb.Wrap(err)
	}
	n := 0
	for _, snap := range snaps {
		var d sessionDoc
		if err := snap.DataTo(&d); err != nil {
			return n, err
		}
		app := snap.Ref.Parent.Parent.ID
		if err := s.reindexEvents(ctx, app, d.User, snap.Ref.ID, d.Incarnation); err != nil {
			return n, firestoredb.Wrap(err)
		}
		// Events appended meanwhile got current fields; a session deleted or
		// replaced meanwhile is left as it is.
		err := s.c.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
			now, err := txSessionDoc(tx, snap.Ref)
			if err != nil || now == nil || now.Incarnation != d.Incarnation {
				return err
			}
			return tx.Update(snap.Ref, []firestore.Update{{Path: "search_v", Value: terms.Version}})
		}, s.txn...)
		if err != nil {
			return n, firestoredb.Wrap(err)
		}
		n++
	}
	return n, nil
}

// reindexEvents rewrites the search fields of a session's events.
func (s *Store) reindexEvents(ctx context.Context, app, user, session, inc string) error {
	var after int64
	for {
		snaps, err := s.dataRef(app, inc).Collection("events").Where("seq", ">", after).OrderBy("seq", firestore.Asc).Limit(300).Documents(ctx).GetAll()
		if err != nil || len(snaps) == 0 {
			return err
		}
		bw := s.c.BulkWriter(ctx)
		var jobs []*firestore.BulkWriterJob
		for _, snap := range snaps {
			var ed eventDoc
			if err := snap.DataTo(&ed); err != nil {
				bw.End()
				return err
			}
			e, err := ed.event()
			if err != nil {
				bw.End()
				return err
			}
			var ups []firestore.Update
			for k, v := range s.searchFields(app, user, session, e) {
				ups = append(ups, firestore.Update{Path: k, Value: v})
			}
			j, err := bw.Update(snap.Ref, ups)
			if err != nil {
				bw.End()
				return err
			}
			jobs = append(jobs, j)
			after = ed.Seq
		}
		bw.End()
		for _, j := range jobs {
			if _, err := j.Results(); err != nil && !firestoredb.IsNotFound(err) {
				return err
			}
		}
	}
}
