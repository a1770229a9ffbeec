package firestore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"cloud.google.com/go/firestore"
	"github.com/kioku-ai/kioku/internal/firestoredb"
	"github.com/kioku-ai/kioku/internal/firestoretest"
	"github.com/kioku-ai/kioku/memorybank"
	"github.com/kioku-ai/kioku/memorybank/memorydriver"
	"github.com/kioku-ai/kioku/memorybank/memorytype"
	"github.com/kioku-ai/kioku/memorybank/retrieval"
	"github.com/kioku-ai/kioku/model"
)

// TestSearchReadsBounded: a retrieval reads at most 1 + (K+5) + (2K+10)
// documents, counted as Firestore bills them (firestoredb.Meter, as kioku
// bench counts them), in a scope larger than that whose memories all share
// words with the query (the worst case for the lexical pass), and still
// returns K memories. A retrieval that ranks by the lexical side alone (the
// offline embedder) reads at most 1 + (2K+10) when its lexical pass finds
// K memories or more (the dense side is not read), and is filled to K by
// the dense side when it finds fewer; either way it returns what it
// returns when the dense side is always read.
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
	scope := memorytype.Scope{"user_id": "u1"}
	const memories = 120
	for range memories {
		if _, err := svc.CreateMemory(ctx, "app1", memorybank.MemoryInput{Fact: fact(), Scope: scope}); err != nil {
			t.Fatal(err)
		}
	}
	// Memories of words few others hold: 20 hold "oboe" (more than K, and
	// more than K+5 + 2K+10 read in all when the dense side is read too),
	// 3 hold "bassoon" (fewer than K).
	for i := range 20 {
		if _, err := svc.CreateMemory(ctx, "app1", memorybank.MemoryInput{Fact: fmt.Sprintf("The user played the oboe at concert %d.", i), Scope: scope}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		if _, err := svc.CreateMemory(ctx, "app1", memorybank.MemoryInput{Fact: fmt.Sprintf("The user's brother has bassoon lesson %d.", i), Scope: scope}); err != nil {
			t.Fatal(err)
		}
	}
	reads := func(what string, want, bound int, search func(context.Context) (int, error)) {
		t.Helper()
		before := meter.Usage()
		n, err := search(ctx)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got := meter.Usage().Sub(before).Reads; got > uint64(bound) {
			t.Errorf("%s: read %d documents; the bound for K %d is %d", what, got, want, bound)
		}
		if n != want {
			t.Errorf("%s: found %d memories, want %d", what, n, want)
		}
	}
	// denseAlways is the service as it was before the lexical pass went
	// first: the store reads the dense side for every search.
	denseAlways := memorybank.NewService(denseAlwaysStore{New(c, Options{})}, memorybank.Config{Embedder: model.Offline{}})
	retrieve := func(what, q string, bound int) {
		t.Helper()
		var res []memorybank.Retrieved
		reads(what, 10, bound, func(ctx context.Context) (int, error) {
			var err error
			res, _, err = svc.RetrieveMemories(ctx, memorybank.RetrieveRequest{App: "app1", Scope: scope, Query: q, TopK: 10})
			return len(res), err
		})
		want, _, err := denseAlways.RetrieveMemories(ctx, memorybank.RetrieveRequest{App: "app1", Scope: scope, Query: q, TopK: 10})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := retrievedList(res), retrievedList(want); got != want {
			t.Errorf("%s: found\n%s\nwith the dense side always read\n%s", what, got, want)
		}
	}
	retrieve("RetrieveMemories top_k 10 of the oboe (lexical pass alone)", "oboe", 1+(2*10+10))
	retrieve("RetrieveMemories top_k 10 of the bassoon (filled by the dense side)", "bassoon", 1+(10+5)+(2*10+10))
	for i := range 3 {
		q := fact()
		retrieve(fmt.Sprintf("RetrieveMemories top_k 10, query %d", i), q, 1+(10+5)+(2*10+10))
		// A model embedder's retrieval asks each side for 20 (fusion): both
		// sides find 20.
		reads(fmt.Sprintf("SearchMemories K 20, query %d", i), 20, 1+(20+5)+(2*20+10), func(ctx context.Context) (int, error) {
			st := New(c, Options{})
			res, err := st.SearchMemories(ctx, memorydriver.SearchQuery{
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

// denseAlwaysStore reads the dense side of every search.
type denseAlwaysStore struct{ *Store }

func (s denseAlwaysStore) SearchMemories(ctx context.Context, q memorydriver.SearchQuery) ([]retrieval.Ranked[*memorytype.Memory], error) {
	q.DenseFillsOnly = false
	return s.Store.SearchMemories(ctx, q)
}

// retrievedList lists retrieved memories, one a line: id, distance, fact.
func retrievedList(res []memorybank.Retrieved) string {
	var b strings.Builder
	for _, r := range res {
		fmt.Fprintf(&b, "%s %.6f %s\n", r.Memory.ID, r.Distance, r.Memory.Fact)
	}
	return b.String()
}
