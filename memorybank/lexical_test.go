package memorybank

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/kioku-ai/kioku/model"
)

// lexicalSearch ranks facts for a query by the lexical side alone.
func lexicalSearch(t *testing.T, query string, facts ...string) []Scored {
	t.Helper()
	var mems []*Memory
	for i, f := range facts {
		mems = append(mems, &Memory{App: "a", ID: fmt.Sprintf("m%d", i), Fact: f, Scope: Scope{"user_id": "u"}})
	}
	return ScoreMemories(SearchQuery{App: "a", ScopeKey: "user_id=u", Terms: model.OfflineTerms(query), K: len(facts), Now: time.Now()}, mems)
}

func lexicalOrder(res []Scored) []string {
	var out []string
	for _, r := range res {
		if r.LexicalRank > 0 {
			out = append(out, r.Memory.ID)
		}
	}
	return out
}

// TestAsksWhenPrefersDated: for a question that asks when, a memory that
// names a time ranks above one that matches as well but does not.
func TestAsksWhenPrefersDated(t *testing.T) {
	facts := []string{
		"Caroline went to a support group with friends.", // m0: undated
		"Caroline went to a support group last week.",    // m1: says when
		"Caroline went to a support group in 2022.",      // m2: names a year
	}
	rank := func(query string) []string {
		mems := make([]*Memory, len(facts))
		for i, f := range facts {
			mems[i] = &Memory{App: "a", ID: fmt.Sprintf("m%d", i), Fact: f, Scope: Scope{"user_id": "u"}}
		}
		return lexicalOrder(ScoreMemories(SearchQuery{App: "a", ScopeKey: "user_id=u", Terms: model.OfflineTerms(query), AsksWhen: AsksWhen(query), K: 3, Now: time.Now()}, mems))
	}
	if got := rank("Did Caroline go to a support group?"); len(got) != 3 || got[0] != "m0" {
		t.Errorf("a question that does not ask when: %v, want m0 (as short as m2, smaller id) first", got)
	}
	if got := rank("When did Caroline go to a support group?"); len(got) != 3 || got[2] != "m0" {
		t.Errorf("a question that asks when: %v, want the undated m0 last", got)
	}
}

func TestLexicalRanking(t *testing.T) {
	facts := []string{
		"Caroline went hiking in the mountains.",         // m0: the name only
		"Caroline painted a sunset over the lake.",       // m1: the name and the verb
		"Melanie painted her kitchen.",                   // m2: the verb only
		"Caroline and Melanie talked about their plans.", // m3: the name only
		"Caroline likes tea.",                            // m4: the name only, short
	}
	res := lexicalSearch(t, "What did Caroline paint?", facts...)
	got := lexicalOrder(res)
	// m1 holds both words; m2 holds the rarer one (paint: 2 memories,
	// Caroline: 4); the others the common one only.
	if len(got) != 5 || got[0] != "m1" || got[1] != "m2" {
		t.Fatalf("ranking %v, want m1, m2 first", got)
	}
	for i, r := range res {
		if r.Lexical <= 0 || r.Lexical > 1 || i > 0 && r.Lexical > res[i-1].Lexical {
			t.Fatalf("similarities not descending within (0, 1]: %+v", res)
		}
	}
	// A word no memory has leaves nothing; stop words alone match nothing.
	if got := lexicalOrder(lexicalSearch(t, "submarine", facts...)); len(got) != 0 {
		t.Errorf("a query sharing no term ranked %v", got)
	}
	if got := lexicalOrder(lexicalSearch(t, "what did they do with it?", facts...)); len(got) != 0 {
		t.Errorf("a query of stop words ranked %v", got)
	}
}

// Feedback: the best memory's distinctive terms join the query, so a
// memory that shares them ("ceramics studio"), but no word of the query,
// is found next.
func TestLexicalFeedback(t *testing.T) {
	res := lexicalSearch(t, "pottery",
		"Melanie signed up for a pottery class at the ceramics studio.",
		"The ceramics studio fires the bowls on Fridays.",
		"Melanie runs every morning.",
		"Melanie reads before bed.",
	)
	got := lexicalOrder(res)
	if len(got) < 2 || got[0] != "m0" || got[1] != "m1" {
		t.Fatalf("ranking %v, want m0 then m1 (through feedback)", got)
	}
	if res[1].Lexical >= res[0].Lexical {
		t.Errorf("the memory found by feedback (%v) ranks with the one that holds the query's word (%v)", res[1].Lexical, res[0].Lexical)
	}
}

// TestLexicalCooccurrence: a memory that shares no word with the query is
// found through a term that co-occurs with the query's rare word in a
// memory feedback does not draw on (it ranks below the two best).
func TestLexicalCooccurrence(t *testing.T) {
	facts := []string{
		"Melanie took a pottery class with Caroline.",                                            // m0
		"Melanie made pottery bowls with Caroline.",                                              // m1
		"Melanie keeps her pottery glazes, brushes, sketchbooks, aprons and kiln in the garage.", // m2: the third
		"The kiln is warm.", // m3: no word of the query
	}
	// A scope of 300 memories more, so that "pottery" (3 of 304) is rare.
	for i := range 300 {
		facts = append(facts, fmt.Sprintf("Melanie wrote note%d about her day.", i))
	}
	got := lexicalOrder(lexicalSearch(t, "What pottery does Melanie do?", facts...))
	if len(got) < 4 || !slices.Equal(got[:3], []string{"m0", "m1", "m2"}) || got[3] != "m3" {
		t.Fatalf("ranking %v, want m0, m1, m2, then m3 (through the co-occurring kiln)", got[:min(len(got), 5)])
	}
}

// Buckets counts a bucket once however many terms of a text fall in it.
func TestBuckets(t *testing.T) {
	terms := model.OfflineTerms("moon moon and green moon, green")
	got := Buckets(terms)
	if len(got) != 2 || got[0] >= got[1] {
		t.Fatalf("Buckets of moon and green = %v", got)
	}
	for _, tm := range terms {
		if !slices.Contains(got, tm.Bucket()) {
			t.Errorf("bucket of %v missing from %v", tm, got)
		}
	}
}

// Rank returns the union of each side's best K, dense ones first.
func TestRankUnion(t *testing.T) {
	now := time.Now()
	mems := []*Memory{
		{App: "a", ID: "d", Fact: "nothing in common", Scope: Scope{"u": "1"}, Embedding: []float32{1, 0}, EmbeddingModel: "m"},
		{App: "a", ID: "l", Fact: "green tea", Scope: Scope{"u": "1"}, Embedding: []float32{0, 1}, EmbeddingModel: "m"},
		{App: "a", ID: "x", Fact: "coffee", Scope: Scope{"u": "1"}, Embedding: []float32{0.1, 0.9}, EmbeddingModel: "m"},
	}
	res := ScoreMemories(SearchQuery{App: "a", ScopeKey: "u=1", Vector: []float32{1, 0}, Model: "m", Terms: model.OfflineTerms("tea"), K: 1, Now: now}, mems)
	var got []string
	for _, r := range res {
		got = append(got, fmt.Sprintf("%s/%d/%d", r.Memory.ID, r.DenseRank, r.LexicalRank))
	}
	if want := []string{"d/1/0", "l/0/1"}; !slices.Equal(got, want) {
		t.Fatalf("Rank = %v, want %v", got, want)
	}
}
