package retrieval

import (
	"fmt"
	"slices"
	"testing"

	"github.com/kioku-ai/kioku/model"
)

// doc is a memory of a test scope: an id, a fact and a vector.
type doc struct {
	id, fact string
	vec      []float32
}

// rankDocs ranks a scope's memories the way a store does: the scope's
// document frequencies of terms and vectors, the weighted query vector,
// a candidate per memory.
func rankDocs(q Query, vector []float32, docs []doc) []Ranked[string] {
	var terms, dense DocFreq
	for _, d := range docs {
		b := Buckets(model.OfflineTerms(d.fact))
		idx := make([]uint16, len(b))
		for i, x := range b {
			idx[i] = uint16(x)
		}
		terms.Add(SparseVector(model.OfflineDimensions, idx), 1)
		if d.vec != nil {
			dense.Add(NewVector(d.vec), 1)
		}
	}
	var wq []float32
	if vector != nil && dense.N() > 0 {
		wq = WeightedQuery(vector, dense.N(), dense.Get)
	}
	var cands []Candidate[string]
	for _, d := range docs {
		c := Candidate[string]{Item: d.id, ID: d.id, Terms: model.OfflineTerms(d.fact)}
		if wq != nil && d.vec != nil {
			c.Dense, c.HasDense = NewVector(d.vec).Dot(wq), true
		}
		cands = append(cands, c)
	}
	return Rank(q, slices.Values(cands), TermStats{N: terms.N(), DF: terms.Get}, func(id string) string { return id })
}

// lexicalSearch ranks facts for a query by the lexical side alone.
func lexicalSearch(t *testing.T, query string, facts ...string) []Ranked[string] {
	t.Helper()
	var docs []doc
	for i, f := range facts {
		docs = append(docs, doc{id: fmt.Sprintf("m%d", i), fact: f})
	}
	return rankDocs(Query{Terms: model.OfflineTerms(query), K: len(facts)}, nil, docs)
}

func lexicalOrder(res []Ranked[string]) []string {
	var out []string
	for _, r := range res {
		if r.LexicalRank > 0 {
			out = append(out, r.Item)
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
		docs := make([]doc, len(facts))
		for i, f := range facts {
			docs[i] = doc{id: fmt.Sprintf("m%d", i), fact: f}
		}
		return lexicalOrder(rankDocs(Query{Terms: model.OfflineTerms(query), AsksWhen: AsksWhen(query), K: 3}, nil, docs))
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
	docs := []doc{
		{id: "d", fact: "nothing in common", vec: []float32{1, 0}},
		{id: "l", fact: "green tea", vec: []float32{0, 1}},
		{id: "x", fact: "coffee", vec: []float32{0.1, 0.9}},
	}
	res := rankDocs(Query{Terms: model.OfflineTerms("tea"), K: 1}, []float32{1, 0}, docs)
	var got []string
	for _, r := range res {
		got = append(got, fmt.Sprintf("%s/%d/%d", r.Item, r.DenseRank, r.LexicalRank))
	}
	if want := []string{"d/1/0", "l/0/1"}; !slices.Equal(got, want) {
		t.Fatalf("Rank = %v, want %v", got, want)
	}
}
