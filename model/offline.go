package model

import (
	"context"
	"hash/fnv"
	"math"
	"strings"
	"unicode"

	"golang.org/x/text/unicode/norm"
)

// OfflineDimensions is the size of the offline embedder's vectors (the most
// Firestore's vector index accepts).
const OfflineDimensions = 2048

// Offline is the built-in embedder: deterministic, local, no network and no
// model weights. It is a hashed bag of features:
//
//   - Text is normalised (Unicode NFKC, lower case) and cut into runs of
//     letters and digits, and runs of Japanese or Chinese characters.
//   - Latin-script words lose the most common function words (a fixed stop
//     list) and are reduced to a stem by a light suffix stripper (plurals,
//     -ing, -ed, -ly, ...), so that "paintings", "painted" and "painting"
//     are one feature. Words that are frequent in conversation but carry
//     little meaning ("really", "thing", "feel") count a third.
//   - Runs of CJK characters, which have no spaces, give every character
//     bigram (weight 1) and every single Han character (weight 0.3).
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

// Name implements Embedder.
func (Offline) Name() string { return "kioku-offline-v1" }

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

// offlineFeatures returns the weighted features of a text.
func offlineFeatures(text string) map[string]float64 {
	type feature struct{ count, weight float64 }
	feats := map[string]*feature{}
	add := func(f string, w float64) {
		if x := feats[f]; x != nil {
			x.count++
			return
		}
		feats[f] = &feature{count: 1, weight: w}
	}
	text = norm.NFKC.String(strings.ToLower(text))

	flushWord := func(word string) {
		if word == "" || stopWords[word] {
			return
		}
		stem := stemWord(word)
		w := 1.0
		if weakWords[stem] {
			w = 1.0 / 3
		}
		add("w:"+stem, w)
	}
	flushCJK := func(run []rune) {
		for i, r := range run {
			if unicode.Is(unicode.Han, r) {
				add("k:"+string(r), 0.3)
			}
			if i+1 < len(run) {
				add("c:"+string(run[i:i+2]), 1)
			}
		}
		if len(run) == 1 && !unicode.Is(unicode.Han, run[0]) {
			add("c:"+string(run), 0.5)
		}
	}

	var word strings.Builder
	var cjk []rune
	for _, r := range text {
		switch {
		case isCJK(r):
			flushWord(word.String())
			word.Reset()
			cjk = append(cjk, r)
		case r == '\'' || r == '’':
			// Apostrophes vanish: "don't" is "dont", "caroline's" is
			// "carolines" and stems to "caroline".
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			if len(cjk) > 0 {
				flushCJK(cjk)
				cjk = cjk[:0]
			}
			word.WriteRune(r)
		default:
			flushWord(word.String())
			word.Reset()
			if len(cjk) > 0 {
				flushCJK(cjk)
				cjk = cjk[:0]
			}
		}
	}
	flushWord(word.String())
	if len(cjk) > 0 {
		flushCJK(cjk)
	}
	out := make(map[string]float64, len(feats))
	for f, x := range feats {
		out[f] = x.weight * (1 + math.Log(x.count))
	}
	return out
}

func isCJK(r rune) bool {
	return unicode.Is(unicode.Han, r) || unicode.Is(unicode.Hiragana, r) || unicode.Is(unicode.Katakana, r) || r == 'ー'
}

// stemWord strips common English inflectional and derivational suffixes. It
// is deliberately light: it maps the forms of a word people actually vary
// ("paintings", "painted", "painting" → "paint") and leaves the rest alone.
func stemWord(w string) string {
	if len(w) <= 3 || !isASCIIWord(w) {
		return w
	}
	for _, s := range []struct{ suffix, repl string }{
		{"ational", "ate"}, {"fulness", "ful"}, {"iveness", "ive"}, {"ization", "ize"},
		{"nesses", ""}, {"ations", "ate"}, {"ation", "ate"}, {"ments", ""}, {"ment", ""},
		{"ingly", ""}, {"edly", ""}, {"ness", ""}, {"ities", ""}, {"ity", ""},
		{"ies", "y"}, {"ied", "y"}, {"ing", ""}, {"ers", ""}, {"er", ""}, {"ed", ""},
		{"ly", ""}, {"es", ""}, {"s", ""},
	} {
		if !strings.HasSuffix(w, s.suffix) {
			continue
		}
		stem := w[:len(w)-len(s.suffix)] + s.repl
		if len(stem) < 3 {
			continue
		}
		switch s.suffix {
		case "s":
			if strings.HasSuffix(w, "ss") || strings.HasSuffix(w, "us") || strings.HasSuffix(w, "is") {
				return w
			}
		case "es":
			// "boxes", "wishes", "classes" lose "es"; "hikes", "games" only "s".
			if !(strings.HasSuffix(stem, "x") || strings.HasSuffix(stem, "sh") || strings.HasSuffix(stem, "ch") || strings.HasSuffix(stem, "ss") || strings.HasSuffix(stem, "z")) {
				stem = w[:len(w)-1]
			}
		case "ing", "ed", "er", "ers":
			// "running" → "run", "stopped" → "stop"; "hiking" → "hike".
			n := len(stem)
			if n >= 2 && stem[n-1] == stem[n-2] && !strings.ContainsRune("lsz", rune(stem[n-1])) {
				stem = stem[:n-1]
			} else if n >= 2 && isConsonant(stem[n-1]) && isVowel(stem[n-2]) && (n < 3 || isConsonant(stem[n-3])) && !strings.ContainsRune("wxy", rune(stem[n-1])) {
				stem += "e"
			}
		}
		return stem
	}
	return w
}

func isASCIIWord(w string) bool {
	for i := 0; i < len(w); i++ {
		if w[i] >= 0x80 {
			return false
		}
	}
	return true
}

func isVowel(c byte) bool     { return strings.IndexByte("aeiou", c) >= 0 }
func isConsonant(c byte) bool { return c >= 'a' && c <= 'z' && !isVowel(c) }

func setOf(words string) map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(words) {
		m[w] = true
	}
	return m
}

// stopWords are English function words, dropped before hashing.
var stopWords = setOf(`a about above after again against all am an and any are as at be because been
before being below between both but by can could did do does doing down during each few for from
further had has have having he her here hers herself him himself his how i if in into is it its
itself just me more most my myself no nor not now of off on once only or other our ours ourselves
out over own same she should so some such than that the their theirs them themselves then there
these they this those through to too under until up very was we were what when where which while
who whom why will with would you your yours yourself yourselves also yeah yes oh hey hi wow um uh
ok okay lol im ive id ill youre youve dont didnt doesnt isnt wasnt cant wont thats its theres
let lets got get gets getting go goes going gone went come came one two us may might must shall
really`)

// weakWords are frequent in conversation but say little about what it is
// about; they count a third. The set holds their stems.
var weakWords = func() map[string]bool {
	m := map[string]bool{}
	for w := range setOf(`like thing things think thinking feel feeling know want make time good great
love lot lots way much mean sounds sound say said tell told look looks see thanks thank glad happy
amazing awesome nice cool sure well even still always never something anything everything someone
anyone day today year new old back keep take thought felt made kind sort pretty totally definitely
actually probably maybe need try help wonderful excited exciting fun hope hear share talk appreciate
super`) {
		m[stemWord(w)] = true
	}
	return m
}()
