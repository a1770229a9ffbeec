// Package terms cuts text into the normalised terms kioku matches text by:
// the features of the offline embedder (package model) and the terms of the
// event search index (package sessions and its stores). Both use this one
// function, so that a memory and an event are matched by the same words.
//
// Text is normalised (Unicode NFKC, lower case) and cut into runs of letters
// and digits, and runs of Japanese or Chinese characters:
//
//   - a run of letters and digits is a word; apostrophes inside it vanish
//     ("don't" is "dont") and so does an "s" after the last one
//     ("caroline's" is "caroline", "she's" "she"). Latin-script words
//     lose the most common English function words (a fixed stop list) and
//     are reduced to a stem (Stem), so that "paints", "painted" and
//     "painting" are one term, and so are "bought" and "buy". Words that
//     are frequent in conversation but say little about what it is about
//     ("really", "thing", "feel") are of Kind Weak;
//   - a run of CJK characters, which has no spaces, gives every character
//     bigram (Bigram) and every single Han character (Han); a run of one
//     kana character gives that character (Single).
package terms

import (
	"hash/fnv"
	"strings"
	"sync/atomic"
	"unicode"

	"github.com/blevesearch/snowballstem"
	"github.com/blevesearch/snowballstem/english"
	"golang.org/x/text/unicode/norm"
)

// Version identifies what Each returns for a text. It changes whenever a
// change of this package gives some text other terms, so that what was
// stored from the terms of an older version (an index, a vector) can be
// recognised and rebuilt (3: irregular verb forms meet their verb).
const Version = 3

// Kind says what a term is; users weight the kinds differently.
type Kind uint8

// The kinds of terms.
const (
	// Word is a stemmed word that is not a stop word.
	Word Kind = iota
	// Weak is a stemmed word frequent in conversation that says little
	// (the embedder counts it a third).
	Weak
	// Bigram is two adjacent CJK characters.
	Bigram
	// Han is one Han character of a CJK run.
	Han
	// Single is a CJK run of one character that is not Han (a lone kana).
	Single
)

// Each calls fn with every term of text, in the order of the text (a term
// occurring twice is given twice).
func Each(text string, fn func(term string, kind Kind)) {
	text = norm.NFKC.String(strings.ToLower(text))

	flushWord := func(word string) {
		if word == "" || stopWords[word] {
			return
		}
		stem := Stem(word)
		if weakWords[stem] {
			fn(stem, Weak)
		} else {
			fn(stem, Word)
		}
	}
	flushCJK := func(run []rune) {
		for i, r := range run {
			if unicode.Is(unicode.Han, r) {
				fn(string(r), Han)
			}
			if i+1 < len(run) {
				fn(string(run[i:i+2]), Bigram)
			}
		}
		if len(run) == 1 && !unicode.Is(unicode.Han, run[0]) {
			fn(string(run), Single)
		}
	}

	var word strings.Builder
	var cjk []rune
	apostrophe := -1 // where in word the last apostrophe was
	flush := func() {
		w := word.String()
		if apostrophe >= 0 && apostrophe == len(w)-1 && w[apostrophe] == 's' {
			w = w[:apostrophe] // "caroline's" is "caroline", "she's" "she"
		}
		flushWord(w)
		word.Reset()
		apostrophe = -1
	}
	for _, r := range text {
		switch {
		case isCJK(r):
			flush()
			cjk = append(cjk, r)
		case r == '\'' || r == '’':
			// Apostrophes vanish inside a word.
			apostrophe = word.Len()
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			if len(cjk) > 0 {
				flushCJK(cjk)
				cjk = cjk[:0]
			}
			word.WriteRune(r)
		default:
			flush()
			if len(cjk) > 0 {
				flushCJK(cjk)
				cjk = cjk[:0]
			}
		}
	}
	flush()
	if len(cjk) > 0 {
		flushCJK(cjk)
	}
}

// Terms returns the terms of text in order (see Each), without their kinds.
func Terms(text string) []string {
	var out []string
	Each(text, func(t string, _ Kind) { out = append(out, t) })
	return out
}

func isCJK(r rune) bool {
	return unicode.Is(unicode.Han, r) || unicode.Is(unicode.Hiragana, r) || unicode.Is(unicode.Katakana, r) || r == 'ー'
}

// Stem reduces a lower-case word to its stem with the Snowball English
// ("Porter2") stemmer, so that "paints", "painted" and "painting" are one
// term, and so are "creative" and "creativity"; words of two letters or
// fewer and words with non-ASCII letters stay as they are. The stemmer
// knows no irregular forms, so the past tense and participle of the common
// irregular verbs are first taken to the verb ("bought" and "buy", "met"
// and "meet", "written" and "write" are one term).
func Stem(w string) string {
	if len(w) <= 2 || !isASCIIWord(w) {
		return w
	}
	h := fnv.New32a()
	h.Write([]byte(w))
	slot := &stems[h.Sum32()%uint32(len(stems))]
	if e := slot.Load(); e != nil && e.word == w {
		return e.stem
	}
	base := w
	if v, ok := irregular[w]; ok {
		base = v
	}
	env := snowballstem.NewEnv(base)
	english.Stem(env)
	stem := env.Current()
	slot.Store(&stemEntry{word: w, stem: stem})
	return stem
}

// stems caches recent stems: the Snowball stemmer costs about half a
// microsecond a word, and conversation repeats its words. A word takes the
// slot its hash names, replacing what was there, so the cache stays this
// size whatever the text.
var stems [1 << 14]atomic.Pointer[stemEntry]

type stemEntry struct{ word, stem string }

func isASCIIWord(w string) bool {
	for i := 0; i < len(w); i++ {
		if w[i] >= 0x80 {
			return false
		}
	}
	return true
}

func setOf(words string) map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(words) {
		m[w] = true
	}
	return m
}

// stopWords are English function words, dropped.
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
// about. The set holds their stems.
var weakWords = func() map[string]bool {
	m := map[string]bool{}
	for w := range setOf(`like thing things think thinking feel feeling know want make time good great
love lot lots way much mean sounds sound say said tell told look looks see thanks thank glad happy
amazing awesome nice cool sure well even still always never something anything everything someone
anyone day today year new old back keep take thought felt made kind sort pretty totally definitely
actually probably maybe need try help wonderful excited exciting fun hope hear share talk appreciate
super`) {
		m[Stem(w)] = true
	}
	return m
}()

// irregular maps the past tense and past participle of common irregular
// English verbs to the verb. Forms that are as often another word are left
// out ("left", "saw", "lay", "bit" as in "a bit"), and so are the verbs
// that are stop words or weak anyway ("went", "made", "thought").
var irregular = func() map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(`begin began begun
bite bitten
blow blew blown
break broke broken
bring brought
build built
buy bought
catch caught
choose chose chosen
dig dug
draw drew drawn
drive drove driven
eat ate eaten
fall fell fallen
feed fed
fight fought
find found
fly flew flown
forget forgot forgotten
freeze froze frozen
give gave given
grow grew grown
hang hung
hide hid hidden
hold held
lead led
lose lost
meet met
pay paid
ride rode ridden
run ran
sell sold
send sent
shake shook shaken
shoot shot
sing sang sung
sink sank sunk
sit sat
sleep slept
speak spoke spoken
spend spent
stand stood
steal stole stolen
strike struck
swim swam swum
swing swung
teach taught
tear tore torn
throw threw thrown
understand understood
wake woke woken
wear wore worn
win won
write wrote written`, "\n") {
		f := strings.Fields(line)
		for _, form := range f[1:] {
			m[form] = f[0]
		}
	}
	return m
}()
