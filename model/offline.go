package model

import (
	"context"
	"hash/fnv"
	"math"

	"github.com/kioku-ai/kioku/internal/terms"
)

// OfflineDimensions is the size of the offline embedder's vectors (the most
// Firestore's vector index accepts).
const OfflineDimensions = 2048

// Offline is the built-in embedder: deterministic, local, no network and no
// model weights. It is a hashed bag of features:
//
//   - The features are the text's terms (package internal/terms, which the
//     event search index uses too): normalised (Unicode NFKC, lower case),
//     Latin-script words without stop words and reduced to a stem, so that
//     "paints", "painted" and "painting" are one feature, and for runs
//     of CJK characters every character bigram.
//   - Words that are frequent in conversation but carry little meaning
//     ("really", "thing", "feel") count a third; a single Han character of
//     a CJK run counts 0.3 (a bigram 1).
//   - A feature's weight grows with the logarithm of its count in the text
//     (1 + ln tf), and shorter texts are not favoured: the vector is L2
//     normalised, so similarity is the cosine of two weighted bags.
//   - Each feature is hashed (FNV-1a) to one of OfflineDimensions
//     coordinates with a sign from another bit of the hash ("feature
//     hashing"), which keeps the vector fixed in size so that any store's
//     vector search can use it; collisions add small noise that cancels out
//     on average. A text has a few dozen features, so the vector is sparse.
//
// Bag-of-words similarity needs to know which words are rare; an embedder
// that sees one text at a time cannot. The memory bank supplies it at
// retrieval time: it weights each coordinate of the query by how rare that
// coordinate is among the memories of the scope (see memorybank), which
// for this embedder works like BM25's inverse document frequency and for a
// dense model embedding changes nothing.
//
// It knows nothing about synonyms: "car" does not meet "automobile". Use a
// real embedding model (Gemini, or an OpenAI-compatible server) for that.
type Offline struct{}

// Name implements Embedder. Its version changes whenever a text gets
// another vector (v2: Snowball stems, package terms version 2), so that the
// memory bank re-embeds memories stored with an older one in the
// background, as for any change of embedder.
func (Offline) Name() string { return "kioku-offline-v2" }

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

// Vector embeds one text. A query vector has unit length. A document
// vector is divided by the square root of its length instead of by its
// length, so that the dot product with a query favours long documents
// less than the cosine does; a memory of one sentence and one of three
// then compete on what they say rather than on how much (in the spirit of
// BM25's length normalisation).
func (Offline) Vector(text string, task EmbedTask) []float32 {
	feats := offlineFeatures(text)
	v := make([]float32, OfflineDimensions)
	var sum float64
	acc := make([]float64, OfflineDimensions)
	for f, w := range feats {
		h := fnv.New64a()
		h.Write([]byte(f))
		x := h.Sum64()
		i := int(x % OfflineDimensions)
		if x>>63 == 1 {
			acc[i] -= w
		} else {
			acc[i] += w
		}
	}
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

// offlineFeatures returns the weighted features of a text: its terms
// (package terms) keyed by kind, each weighted by its kind and by the
// logarithm of its count.
func offlineFeatures(text string) map[string]float64 {
	type feature struct{ count, weight float64 }
	feats := map[string]*feature{}
	terms.Each(text, func(t string, kind terms.Kind) {
		var key string
		w := 1.0
		switch kind {
		case terms.Word:
			key = "w:" + t
		case terms.Weak:
			key, w = "w:"+t, 1.0/3
		case terms.Bigram:
			key = "c:" + t
		case terms.Han:
			key, w = "k:"+t, 0.3
		case terms.Single:
			key, w = "c:"+t, 0.5
		}
		if x := feats[key]; x != nil {
			x.count++
			return
		}
		feats[key] = &feature{count: 1, weight: w}
	})
	out := make(map[string]float64, len(feats))
	for f, x := range feats {
		out[f] = x.weight * (1 + math.Log(x.count))
	}
	return out
}
