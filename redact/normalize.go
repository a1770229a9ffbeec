package redact

import (
	"html"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

// normalized is a text as the detectors read it, with where each of its
// bytes was read from in the original, so that a span found in one is a
// span of the other (span). normalize reads a text in three steps, each an
// edit of the one before:
//
//   - characters (characterEdits): format characters (category Cf: U+200B,
//     U+200C, U+200D, U+2060, U+FEFF, the soft hyphen, the bidirectional
//     controls) removed; every space (category Zs: U+00A0, U+2007, U+202F,
//     the ideographic space) a space; every decimal digit (category Nd:
//     Arabic-Indic, Devanagari, full-width) its ASCII digit; the other
//     full-width ASCII characters (U+FF01 to U+FF5E: letters, ＠, ．, ＋,
//     （ ）, －) and the small ﹫ ASCII; the dashes people put between
//     digits (‐ ‑ ‒ – — ― −, and ー or ｰ between two digits) a hyphen; an
//     HTML character reference (&#64;, &#x40;, &commat;) the character it
//     stands for; and in a word that has ASCII letters, digits or '@', the
//     Cyrillic and Greek letters that look like Latin ones (confusables)
//     those Latin letters;
//   - bracketed words (bracketEdits): "[at]", "(at)", "{at}", "<at>" an '@'
//     and the same with "dot" a '.', with the spaces around them; and the
//     spaces around an '@' between two words removed;
//   - spelled-out addresses (spelledEdits): " at " and " dot " in a text of
//     an e-mail address's shape ("john at example dot com") an '@' and
//     '.'.
type normalized struct {
	text string
	// starts[i] and ends[i] delimit the characters of the original that
	// text's byte i was read from; both are nil when text is the
	// original.
	starts, ends []int
}

// span returns the span of the original that text[start:end] (not empty,
// at character boundaries) was read from: from the first character read
// to the last, with what was removed between them.
func (n normalized) span(start, end int) (int, int) {
	if n.starts == nil {
		return start, end
	}
	return n.starts[start], n.ends[end-1]
}

// An edit replaces text[start:end] with with ("" removes it).
type edit struct {
	start, end int
	with       string
}

// apply returns n with the sorted, disjoint edits of its text made, each
// byte of a replacement read from the whole span it replaces.
func (n normalized) apply(edits []edit) normalized {
	if len(edits) == 0 {
		return n
	}
	var b strings.Builder
	b.Grow(len(n.text))
	out := normalized{starts: make([]int, 0, len(n.text)), ends: make([]int, 0, len(n.text))}
	keep := func(i, j int) {
		b.WriteString(n.text[i:j])
		for k := i; k < j; k++ {
			start, end := n.span(k, k+1)
			out.starts = append(out.starts, start)
			out.ends = append(out.ends, end)
		}
	}
	at := 0
	for _, e := range edits {
		keep(at, e.start)
		if e.with != "" {
			start, end := n.span(e.start, e.end)
			b.WriteString(e.with)
			for range len(e.with) {
				out.starts = append(out.starts, start)
				out.ends = append(out.ends, end)
			}
		}
		at = e.end
	}
	keep(at, len(n.text))
	out.text = b.String()
	return out
}

// normalize returns s as the detectors read it.
func normalize(s string) normalized {
	n := normalized{text: s}.apply(characterEdits(s))
	n = n.apply(bracketEdits(n.text))
	return n.apply(spelledEdits(n.text))
}

// characterEdits returns the edits of s's characters.
func characterEdits(s string) []edit {
	var edits []edit
	var prev rune // the previous character, normalized
	// Whether the confusables of the word that ends at wordEnd are read
	// as Latin letters.
	wordEnd, latin := -1, false
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf && c != '&' {
			// A run of ASCII, kept as it is.
			j := i + 1
			for j < len(s) && s[j] < utf8.RuneSelf && s[j] != '&' {
				j++
			}
			prev, i = rune(s[j-1]), j
			continue
		}
		if c == '&' {
			if r, size, ok := entity(s[i:]); ok {
				m := mapRune(r)
				edits = append(edits, edit{i, i + size, written(m)})
				if m != removed {
					prev = m
				}
				i += size
				continue
			}
			prev = '&'
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:]) // invalid UTF-8 is kept
		m := mapRune(r)
		switch {
		case r == 'ー' || r == 'ｰ':
			if next, _ := utf8.DecodeRuneInString(s[i+size:]); isDigit(prev) && isDigit(mapRune(next)) {
				m = '-'
			}
		case m == r && r >= 0x370 && r < 0x530: // Greek and Cyrillic
			if l, ok := confusables[r]; ok {
				if i >= wordEnd {
					wordEnd, latin = latinWord(s, i)
				}
				if latin {
					m = l
				}
			}
		}
		if m != r {
			edits = append(edits, edit{i, i + size, written(m)})
		}
		if m != removed {
			prev = m
		}
		i += size
	}
	return edits
}

// written is the text of a character mapRune returned.
func written(m rune) string {
	if m == removed {
		return ""
	}
	return string(m)
}

// latinMark reports whether r makes its word a Latin word.
func latinMark(r rune) bool { return isLatin(r) && r != '_' || r == '@' || r == '＠' }

// maxWord bounds how far latinWord looks on each side of a character.
const maxWord = 1024

// latinWord returns the end of the word (the text between two white
// spaces) around s[i], and whether it has an ASCII letter or digit or an
// '@': a Latin word, whose confusables (confusables.go) are read as the
// Latin letters they look like.
func latinWord(s string, i int) (end int, latin bool) {
	for j := i; j > 0 && j > i-maxWord; {
		r, size := utf8.DecodeLastRuneInString(s[:j])
		if unicode.IsSpace(r) {
			break
		}
		latin = latin || latinMark(r)
		j -= size
	}
	end = i
	for end < len(s) && end < i+maxWord {
		r, size := utf8.DecodeRuneInString(s[end:])
		if unicode.IsSpace(r) {
			break
		}
		latin = latin || latinMark(r)
		end += size
	}
	return end, latin
}

// removed is what mapRune returns for a character the detectors do not
// read.
const removed = -1

// mapRune returns the character the detectors read for r, or removed.
func mapRune(r rune) rune {
	switch {
	case r < utf8.RuneSelf, r >= 0x3040 && r < 0xA000:
		return r // ASCII, kana and CJK ideographs (no spaces, format characters or digits)
	case r >= 0xFF01 && r <= 0xFF5E:
		return r - 0xFF01 + '!'
	case r >= 0x2010 && r <= 0x2015, r == 0x2212, r == 0xFE63:
		return '-'
	case r == 0xFE6B:
		return '@'
	case unicode.Is(unicode.Zs, r):
		return ' '
	case unicode.Is(unicode.Cf, r):
		return removed
	case unicode.Is(unicode.Nd, r):
		return '0' + digitValue(r)
	}
	return r
}

// digitValue returns the value of a decimal digit (category Nd). Unicode
// encodes the digits of each script as one run from 0 to 9, so a range of
// unicode.Nd is whole runs and a digit's value is its distance from the
// range's start, modulo 10 (TestDigitValues checks every digit).
func digitValue(r rune) rune {
	r16 := unicode.Nd.R16
	if i := sort.Search(len(r16), func(i int) bool { return rune(r16[i].Hi) >= r }); i < len(r16) && rune(r16[i].Lo) <= r {
		return (r - rune(r16[i].Lo)) % 10
	}
	r32 := unicode.Nd.R32
	if i := sort.Search(len(r32), func(i int) bool { return rune(r32[i].Hi) >= r }); i < len(r32) && rune(r32[i].Lo) <= r {
		return (r - rune(r32[i].Lo)) % 10
	}
	return 0
}

// maxEntity bounds an HTML character reference ("&CounterClockwiseContourIntegral;"
// is the longest name).
const maxEntity = 34

// entityLen returns the length of the character reference s starts with
// ("&...;"), or 0.
func entityLen(s string) int {
	end := strings.IndexByte(s[:min(len(s), maxEntity)], ';')
	if end < 2 {
		return 0
	}
	body := s[1:end]
	if body[0] == '#' {
		body = body[1:]
		if len(body) > 0 && (body[0] == 'x' || body[0] == 'X') {
			body = body[1:]
		}
	}
	for i := range len(body) {
		if !isLatin(rune(body[i])) || body[i] == '_' {
			return 0
		}
	}
	if body == "" {
		return 0
	}
	return end + 1
}

// entity returns the character an HTML character reference at the start
// of s stands for (package html knows their names), and the reference's
// length.
func entity(s string) (rune, int, bool) {
	l := entityLen(s)
	if l == 0 {
		return 0, 0, false
	}
	ref := s[:l]
	text := html.UnescapeString(ref)
	r, size := utf8.DecodeRuneInString(text)
	if text == ref || size != len(text) {
		return 0, 0, false
	}
	return r, l, true
}

func isDigit(r rune) bool { return r >= '0' && r <= '9' }
