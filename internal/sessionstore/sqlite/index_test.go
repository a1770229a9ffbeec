package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/kioku-ai/kioku/internal/sqlitedb"
	"github.com/kioku-ai/kioku/sessions"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
)

// indexState counts what the search index holds and what waits for it:
// index entries, entries that are not unique by event, sessions with
// events waiting, and whether each user's statistics agree with the
// entries (docs and length).
func indexState(t *testing.T, db *sqlitedb.DB) (docs, duplicates, waiting int, statsAgree bool) {
	t.Helper()
	q := db.Read()
	if err := q.QueryRow(`SELECT count(*), count(*) - count(DISTINCT app || '/' || session || '/' || seq) FROM search_docs`).Scan(&docs, &duplicates); err != nil {
		t.Fatal(err)
	}
	if err := q.QueryRow(`SELECT count(*) FROM sessions WHERE search_from > 0`).Scan(&waiting); err != nil {
		t.Fatal(err)
	}
	var wrong int
	if err := q.QueryRow(`SELECT count(*) FROM search_users u WHERE docs != (SELECT count(*) FROM search_docs WHERE doc >> 32 = u.id)
		OR length != (SELECT total(length) FROM search_docs WHERE doc >> 32 = u.id)`).Scan(&wrong); err != nil {
		t.Fatal(err)
	}
	return docs, duplicates, waiting, wrong == 0
}

// openService opens the database at path with a Store and a Service on
// it; the caller closes the database.
func openService(t *testing.T, path string) (*sqlitedb.DB, *Store, *sessions.Service) {
	t.Helper()
	db, err := sqlitedb.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(db)
	if err != nil {
		db.Close()
		t.Fatal(err)
	}
	return db, s, sessions.NewService(s, sessions.Config{})
}

func textEvent(id, text string) *sessiontype.Event {
	return &sessiontype.Event{ID: id, Author: "user", Content: &sessiontype.Content{Role: "user", Parts: []sessiontype.Part{{Text: text}}}}
}

// TestAppendsAreIndexedInBatches: an append stores its event and leaves
// it to the indexer; IndexSearch takes up to its limit of waiting events,
// over several sessions and users, and leaves nothing waiting once all are
// taken; a search finds the events whether or not a pass ran before it.
func TestAppendsAreIndexedInBatches(t *testing.T) {
	db, s, svc := openService(t, filepath.Join(t.TempDir(), "kioku.db"))
	defer db.Close()
	ctx := t.Context()
	for u := range 2 {
		key := sessiontype.Key{App: "a", User: fmt.Sprint("u", u), ID: fmt.Sprint("s", u)}
		if _, err := svc.CreateSession(ctx, sessions.CreateSessionRequest{App: key.App, User: key.User, ID: key.ID}); err != nil {
			t.Fatal(err)
		}
		for i := range 5 {
			if _, err := svc.AppendEvent(ctx, key, textEvent(fmt.Sprint("e", i), fmt.Sprintf("kettle number %d of %s", i, key.User)), nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	if docs, _, waiting, _ := indexState(t, db); docs != 0 || waiting != 2 {
		t.Fatalf("after the appends: %d index entries, %d sessions waiting; want none indexed and both waiting", docs, waiting)
	}
	if n, err := s.IndexSearch(ctx, 3); err != nil || n != 3 {
		t.Fatalf("IndexSearch(3) = %d, %v; want 3", n, err)
	}
	if docs, _, waiting, agree := indexState(t, db); docs != 3 || waiting != 2 || !agree {
		t.Fatalf("after a pass of 3: %d entries, %d sessions waiting, statistics agree %v; want 3 and both still waiting", docs, waiting, agree)
	}
	// A search of u1 indexes u1's waiting events first, and only those.
	hits, _, err := svc.SearchEvents(ctx, sessions.SearchEventsRequest{App: "a", User: "u1", Query: "kettle"})
	if err != nil || len(hits) != 5 {
		t.Fatalf("search of u1 = %d hits, %v; want all 5 of u1's events", len(hits), err)
	}
	if docs, _, waiting, agree := indexState(t, db); docs != 8 || waiting != 1 || !agree {
		t.Fatalf("after the search: %d entries, %d sessions waiting, statistics agree %v; want 8 (u0's first 3, u1's 5) and u0's session waiting", docs, waiting, agree)
	}
	if n, err := s.IndexSearch(ctx, 1000); err != nil || n != 2 {
		t.Fatalf("IndexSearch(1000) = %d, %v; want u0's 2 events left", n, err)
	}
	if n, err := s.IndexSearch(ctx, 1000); err != nil || n != 0 {
		t.Fatalf("IndexSearch with nothing waiting = %d, %v", n, err)
	}
	if docs, _, waiting, agree := indexState(t, db); docs != 10 || waiting != 0 || !agree {
		t.Fatalf("after the last pass: %d entries, %d sessions waiting, statistics agree %v; want all 10 and none waiting", docs, waiting, agree)
	}
	hits, _, err = svc.SearchEvents(ctx, sessions.SearchEventsRequest{App: "a", User: "u0", Query: "kettle number 4"})
	if err != nil || len(hits) == 0 || hits[0].Event.ID != "e4" || hits[0].Event.Sequence != 5 {
		t.Fatalf("search of u0 = %+v, %v; want its event e4 (sequence 5) first", hits, err)
	}
	if _, dups, _, _ := indexState(t, db); dups != 0 {
		t.Fatalf("%d events indexed twice", dups)
	}
}

// TestIndexingRacesWithWrites: appends, forks, deletions and re-creations
// of sessions run while the indexer passes; afterwards every stored event
// with text is indexed exactly once, nothing of a deleted session is,
// and the users' statistics agree with the entries.
func TestIndexingRacesWithWrites(t *testing.T) {
	db, s, svc := openService(t, filepath.Join(t.TempDir(), "kioku.db"))
	defer db.Close()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() {
		for ctx.Err() == nil {
			if _, err := s.IndexSearch(ctx, 7); err != nil && ctx.Err() == nil {
				t.Error(err)
				return
			}
		}
	})
	var writers sync.WaitGroup
	for w := range 4 {
		writers.Go(func() {
			user := fmt.Sprint("u", w%2)
			for round := range 6 {
				key := sessiontype.Key{App: "a", User: user, ID: fmt.Sprintf("w%d", w)}
				if _, err := svc.CreateSession(ctx, sessions.CreateSessionRequest{App: key.App, User: key.User, ID: key.ID}); err != nil {
					t.Error(err)
					return
				}
				for i := range 8 {
					if _, err := svc.AppendEvent(ctx, key, textEvent(fmt.Sprint("e", i), fmt.Sprintf("pebble %d round %d", i, round)), nil); err != nil {
						t.Error(err)
						return
					}
				}
				if round%3 == 1 {
					fork := fmt.Sprintf("w%d-fork%d", w, round)
					if _, err := svc.ForkSession(ctx, key, sessions.ForkSessionRequest{ID: fork}); err != nil {
						t.Error(err)
						return
					}
				}
				if round < 5 {
					if err := svc.DeleteSession(ctx, key); err != nil {
						t.Error(err)
						return
					}
				}
			}
		})
	}
	writers.Wait()
	cancel()
	wg.Wait()
	if t.Failed() {
		return
	}
	for {
		n, err := s.IndexSearch(t.Context(), 1000)
		if err != nil {
			t.Fatal(err)
		}
		if n < 1000 {
			break
		}
	}
	var events int
	if err := db.Read().QueryRow(`SELECT count(*) FROM events`).Scan(&events); err != nil {
		t.Fatal(err)
	}
	// 4 sessions left of 8 events each, and 2 forks of each writer's (of
	// rounds 1 and 4) with 8 events each.
	if events != 4*8+4*2*8 {
		t.Fatalf("%d events stored; want %d", events, 4*8+4*2*8)
	}
	docs, dups, waiting, agree := indexState(t, db)
	if docs != events || dups != 0 || waiting != 0 || !agree {
		t.Fatalf("index: %d entries for %d events, %d duplicates, %d sessions waiting, statistics agree %v", docs, events, dups, waiting, agree)
	}
	var orphans int
	if err := db.Read().QueryRow(`SELECT count(*) FROM search_docs d WHERE NOT EXISTS (SELECT 1 FROM events e WHERE e.app = d.app AND e.session = d.session AND e.seq = d.seq)`).Scan(&orphans); err != nil || orphans != 0 {
		t.Fatalf("%d index entries of events that are not stored (%v)", orphans, err)
	}
}

// TestWaitingEventsSurviveACrash: events appended and not indexed yet when
// the process stops (the file is closed with them waiting, as a crash
// leaves it) are indexed by the indexer of the next start, without a
// search asking, and found.
func TestWaitingEventsSurviveACrash(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kioku.db")
	db, _, svc := openService(t, path)
	key := sessiontype.Key{App: "a", User: "u", ID: "s"}
	if _, err := svc.CreateSession(t.Context(), sessions.CreateSessionRequest{App: key.App, User: key.User, ID: key.ID}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := svc.AppendEvent(t.Context(), key, textEvent(fmt.Sprint("e", i), "the harbour lights"), nil); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()

	db, _, svc = openService(t, path)
	defer db.Close()
	if docs, _, waiting, _ := indexState(t, db); docs != 0 || waiting != 1 {
		t.Fatalf("after the restart: %d entries, %d sessions waiting; want the events still waiting", docs, waiting)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		svc.RunIndexer(ctx)
		close(done)
	}()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		docs, _, waiting, agree := indexState(t, db)
		if docs == 3 && waiting == 0 && agree {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the indexer of the new start left %d entries, %d sessions waiting", docs, waiting)
		}
	}
	cancel()
	<-done
	hits, _, err := svc.SearchEvents(t.Context(), sessions.SearchEventsRequest{App: "a", User: "u", Query: "harbour"})
	if err != nil || len(hits) != 3 {
		t.Fatalf("search after the restart = %d hits, %v; want the 3 events", len(hits), err)
	}
}

// TestSearchableDecodesWhatIndexTermsReads: the indexer's partial decoding
// of a stored event gives the same index entry as the whole event.
func TestSearchableDecodesWhatIndexTermsReads(t *testing.T) {
	ts := time.Date(2026, 3, 4, 5, 6, 7, 8, time.UTC)
	events := []*sessiontype.Event{
		textEvent("e1", "Tea at the harbour, 東京 and Zürich"),
		{ID: "e2", Author: "model", Content: &sessiontype.Content{Role: "model", Parts: []sessiontype.Part{
			{Text: "thinking about kettles", Thought: true},
			{Text: "the answer is green tea"},
			{FunctionCall: &sessiontype.FunctionCall{Name: "brew", Args: map[string]any{"leaf": "sencha"}}},
			{Text: "and a biscuit"},
		}}, Actions: sessiontype.Actions{StateDelta: map[string]any{"cups": 2.0}}},
		{ID: "e3", Author: "summariser", Content: &sessiontype.Content{Parts: []sessiontype.Part{{Text: "a summary of the tea talk"}}},
			Actions: sessiontype.Actions{Compaction: &sessiontype.Compaction{StartSequence: 1, EndSequence: 2}}},
		{ID: "e4", Author: "tool"},
	}
	for i, e := range events {
		e.Sequence, e.Timestamp = int64(i+1), ts
		body, err := encodeEvent(e)
		if err != nil {
			t.Fatal(err)
		}
		slim, err := decodeSearchable(nil, "a", "s", e.Sequence, ts.UnixNano(), body)
		if err != nil {
			t.Fatal(err)
		}
		same := func(t string) string { return t }
		want, wantOK := newIndexDoc(same, "a", "u", "s", e)
		got, gotOK := newIndexDoc(same, "a", "u", "s", slim)
		if got != want || gotOK != wantOK {
			t.Errorf("event %s: entry from the stored body %+v (%v), from the event %+v (%v)", e.ID, got, gotOK, want, wantOK)
		}
	}
}

// TestIndexingInWholeChunks: a pass of more than indexChunk events writes
// them in whole chunks (a prepared insert) and a shorter rest, and every
// event is indexed once, under the right user, and found.
func TestIndexingInWholeChunks(t *testing.T) {
	db, s, svc := openService(t, filepath.Join(t.TempDir(), "kioku.db"))
	defer db.Close()
	ctx := t.Context()
	const sessionsN, perSession = 4, 300 // 1,200 events: two chunks and 200 in the first pass of 1000
	var wg sync.WaitGroup
	for i := range sessionsN {
		key := sessiontype.Key{App: "a", User: fmt.Sprint("u", i%2), ID: fmt.Sprint("s", i)}
		if _, err := svc.CreateSession(ctx, sessions.CreateSessionRequest{App: key.App, User: key.User, ID: key.ID}); err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			for j := range perSession {
				if _, err := svc.AppendEvent(ctx, key, textEvent(fmt.Sprint("e", j), fmt.Sprintf("lighthouse %d of %s", j, key.ID)), nil); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	if n, err := s.IndexSearch(ctx, 1000); err != nil || n != 1000 {
		t.Fatalf("IndexSearch(1000) = %d, %v", n, err)
	}
	if n, err := s.IndexSearch(ctx, 1000); err != nil || n != sessionsN*perSession-1000 {
		t.Fatalf("second IndexSearch(1000) = %d, %v; want the %d left", n, err, sessionsN*perSession-1000)
	}
	docs, dups, waiting, agree := indexState(t, db)
	if docs != sessionsN*perSession || dups != 0 || waiting != 0 || !agree {
		t.Fatalf("index: %d entries of %d events, %d duplicates, %d sessions waiting, statistics agree %v", docs, sessionsN*perSession, dups, waiting, agree)
	}
	hits, _, err := svc.SearchEvents(ctx, sessions.SearchEventsRequest{App: "a", User: "u1", Query: "lighthouse 299 of s3"})
	if err != nil || len(hits) == 0 || hits[0].Session.ID != "s3" || hits[0].Event.ID != "e299" {
		t.Fatalf("search = %+v, %v; want e299 of s3 first", hits, err)
	}
}
