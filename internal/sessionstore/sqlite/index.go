package sqlite

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/seal"
	"github.com/kioku-ai/kioku/internal/terms"
	"github.com/kioku-ai/kioku/internal/unixnano"
	"github.com/kioku-ai/kioku/sessions/sessiondriver"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
)

// Writing the search index.
//
// An append does not index its event: it stores the event and, when the
// session had nothing waiting, sets the session's search_from to the
// event's sequence (sessions_search_pending lists such sessions). The
// events from search_from to last_seq are indexed later, many at a time
// (IndexSearch, from the session service's indexer, and before every
// search of their user: a search finds every event appended before it).
// Indexing in batches is what makes it cheap: FTS5 writes a segment for
// every statement that inserts into it, so one insert of many rows costs
// about what one row did. A crash loses nothing: the events and
// search_from are in the file, and the next pass indexes them.
//
// A fork's events are left to the indexer the same way (its session starts
// with search_from 1). Imports and the backlog's reindexing index in their
// own transactions, with indexDocs.

// tag returns the index term standing for a session or an author: "§"
// (never part of a normalised term), a letter, and a hash of the value.
func tag(kind byte, value string) string {
	h := sha256.Sum256([]byte(value))
	return "§" + string(kind) + hex.EncodeToString(h[:8])
}

// indexDoc is an event to add to the search index: where it is, when, and
// the text FTS5 keeps of it.
type indexDoc struct {
	app, user, session string
	seq, tsNS          int64
	length             int
	text               string
}

// newIndexDoc returns the index entry of an event of a session, its terms
// and tags passed through hash (seal.go), or false when the event has no
// terms to index.
func newIndexDoc(hash func(string) string, app, user, session string, e *sessiontype.Event) (indexDoc, bool) {
	t := sessiondriver.IndexTerms(e)
	if len(t.Distinct) == 0 {
		return indexDoc{}, false
	}
	var sb strings.Builder
	for _, term := range t.Distinct {
		sb.WriteString(hash(term))
		sb.WriteByte(' ')
	}
	sb.WriteString(hash(tag('s', session)) + " " + hash(tag('a', e.Author)))
	return indexDoc{
		app: app, user: user, session: session,
		seq: e.Sequence, tsNS: unixnano.From(e.Timestamp), length: t.Length,
		text: sb.String(),
	}, true
}

// searchable is what the indexer decodes of a stored event: the fields
// sessiondriver.IndexTerms reads (the stored JSON's names, which never change;
// the timestamp comes from its column). Decoding the rest of the event,
// its state delta and metadata, would only cost time.
type searchable struct {
	Author  string `json:"author"`
	Content *struct {
		Parts []struct {
			Text    string `json:"text"`
			Thought bool   `json:"thought"`
		} `json:"parts"`
	} `json:"content"`
	Actions struct {
		Compaction *sessiontype.Compaction `json:"compaction"`
	} `json:"actions"`
}

// decodeSearchable opens and decodes a stored event's body into an Event
// holding what IndexTerms reads, and its sequence and timestamp.
func decodeSearchable(k *seal.Keyring, app, session string, seq, tsNS int64, body []byte) (*sessiontype.Event, error) {
	body, err := k.Open(app, eventAt(app, session, seq), body)
	if err != nil {
		return nil, err
	}
	var d searchable
	if err := json.Unmarshal(body, &d); err != nil {
		return nil, err
	}
	e := &sessiontype.Event{Sequence: seq, Timestamp: unixnano.Time(tsNS), Author: d.Author}
	e.Actions.Compaction = d.Actions.Compaction
	if d.Content != nil {
		e.Content = &sessiontype.Content{Parts: make([]sessiontype.Part, len(d.Content.Parts))}
		for i, p := range d.Content.Parts {
			e.Content.Parts[i] = sessiontype.Part{Text: p.Text, Thought: p.Thought}
		}
	}
	return e, nil
}

// indexChunk is the most rows one insert into the index writes (search_docs
// takes 6 parameters a row; SQLite allows 32,766 a statement). The inserts
// of a whole chunk are prepared once (New); a shorter one is parsed for
// its size.
const indexChunk = 500

// Inserts of rows rows into the index.
func insertDocsSQL(rows int) string {
	return `INSERT INTO search_docs (doc, app, session, seq, ts_ns, length) VALUES (?, ?, ?, ?, ?, ?)` + strings.Repeat(`, (?, ?, ?, ?, ?, ?)`, rows-1)
}

func insertTermsSQL(rows int) string {
	return `INSERT INTO search_fts (rowid, terms) VALUES (?, ?)` + strings.Repeat(`, (?, ?)`, rows-1)
}

// indexDocs adds events to the search index: one update of search_users
// per user, and the docs and their terms in inserts of up to indexChunk
// rows each.
func (s *Store) indexDocs(tx *sql.Tx, docs []indexDoc) error {
	type userDocs struct {
		n, length int64
		first     int // index in docs of the user's first doc
	}
	users := map[[2]string]*userDocs{}
	order := make([][2]string, 0, 4)
	for i, d := range docs {
		k := [2]string{d.app, d.user}
		u := users[k]
		if u == nil {
			u = &userDocs{first: i}
			users[k] = u
			order = append(order, k)
		}
		u.n++
		u.length += int64(d.length)
	}
	numbers := make([]int64, len(docs))
	for _, k := range order {
		u := users[k]
		var uid, last int64
		// A user's first indexed events make the row with next_doc and
		// docs their count.
		err := tx.QueryRow(`INSERT INTO search_users (app, user, next_doc, docs, length) VALUES (?, ?, ?, ?, ?)
			ON CONFLICT (app, user) DO UPDATE SET next_doc = next_doc + excluded.docs, docs = docs + excluded.docs, length = length + excluded.length
			RETURNING id, next_doc`, k[0], k[1], u.n, u.n, u.length).Scan(&uid, &last)
		if err != nil {
			return err
		}
		if last > maxUserDocs {
			return fault.New(fault.ResourceExhausted, "user %s of app %s has had %d events indexed for search, the most one user can have", k[1], k[0], maxUserDocs)
		}
		// The user's docs get the numbers last-n+1 to last, in order.
		n := last - u.n
		for i := u.first; i < len(docs); i++ {
			if docs[i].app == k[0] && docs[i].user == k[1] {
				n++
				numbers[i] = uid<<32 | n
			}
		}
	}
	for lo := 0; lo < len(docs); lo += indexChunk {
		hi := min(lo+indexChunk, len(docs))
		rows := hi - lo
		docArgs := make([]any, 0, 6*rows)
		ftsArgs := make([]any, 0, 2*rows)
		for i := lo; i < hi; i++ {
			d := docs[i]
			docArgs = append(docArgs, numbers[i], d.app, d.session, d.seq, d.tsNS, d.length)
			ftsArgs = append(ftsArgs, numbers[i], d.text)
		}
		var err error
		if rows == indexChunk {
			if _, err = tx.Stmt(s.insDocsChunk).Exec(docArgs...); err == nil {
				_, err = tx.Stmt(s.insTermsChunk).Exec(ftsArgs...)
			}
		} else if _, err = tx.Exec(insertDocsSQL(rows), docArgs...); err == nil {
			_, err = tx.Exec(insertTermsSQL(rows), ftsArgs...)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// unindexSession removes a session's events from the search index.
func unindexSession(tx *sql.Tx, app, session string) error {
	rows, err := tx.Query(`SELECT doc >> 32, count(*), total(length) FROM search_docs WHERE app = ? AND session = ? GROUP BY doc >> 32`, app, session)
	if err != nil {
		return err
	}
	type userDocs struct{ uid, docs, length int64 }
	var users []userDocs
	for rows.Next() {
		var u userDocs
		var length float64
		if err := rows.Scan(&u.uid, &u.docs, &length); err != nil {
			rows.Close()
			return err
		}
		u.length = int64(length)
		users = append(users, u)
	}
	rows.Close()
	if err := rows.Err(); err != nil || len(users) == 0 {
		return err
	}
	for _, u := range users {
		if _, err := tx.Exec(`UPDATE search_users SET docs = docs - ?, length = length - ? WHERE id = ?`, u.docs, u.length, u.uid); err != nil {
			return err
		}
	}
	if _, err := tx.Exec(`DELETE FROM search_fts WHERE rowid IN (SELECT doc FROM search_docs WHERE app = ? AND session = ?)`, app, session); err != nil {
		return err
	}
	_, err = tx.Exec(`DELETE FROM search_docs WHERE app = ? AND session = ?`, app, session)
	return err
}

var _ sessiondriver.SearchIndexer = (*Store)(nil)

// pendingSession is a session with events to index, as a pass read it.
type pendingSession struct {
	app, id, user string
	createNS      int64
	// from is the session's search_from; the pass read its events from
	// there through through (the session's last_seq, unless the pass
	// filled up first), read of them.
	from, through int64
	read          int64
	docs          []indexDoc
}

// IndexSearch implements sessiondriver.SearchIndexer: it indexes up to limit
// events appended (or forked) and not indexed yet, and returns how many it
// read.
func (s *Store) IndexSearch(ctx context.Context, limit int) (int, error) {
	return s.indexPending(ctx, "", "", limit)
}

// indexUser indexes every event of a user waiting to be indexed: a search
// runs it first, so that it finds every event appended before it.
func (s *Store) indexUser(ctx context.Context, app, user string) error {
	for {
		n, err := s.indexPending(ctx, app, user, indexPass)
		if err != nil || n < indexPass {
			return err
		}
	}
}

// indexPass is how many events a search's pass over its user's pending
// events reads at most.
const indexPass = 1000

// indexPending runs one pass of the indexer over the sessions with events
// to index (of one user of app, when user is set): it reads up to limit
// of their events and finds their terms outside the write transaction,
// then, in it, writes the index entries of the sessions whose waiting
// events are still those it read (no deletion, re-creation, reindexing
// or import meanwhile; the others wait for the next pass) and moves their
// search_from on. It returns how many events it read. Passes take turns,
// so that two never read the same events.
func (s *Store) indexPending(ctx context.Context, app, user string, limit int) (int, error) {
	s.indexMu.Lock()
	defer s.indexMu.Unlock()
	pending, n, err := s.readPending(ctx, app, user, limit)
	if err != nil || len(pending) == 0 {
		return n, err
	}
	err = s.db.Write(ctx, func(tx *sql.Tx) error {
		var docs []indexDoc
		var done []*pendingSession
		for _, p := range pending {
			var u string
			var createNS, from, stored int64
			err := tx.Stmt(s.selSearchFrom).QueryRow(p.app, p.id).Scan(&u, &createNS, &from)
			if errors.Is(err, sql.ErrNoRows) {
				continue // deleted: nothing to index
			}
			if err != nil {
				return err
			}
			if u != p.user || createNS != p.createNS || from != p.from {
				continue // deleted and created again, or reindexed
			}
			if err := tx.Stmt(s.countEvents).QueryRow(p.app, p.id, p.from, p.through).Scan(&stored); err != nil {
				return err
			}
			if stored != p.read {
				continue // an import filled a gap meanwhile
			}
			docs = append(docs, p.docs...)
			done = append(done, p)
		}
		if err := s.indexDocs(tx, docs); err != nil {
			return err
		}
		for _, p := range done {
			if _, err := tx.Stmt(s.updSearchFrom).Exec(p.through, p.through+1, p.app, p.id); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return n, fmt.Errorf("indexing appended events for search: %w", err)
	}
	return n, nil
}

// readPending reads, in one query, the sessions with events to index and
// up to limit of those events, with their index entries.
func (s *Store) readPending(ctx context.Context, app, user string, limit int) ([]*pendingSession, int, error) {
	query := `SELECT s.app, s.id, s.user, s.create_ns, s.search_from, s.last_seq, e.seq, e.ts_ns, e.body
		FROM sessions AS s INDEXED BY sessions_search_pending
		LEFT JOIN events AS e ON e.app = s.app AND e.session = s.id AND e.seq >= s.search_from
		WHERE s.search_from > 0`
	args := make([]any, 0, 3)
	if user != "" {
		query += ` AND s.app = ? AND s.user = ?`
		args = append(args, app, user)
	}
	rows, err := s.db.Read().QueryContext(ctx, query+` ORDER BY s.app, s.user, s.id, e.seq LIMIT ?`, append(args, limit)...)
	if err != nil {
		return nil, 0, err
	}
	defer rows.Close()
	var (
		pending []*pendingSession
		p       *pendingSession
		n, seen int
		hashers = newTermHashers(s.db.Keyring())
	)
	for rows.Next() {
		var r pendingSession
		var seq, tsNS sql.NullInt64
		var body []byte
		if err := rows.Scan(&r.app, &r.id, &r.user, &r.createNS, &r.from, &r.through, &seq, &tsNS, &body); err != nil {
			return nil, 0, err
		}
		seen++
		if p == nil || r.app != p.app || r.id != p.id {
			p = &r
			pending = append(pending, p)
		}
		if !seq.Valid {
			continue // none of its events waits: the pass only moves it on
		}
		e, err := decodeSearchable(s.db.Keyring(), p.app, p.id, seq.Int64, tsNS.Int64, body)
		if err != nil {
			return nil, 0, fmt.Errorf("decoding an event of session %s of app %s: %w", p.id, p.app, err)
		}
		n++
		p.read++
		if seen == limit {
			p.through = seq.Int64 // the pass filled up within the session
		}
		hash, err := hashers.of(p.app)
		if err != nil {
			return nil, 0, err
		}
		if d, ok := newIndexDoc(hash, p.app, p.user, p.id, e); ok {
			p.docs = append(p.docs, d)
		}
	}
	return pending, n, rows.Err()
}

// queueReindex puts every session in the search backlog when the index
// holds the terms of another terms.Version (a database from before the
// index has its sessions put there by the migration). ReindexSearch works
// the backlog off.
func (s *Store) queueReindex(ctx context.Context) error {
	return s.db.Write(ctx, func(tx *sql.Tx) error {
		var v int
		if err := tx.QueryRow(`SELECT v FROM search_version`).Scan(&v); err != nil {
			return err
		}
		if v == terms.Version {
			return nil
		}
		if v != 0 {
			if _, err := tx.Exec(`INSERT OR IGNORE INTO search_backlog (app, session) SELECT app, id FROM sessions`); err != nil {
				return err
			}
		}
		_, err := tx.Exec(`UPDATE search_version SET v = ?`, terms.Version)
		return err
	})
}

var _ sessiondriver.SearchReindexer = (*Store)(nil)

// ReindexSearch implements sessiondriver.SearchReindexer: it indexes the events
// of up to limit sessions of the search backlog with the current terms, a
// transaction per session, and returns how many it did. A session's
// events waiting for the indexer are indexed with the others.
func (s *Store) ReindexSearch(ctx context.Context, limit int) (int, error) {
	for n := 0; n < limit; n++ {
		var app, id string
		err := s.db.Read().QueryRowContext(ctx, `SELECT app, session FROM search_backlog LIMIT 1`).Scan(&app, &id)
		if errors.Is(err, sql.ErrNoRows) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		err = s.db.Write(ctx, func(tx *sql.Tx) error {
			var user string
			err := tx.QueryRow(`SELECT user FROM sessions WHERE app = ? AND id = ?`, app, id).Scan(&user)
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return err
			}
			if err == nil {
				if err := unindexSession(tx, app, id); err != nil {
					return err
				}
				events, err := queryEvents(ctx, s.db.Keyring(), tx, sessiontype.Key{App: app, User: user, ID: id}, sessiondriver.EventQuery{})
				if err != nil {
					return err
				}
				hash, err := s.db.Keyring().TermHasher(app)
				if err != nil {
					return err
				}
				var docs []indexDoc
				for _, e := range events {
					if d, ok := newIndexDoc(hash, app, user, id, e); ok {
						docs = append(docs, d)
					}
				}
				if err := s.indexDocs(tx, docs); err != nil {
					return err
				}
				if _, err := tx.Exec(`UPDATE sessions SET search_from = 0 WHERE app = ? AND id = ? AND search_from > 0`, app, id); err != nil {
					return err
				}
			}
			_, err = tx.Exec(`DELETE FROM search_backlog WHERE app = ? AND session = ?`, app, id)
			return err
		})
		if err != nil {
			return n, fmt.Errorf("indexing the events of session %s of app %s for search: %w", id, app, err)
		}
	}
	return limit, nil
}
