package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/kioku-ai/kioku/sessions/sessiondriver"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
)

// The search index (schema version 2).
//
//	search_users   (app, user) → id, the user's number; next_doc, the
//	               number of the user's last indexed event; docs and
//	               length, how many of the user's events are indexed and
//	               their total length in terms.
//	search_docs    doc → app, session, seq, ts_ns, length: what an indexed
//	               event is. doc is (user id << 32) | the user's event
//	               number, so one user's events are one range of docs.
//	search_fts     an FTS5 table, contentless, without positions
//	               (detail=none), rowid = doc: the event's distinct terms
//	               (sessiondriver.IndexTerms, already normalised; FTS5's ascii
//	               tokenizer only splits them on spaces) and two tags, one
//	               for its session and one for its author.
//	search_backlog sessions whose events were stored before the index
//	               existed, or indexed with the terms of an older
//	               terms.Version; ReindexSearch indexes them, in the
//	               background (the session service's sweeper).
//	search_version the terms.Version the index holds (schema version 3).
//
// Events are added to it in batches after their appends (index.go); the
// sessions with events still to add have search_from set.
//
// A search reads, for each query term, the newest perTermPostings docs of
// the user's range that hold it (with the session's or author's tag when
// the query filters on them), chooses its candidates with
// sessiondriver.CandidateOrder, and reads their events. It reads what the user
// has, never other users' rows.
var searchSchema = `
CREATE TABLE search_users (
	id       INTEGER PRIMARY KEY,
	app      TEXT    NOT NULL,
	user     TEXT    NOT NULL,
	next_doc INTEGER NOT NULL DEFAULT 1,
	docs     INTEGER NOT NULL DEFAULT 1,
	length   INTEGER NOT NULL DEFAULT 0,
	UNIQUE (app, user)
);
CREATE TABLE search_docs (
	doc     INTEGER PRIMARY KEY,
	app     TEXT    NOT NULL,
	session TEXT    NOT NULL,
	seq     INTEGER NOT NULL,
	ts_ns   INTEGER NOT NULL,
	length  INTEGER NOT NULL
);
CREATE INDEX search_docs_by_session ON search_docs (app, session);
CREATE VIRTUAL TABLE search_fts USING fts5(terms, content='', contentless_delete=1, detail=none, tokenize='ascii');
CREATE TABLE search_backlog (
	app     TEXT NOT NULL,
	session TEXT NOT NULL,
	PRIMARY KEY (app, session)
) WITHOUT ROWID;
INSERT INTO search_backlog (app, session) SELECT app, id FROM sessions;
`

// searchVersionSchema records the terms.Version of the index (schema
// version 3); 0 until New has checked it.
var searchVersionSchema = `
CREATE TABLE search_version (v INTEGER NOT NULL);
INSERT INTO search_version (v) VALUES (0);
`

// perTermPostings is the most docs a search reads for one term (the
// newest). Terms held by more of the user's events count only in these
// when candidates are chosen; candidates are then ranked on their whole
// text.
const perTermPostings = 2000

// maxUserDocs is how many events of one user can ever be indexed (the
// event number is the low 32 bits of a doc).
const maxUserDocs = 1<<32 - 1

// SearchEvents implements sessiondriver.Searcher. It first indexes the user's
// events that wait for the indexer, so that it finds every event appended
// before it.
func (s *Store) SearchEvents(ctx context.Context, q *sessiondriver.SearchEventsParams) (*sessiondriver.SearchCandidates, error) {
	if err := s.indexUser(ctx, q.App, q.User); err != nil {
		return nil, err
	}
	out := &sessiondriver.SearchCandidates{DocFreq: map[string]float64{}}
	err := s.readTx(ctx, func(tx querier) error {
		if q.Session != "" {
			if err := visible(ctx, tx, sessiontype.Key{App: q.App, User: q.User, ID: q.Session}, q.Now); err != nil {
				return err
			}
		}
		var uid, next, docs, length int64
		err := tx.QueryRowContext(ctx, `SELECT id, next_doc, docs, length FROM search_users WHERE app = ? AND user = ?`, q.App, q.User).Scan(&uid, &next, &docs, &length)
		if errors.Is(err, sql.ErrNoRows) {
			return nil // nothing of this user is indexed
		}
		if err != nil {
			return err
		}
		if q.Session != "" {
			var total float64
			if err := tx.QueryRowContext(ctx, `SELECT count(*), total(length) FROM search_docs WHERE app = ? AND session = ?`, q.App, q.Session).Scan(&docs, &total); err != nil {
				return err
			}
			length = int64(total)
		}
		if docs == 0 {
			return nil
		}
		out.Docs, out.AvgLength = float64(docs), float64(length)/float64(docs)
		hash, err := s.db.Keyring().TermHasher(q.App)
		if err != nil {
			return err
		}
		var filter string
		if q.Session != "" {
			filter += ` AND "` + hash(tag('s', q.Session)) + `"`
		}
		if q.Author != "" {
			filter += ` AND "` + hash(tag('a', q.Author)) + `"`
		}
		lo, hi := uid<<32, uid<<32|maxUserDocs
		postings := map[string][]int64{}
		for _, t := range q.Terms {
			// One row holding every posting: far cheaper than a row each.
			var joined sql.NullString
			err := tx.QueryRowContext(ctx, `SELECT group_concat(rowid) FROM (SELECT rowid FROM search_fts WHERE search_fts MATCH ? AND rowid BETWEEN ? AND ? ORDER BY rowid DESC LIMIT ?)`,
				`"`+hash(t.Term)+`"`+filter, lo, hi, perTermPostings).Scan(&joined)
			if err != nil {
				return err
			}
			list, err := parseDocs(joined.String)
			if err != nil {
				return err
			}
			postings[t.Term] = list
			df := float64(len(list))
			if len(list) == perTermPostings {
				// Only the newest postings were read: estimate the rest
				// from how densely they cover the user's newest events.
				span := float64(next - slices.Min(list)&maxUserDocs + 1)
				df = min(float64(docs), df*float64(next)/span)
			}
			out.DocFreq[t.Term] = df
		}
		order := sessiondriver.CandidateOrder(q.Terms, postings, out.Docs, out.DocFreq, func(a, b int64) int { return cmp.Compare(b, a) })
		hits, err := s.loadCandidates(ctx, tx, q, order)
		out.Hits = hits
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// loadCandidates reads the events of the candidates in order, skipping
// those outside the time range and those of sessions that are not visible
// (expired, not swept yet), until q.Limit are found.
func (s *Store) loadCandidates(ctx context.Context, tx querier, q *sessiondriver.SearchEventsParams, order *sessiondriver.Candidates[int64]) ([]sessiontype.SearchHit, error) {
	var hits []sessiontype.SearchHit
	visibleSession := map[string]bool{}
	for len(hits) < q.Limit && order.Len() > 0 {
		ids := order.Take(q.Limit - len(hits))
		args := make([]any, len(ids))
		for i, d := range ids {
			args[i] = d
		}
		timeFilter := ""
		if !q.From.IsZero() {
			timeFilter += ` AND d.ts_ns >= ?`
			args = append(args, q.From.UnixNano())
		}
		if !q.To.IsZero() {
			timeFilter += ` AND d.ts_ns < ?`
			args = append(args, q.To.UnixNano())
		}
		rows, err := tx.QueryContext(ctx, `SELECT d.doc, d.session, d.seq, e.body FROM search_docs d JOIN events e ON e.app = d.app AND e.session = d.session AND e.seq = d.seq
			WHERE d.doc IN (?`+strings.Repeat(",?", len(ids)-1)+`)`+timeFilter, args...)
		if err != nil {
			return nil, err
		}
		type row struct {
			session string
			seq     int64
			body    []byte
		}
		byDoc := map[int64]row{}
		var unknown []any
		for rows.Next() {
			var doc int64
			var r row
			if err := rows.Scan(&doc, &r.session, &r.seq, &r.body); err != nil {
				rows.Close()
				return nil, err
			}
			byDoc[doc] = r
			if _, ok := visibleSession[r.session]; !ok {
				visibleSession[r.session] = false
				unknown = append(unknown, r.session)
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
		if err := visibleSessions(ctx, tx, q, unknown, visibleSession); err != nil {
			return nil, err
		}
		for _, d := range ids {
			r, ok := byDoc[d]
			if !ok || !visibleSession[r.session] {
				continue
			}
			e, err := decodeEvent(s.db.Keyring(), q.App, r.session, r.seq, r.body)
			if err != nil {
				return nil, err
			}
			hits = append(hits, sessiontype.SearchHit{Session: sessiontype.Key{App: q.App, User: q.User, ID: r.session}, Event: e})
		}
	}
	return hits, nil
}

// visibleSessions marks in vis which of the sessions (ids of q.App) are
// the user's and not expired.
func visibleSessions(ctx context.Context, tx querier, q *sessiondriver.SearchEventsParams, ids []any, vis map[string]bool) error {
	if len(ids) == 0 {
		return nil
	}
	rows, err := tx.QueryContext(ctx, `SELECT id, user, expire_ns FROM sessions WHERE app = ? AND id IN (?`+strings.Repeat(",?", len(ids)-1)+`)`, append([]any{q.App}, ids...)...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id, user string
		var expireNS int64
		if err := rows.Scan(&id, &user, &expireNS); err != nil {
			return err
		}
		vis[id] = user == q.User && !expired(expireNS, q.Now)
	}
	return rows.Err()
}

// parseDocs parses group_concat's comma-separated docs, in their order.
func parseDocs(joined string) ([]int64, error) {
	if joined == "" {
		return nil, nil
	}
	list := make([]int64, 0, strings.Count(joined, ",")+1)
	for f := range strings.SplitSeq(joined, ",") {
		d, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("reading the search index: %q is not a doc", f)
		}
		list = append(list, d)
	}
	return list, nil
}
