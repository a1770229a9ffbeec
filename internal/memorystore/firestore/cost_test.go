package firestore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"cloud.google.com/go/firestore"

	"github.com/kioku-ai/kioku/internal/firestoredb"
	"github.com/kioku-ai/kioku/internal/firestoretest"
	"github.com/kioku-ai/kioku/memorybank"
	"github.com/kioku-ai/kioku/model"
)

// TestSearchReadsBounded: a retrieval reads at most 1 + (K+5) + (2K+10)
// documents, counted as Firestore bills them (firestoredb.Meter, as kioku
// bench counts them), in a scope larger than that whose memories all share
// words with the query (the worst case for the lexical pass), and still
// returns K memories.
func TestSearchReadsBounded(t *testing.T) {
	ctx := t.Context()
	meter := &firestoredb.Meter{}
	opts, err := meter.ClientOptions()
	if err != nil {
		t.Fatal(err)
	}
	c, err := firestore.NewClientWithDatabase(ctx, firestoretest.Project(t), firestore.DefaultDatabaseID, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	svc := memorybank.NewService(New(c, Options{}), memorybank.Config{Embedder: model.Offline{}})
	words := []string{"tea", "hiking", "Kyoto", "nurse", "cat", "jazz", "sushi", "chess"}
	rng := rand.New(rand.NewPCG(1, 2))
	fact := func() string {
		return fmt.Sprintf("The user likes %s and %s with %s.", words[rng.IntN(len(words))], words[rng.IntN(len(words))], words[rng.IntN(len(words))])
	}
	scope := memorybank.Scope{"user_id": "u1"}
	const memories = 120
	for range memories {
		if _, err := svc.CreateMemory(ctx, "app1", memorybank.MemoryInput{Fact: fact(), Scope: scope}); err != nil {
			t.Fatal(err)
		}
	}
	reads := func(what string, want int, search func(context.Context) (int, error)) {
		t.Helper()
		before := meter.Usage()
		n, err := search(ctx)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got := meter.Usage().Sub(before).Reads; got > uint64(1+(want+5)+(2*want+10)) {
			t.Errorf("%s: read %d documents; the bound for K %d is %d", what, got, want, 1+(want+5)+(2*want+10))
		}
		if n != want {
			t.Errorf("%s: found %d memories, want %d", what, n, want)
		}
	}
	for i := range 3 {
		q := fact()
		reads(fmt.Sprintf("RetrieveMemories top_k 10, query %d", i), 10, func(ctx context.Context) (int, error) {
			res, _, err := svc.RetrieveMemories(ctx, memorybank.RetrieveRequest{App: "app1", Scope: scope, Query: q, TopK: 10})
			return len(res), err
		})
		// A model embedder's retrieval asks each side for 20 (fusion): both
		// sides find 20.
		reads(fmt.Sprintf("SearchMemories K 20, query %d", i), 20, func(ctx context.Context) (int, error) {
			st := New(c, Options{})
			res, err := st.SearchMemories(ctx, memorybank.SearchQuery{
				App: "app1", ScopeKey: scope.Key(), Vector: model.Offline{}.Vector(q, model.TaskQuery), Model: model.Offline{}.Name(),
				Terms: model.OfflineTerms(q), K: 20,
			})
			dense, lexical := 0, 0
			for _, s := range res {
				dense += min(s.DenseRank, 1)
				lexical += min(s.LexicalRank, 1)
			}
			return min(dense, lexical), err
		})
	}
}
