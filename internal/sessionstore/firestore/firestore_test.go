package firestore_test

import (
	"testing"

	gfs "cloud.google.com/go/firestore"

	"github.com/kioku-ai/kioku/internal/firestoretest"
	"github.com/kioku-ai/kioku/internal/sessionstore/firestore"
	"github.com/kioku-ai/kioku/sessions"
	"github.com/kioku-ai/kioku/sessions/sessiondriver/sessiondrivertest"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
)

func TestConformance(t *testing.T) {
	sessiondrivertest.Run(t, func(t *testing.T) *firestore.Store {
		c, _ := firestoretest.NewClient(t)
		return firestore.New(c, firestore.Options{})
	})
}

// TestSearchReindex: sessions whose events carry the search fields of an
// older terms.Version get them again from ReindexSearch.
func TestSearchReindex(t *testing.T) {
	c, _ := firestoretest.NewClient(t)
	store := firestore.New(c, firestore.Options{})
	svc := sessions.NewService(store, sessions.Config{})
	ctx := t.Context()
	key := sessiontype.Key{App: "a", User: "u1", ID: "s1"}
	if _, err := svc.CreateSession(ctx, sessions.CreateSessionRequest{App: key.App, User: key.User, ID: key.ID}); err != nil {
		t.Fatal(err)
	}
	e := &sessiontype.Event{ID: "e1", Author: "user", Content: &sessiontype.Content{Parts: []sessiontype.Part{{Text: "the lighthouse keeper"}}}}
	if _, err := svc.AppendEvent(ctx, key, e, nil); err != nil {
		t.Fatal(err)
	}
	// Make the event look indexed by a version that cut the text otherwise.
	events, err := c.CollectionGroup("events").Documents(ctx).GetAll()
	if err != nil || len(events) != 1 {
		t.Fatalf("events: %d, %v", len(events), err)
	}
	if _, err := events[0].Ref.Update(ctx, []gfs.Update{{Path: "terms", Value: []string{"zqxj"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Collection("kioku_apps").Doc("a").Collection("kioku_sessions").Doc("s1").Update(ctx, []gfs.Update{{Path: "search_v", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	search := func() int {
		hits, _, err := svc.SearchEvents(ctx, sessions.SearchEventsRequest{App: "a", User: "u1", Query: "lighthouse"})
		if err != nil {
			t.Fatal(err)
		}
		return len(hits)
	}
	if search() != 0 {
		t.Fatal("the stale fields are not in place")
	}
	if n, err := store.ReindexSearch(ctx, 10); n != 1 || err != nil {
		t.Fatalf("ReindexSearch = %d, %v; want 1 session", n, err)
	}
	if search() != 1 {
		t.Fatal("the event was not indexed again")
	}
	if n, err := store.ReindexSearch(ctx, 10); n != 0 || err != nil {
		t.Fatalf("second ReindexSearch = %d, %v; want nothing left", n, err)
	}
}
