package firestore

import (
	"encoding/json"
	"fmt"

	"cloud.google.com/go/firestore"
	"github.com/kioku-ai/kioku/internal/firestoredb"
	"github.com/kioku-ai/kioku/memorybank/memorytype"
	"github.com/kioku-ai/kioku/memorybank/retrieval"
	"github.com/kioku-ai/kioku/model"
)

// scopeStats is the document of a scope's vector statistics.
type scopeStats map[string]*modelStats

type modelStats struct {
	N  int     `json:"n"`
	DF []int32 `json:"df"`
}

func readStats(snap *firestore.DocumentSnapshot, err error) (scopeStats, error) {
	if firestoredb.IsNotFound(err) {
		return scopeStats{}, nil
	}
	if err != nil {
		return nil, err
	}
	body, err := snap.DataAt("body")
	if err != nil {
		return nil, err
	}
	st := scopeStats{}
	if err := json.Unmarshal([]byte(body.(string)), &st); err != nil {
		return nil, fmt.Errorf("decoding scope statistics: %w", err)
	}
	return st, nil
}

// termsKey is the entry of scopeStats that counts the memories' terms
// (retrieval.TermStats, by bucket) rather than the vectors of a model.
const termsKey = "kioku_terms"

// counted is what a memory document counts in its scope's term
// statistics: the buckets of the term IDs it holds, if it counts them at
// all.
type counted struct {
	terms []int64
	ok    bool
}

// countedNow is what a memory written now counts: its fact's terms.
func countedNow(m *memorytype.Memory) counted { return counted{terms: termIDs(m.Fact), ok: true} }

// countedIn returns what a stored memory document counts: a document
// written with terms, of this server's version or an older one, was
// counted with the terms it holds (a server of another version counts the
// same IDs), one written before memories had terms (no terms_version) was
// not counted. It also reports whether its terms are of this version.
func countedIn(snap *firestore.DocumentSnapshot) (c counted, current bool, err error) {
	var d struct {
		Terms        []int64 `firestore:"terms"`
		TermsVersion string  `firestore:"terms_version"`
	}
	if err := snap.DataTo(&d); err != nil {
		return counted{}, false, err
	}
	return counted{terms: d.Terms, ok: d.TermsVersion != ""}, d.TermsVersion == termsVersion, nil
}

// count adds (sign 1) or removes (sign -1) a memory's vector and what it
// counts of its terms.
func (st scopeStats) count(m *memorytype.Memory, c counted, sign int32) {
	if m == nil || m.Deleted {
		return
	}
	if c.ok {
		ts := st.entry(termsKey, model.OfflineDimensions)
		ts.N += int(sign)
		terms := make([]model.Term, len(c.terms))
		for i, id := range c.terms {
			terms[i] = model.Term{ID: uint32(id)}
		}
		for _, b := range retrieval.Buckets(terms) {
			ts.DF[b] += sign
		}
	}
	if len(m.Embedding) == 0 {
		return
	}
	ms := st.entry(m.EmbeddingModel, len(m.Embedding))
	ms.N += int(sign)
	for i, x := range m.Embedding {
		if x != 0 {
			ms.DF[i] += sign
		}
	}
}

// entry returns the statistics of a key, with at least dims coordinates.
func (st scopeStats) entry(key string, dims int) *modelStats {
	ms := st[key]
	if ms == nil {
		ms = &modelStats{}
		st[key] = ms
	}
	if len(ms.DF) < dims {
		ms.DF = append(ms.DF, make([]int32, dims-len(ms.DF))...)
	}
	return ms
}

// termStats returns the scope's term statistics.
func (st scopeStats) termStats() retrieval.TermStats {
	ts := st[termsKey]
	if ts == nil {
		return retrieval.TermStats{DF: func(int) int32 { return 0 }}
	}
	return retrieval.TermStats{N: ts.N, DF: ts.df}
}

// df returns how many vectors use coordinate i.
func (ms *modelStats) df(i int) int32 {
	if i < len(ms.DF) {
		return ms.DF[i]
	}
	return 0
}
