package model

import (
	"cmp"
	"context"
	"hash/fnv"
	"math"
	"slices"

	"github.com/kioku-ai/kioku/internal/terms"
)

// OfflineDimensions is the size of the offline embedder's vectors (the most
// Firestore's vector index accepts).
const OfflineDimensions = 2048

// Offline is the built-in embedder: deterministic, local, no network and no
// model weights. A text's features are its terms (OfflineTerms); its
// vector is their hashed bag:
//
//   - Each feature is hashed (FNV-1a) to one of OfflineDimensions
//     coordinates with a sign from another bit of the hash ("feature
//     hashing"), which keeps the vector fixed in size so that any store's
//     vector search can use it; collisions add noise. A text has a few
//     dozen features, so the vector is sparse.
//   - A query vector has unit length; a document vector is divided by the
//     square root of its length, which favours longer documents a little
//     (in the spirit of BM25's length normalisation).
//
// The memory bank does not rank by these vectors alone: it matches the
// terms themselves, without hashing collisions, weighting each by how rare
// it is among the memories of the scope (see memorybank). The vectors
// serve vector search where a store has nothing else (Firestore's
// FindNearest).
//
// It knows nothing about synonyms: "car" does not meet "automobile". Use a
// real embedding model (Gemini, or an OpenAI-compatible server) for that;
// the memory bank then combines it with these terms (hybrid retrieval).
type Offline struct{}

// Name implements Embedder. Its version changes whenever a text gets
// another vector or other terms (v2: Snowball stems, package terms version
// 2; v3: irregular verb forms, terms version 3; v4: concept features), so
// that the memory bank re-embeds memories stored with an older one in the
// background, as for any change of embedder.
func (Offline) Name() string { return "kioku-offline-v4" }

// IsOffline reports whether e is the offline embedder, itself or wrapped
// (an embedder that wraps another, as a Meter's does, has a method Unwrap()
// Embedder that returns it).
func IsOffline(e Embedder) bool {
	for {
		switch x := e.(type) {
		case Offline:
			return true
		case interface{ Unwrap() Embedder }:
			e = x.Unwrap()
		default:
			return false
		}
	}
}

// Dimensions implements Embedder.
func (Offline) Dimensions() int { return OfflineDimensions }

// Embed implements Embedder. It never fails.
func (o Offline) Embed(_ context.Context, texts []string, task EmbedTask) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i, t := range texts {
		out[i] = o.Vector(t, task)
	}
	return out, nil
}

// Vector embeds one text (see Offline).
func (Offline) Vector(text string, task EmbedTask) []float32 {
	v := make([]float32, OfflineDimensions)
	acc := make([]float64, OfflineDimensions)
	for _, f := range offlineFeatures(text) {
		i := int(f.hash % OfflineDimensions)
		if f.hash>>63 == 1 {
			acc[i] -= f.weight
		} else {
			acc[i] += f.weight
		}
	}
	var sum float64
	for _, a := range acc {
		sum += a * a
	}
	if sum == 0 {
		return v
	}
	n := 1 / math.Sqrt(sum) // unit length
	if task == TaskDocument {
		n = 1 / math.Sqrt(math.Sqrt(sum))
	}
	for i, a := range acc {
		v[i] = float32(a * n)
	}
	return v
}

// Term is one weighted feature of a text (OfflineTerms), in 8 bytes.
type Term struct {
	// ID identifies the feature: the low 31 bits of its FNV-1a hash, and
	// the top bit set for a word (see Word). ID % OfflineDimensions is the
	// feature's coordinate in the offline embedder's vector.
	ID     uint32
	Weight float32
}

// wordBit marks the ID of a word.
const wordBit = 1 << 31

// Word reports whether the term is one word of the text: a stem, a CJK
// bigram or lone kana (not a single Han character of a longer CJK run).
func (t Term) Word() bool { return t.ID&wordBit != 0 }

// Bucket returns the term's coordinate in the offline embedder's vector.
func (t Term) Bucket() int { return int(t.ID % OfflineDimensions) }

// The weights of the offline features.
const (
	weakWeight = 1.0 / 3 // a word of kind terms.Weak
	hanWeight  = 0.3     // a single Han character of a CJK run
	kanaWeight = 0.5     // a lone kana character
)

// OfflineTerms returns the features of a text, sorted by ID (one Term per
// feature; of two that collide, the rarest of events, one is kept). They are its terms
// (package internal/terms, which the event search index uses too):
// Latin-script words without stop words, reduced to a Snowball stem, so
// that "paints", "painted" and "painting" are one feature; for runs of CJK
// characters every character bigram, and each Han character at weight
// 0.3. Words that are frequent in conversation but say little ("really",
// "thing", "feel") count a third. A feature's weight grows with the
// logarithm of its count in the text (1 + ln tf).
//
// Word pairs ("support group"), compounds ("road trip" as "roadtrip") and
// character 4-grams ("grandma" meeting "grandmother") were measured as
// further features on LoCoMo and left out: each helped one variant and
// hurt the other (docs/benchmarks.md, What was tried and left out).
//
// A word of one of a dozen everyday concepts (drinks, food, home, work,
// family, pets, likes, study, birthdays, travel, names; see
// offlineConcepts) also gives the concept's feature, at weight 0.3 and not
// a word of the text: "tea" and "drink" share one, so of two memories that
// share only a name with "What does Ann drink?", the one about tea ranks
// first rather than the one with the smaller id.
func OfflineTerms(text string) []Term {
	feats := offlineFeatures(text)
	out := make([]Term, 0, len(feats))
	for _, f := range feats {
		t := Term{ID: uint32(f.hash) &^ wordBit, Weight: float32(f.weight)}
		if f.word {
			t.ID |= wordBit
		}
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b Term) int { return cmp.Compare(a.ID, b.ID) })
	return slices.CompactFunc(out, func(a, b Term) bool { return a.ID == b.ID })
}

type feature struct {
	hash   uint64 // FNV-1a of the key
	weight float64
	word   bool
}

// offlineFeatures returns the weighted features of a text, sorted by hash
// (see OfflineTerms).
func offlineFeatures(text string) []feature {
	type acc struct {
		count, weight float64
		word          bool
	}
	feats := map[string]*acc{}
	add := func(key string, w float64, word bool) {
		if x := feats[key]; x != nil {
			x.count++
			x.word = x.word || word
			return
		}
		feats[key] = &acc{count: 1, weight: w, word: word}
	}
	terms.Each(text, func(t string, kind terms.Kind) {
		switch kind {
		case terms.Word, terms.Weak:
			w := 1.0
			if kind == terms.Weak {
				w = weakWeight
			}
			add("w:"+t, w, true)
			if c := offlineConcepts[t]; c != "" {
				add("r:"+c, conceptWeight, false)
			}
		case terms.Bigram:
			add("c:"+t, 1, true)
		case terms.Han:
			add("k:"+t, hanWeight, false)
		case terms.Single:
			add("c:"+t, kanaWeight, true)
		}
	})
	out := make([]feature, 0, len(feats))
	for key, x := range feats {
		h := fnv.New64a()
		h.Write([]byte(key))
		out = append(out, feature{hash: h.Sum64(), weight: x.weight * (1 + math.Log(x.count)), word: x.word})
	}
	slices.SortFunc(out, func(a, b feature) int { return cmp.Compare(a.hash, b.hash) })
	return out
}
