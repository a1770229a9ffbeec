package sqlite

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/kioku-ai/kioku/internal/sqlitedb"
	"github.com/kioku-ai/kioku/sessions"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
)

// TestSearchBacklog opens a database written before the search index
// existed (schema version 1): opening it puts its sessions in the backlog,
// and once ReindexSearch (the sweeper's) has worked it off, search finds
// their events.
func TestSearchBacklog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kioku.db")
	db, err := sqlitedb.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Migrate("sessions", schema[:1]); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	e := &sessiontype.Event{ID: "e1", Author: "user", Timestamp: now, Content: &sessiontype.Content{Role: "user", Parts: []sessiontype.Part{{Text: "the lighthouse keeper"}}}}
	body, err := encodeEvent(e)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Write(context.Background(), func(tx *sql.Tx) error {
		if _, err := tx.Exec(`INSERT INTO sessions (app, id, user, create_ns, update_ns, last_seq) VALUES ('a', 's1', 'u1', ?, ?, 1)`, now.UnixNano(), now.UnixNano()); err != nil {
			return err
		}
		_, err := tx.Exec(`INSERT INTO events (app, session, seq, id, ts_ns, body) VALUES ('a', 's1', 1, 'e1', ?, ?)`, now.UnixNano(), body)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(db)
	if err != nil {
		t.Fatal(err)
	}
	var left int
	if err := db.Read().QueryRow(`SELECT count(*) FROM search_backlog`).Scan(&left); err != nil || left != 1 {
		t.Fatalf("backlog after opening: %d, %v; want the one session, left for the background", left, err)
	}
	if n, err := s.ReindexSearch(t.Context(), 100); err != nil || n != 1 {
		t.Fatalf("ReindexSearch = %d, %v; want the one session", n, err)
	}
	svc := sessions.NewService(s, sessions.Config{Now: func() time.Time { return now }})
	hits, _, err := svc.SearchEvents(t.Context(), sessions.SearchEventsRequest{App: "a", User: "u1", Query: "lighthouse"})
	if err != nil || len(hits) != 1 || hits[0].Event.ID != "e1" || hits[0].Session.ID != "s1" {
		t.Fatalf("search after the backlog = %+v, %v", hits, err)
	}
	if err := db.Read().QueryRow(`SELECT count(*) FROM search_backlog`).Scan(&left); err != nil || left != 0 {
		t.Fatalf("backlog left: %d, %v", left, err)
	}
	db.Close()
}

// TestSearchReindexOnNewTerms: an index that holds the terms of another
// terms.Version is built again in the background once the store is opened:
// its sessions go to the backlog, which ReindexSearch works off.
func TestSearchReindexOnNewTerms(t *testing.T) {
	db, err := sqlitedb.Open(filepath.Join(t.TempDir(), "kioku.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	s, err := New(db)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	svc := sessions.NewService(s, sessions.Config{Now: func() time.Time { return now }})
	if _, err := svc.CreateSession(t.Context(), sessions.CreateSessionRequest{App: "a", User: "u1", ID: "s1"}); err != nil {
		t.Fatal(err)
	}
	e := &sessiontype.Event{ID: "e1", Author: "user", Content: &sessiontype.Content{Parts: []sessiontype.Part{{Text: "the lighthouse keeper"}}}}
	if _, err := svc.AppendEvent(t.Context(), sessiontype.Key{App: "a", User: "u1", ID: "s1"}, e, nil); err != nil {
		t.Fatal(err)
	}
	// The indexer's pass (RunIndexer's, in a server) indexes the event.
	if n, err := s.IndexSearch(t.Context(), 100); err != nil || n != 1 {
		t.Fatalf("IndexSearch = %d, %v; want the one event", n, err)
	}
	// Make the index look built by a version that cut the text otherwise.
	err = db.Write(t.Context(), func(tx *sql.Tx) error {
		var doc int64
		if err := tx.QueryRow(`SELECT doc FROM search_docs`).Scan(&doc); err != nil {
			return err
		}
		if _, err := tx.Exec(`DELETE FROM search_fts WHERE rowid = ?`, doc); err != nil {
			return err
		}
		if _, err := tx.Exec(`INSERT INTO search_fts (rowid, terms) VALUES (?, 'zqxj')`, doc); err != nil {
			return err
		}
		_, err := tx.Exec(`UPDATE search_version SET v = 1`)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	search := func(svc *sessions.Service, q string) int {
		hits, _, err := svc.SearchEvents(t.Context(), sessions.SearchEventsRequest{App: "a", User: "u1", Query: q})
		if err != nil {
			t.Fatal(err)
		}
		return len(hits)
	}
	if search(svc, "lighthouse") != 0 {
		t.Fatal("the stale index is not in place")
	}
	s2, err := New(db)
	if err != nil {
		t.Fatal(err)
	}
	svc2 := sessions.NewService(s2, sessions.Config{Now: func() time.Time { return now }})
	if n, err := s2.ReindexSearch(t.Context(), 100); err != nil || n != 1 {
		t.Fatalf("ReindexSearch = %d, %v; want the one session", n, err)
	}
	if search(svc2, "lighthouse") != 1 {
		t.Fatal("the index was not built again with the current terms")
	}
}
