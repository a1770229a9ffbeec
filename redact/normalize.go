package redact

import (
	"strings"
	"unicode/utf8"
)

// normalized is a text as the detectors read it: full-width ASCII
// characters (Ｕ+FF01 to U+FF5E: digits, letters, ＠, ．, ＋, （ ）, －) made
// ASCII, the ideographic space a space, the dashes people put between
// digits (‐ ‑ ‒ – — ― −, and ー or ｰ between two digits) a hyphen. Each
// character of the original is one character of the normalized text, so
// that a span found in one is a span of the other (original).
type normalized struct {
	text string
	// offsets[i] is the offset in the original of text's byte i, and
	// offsets[len(text)] the original's length; nil when text is the
	// original.
	offsets []int
}

// original returns the offset in the original text of a byte offset of
// the normalized one (at a character boundary).
func (n normalized) original(i int) int {
	if n.offsets == nil {
		return i
	}
	return n.offsets[i]
}

// normalize returns s as the detectors read it.
func normalize(s string) normalized {
	if !strings.ContainsFunc(s, changes) {
		return normalized{text: s}
	}
	var b strings.Builder
	b.Grow(len(s))
	offsets := make([]int, 0, len(s)+1)
	var prev rune // the previous character, normalized
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		m := mapRune(r)
		if (r == 'ー' || r == 'ｰ') && isDigit(prev) {
			next, _ := utf8.DecodeRuneInString(s[i+size:])
			if isDigit(mapRune(next)) {
				m = '-'
			}
		}
		if m == r {
			// Kept as it is, invalid UTF-8 byte for byte.
			b.WriteString(s[i : i+size])
			for k := range size {
				offsets = append(offsets, i+k)
			}
		} else {
			b.WriteByte(byte(m)) // every character mapped is mapped to ASCII
			offsets = append(offsets, i)
		}
		prev = m
		i += size
	}
	offsets = append(offsets, len(s))
	return normalized{text: b.String(), offsets: offsets}
}

// changes reports whether normalize may change r.
func changes(r rune) bool { return mapRune(r) != r || r == 'ー' || r == 'ｰ' }

// mapRune returns the character the detectors read for r.
func mapRune(r rune) rune {
	switch {
	case r >= 0xFF01 && r <= 0xFF5E:
		return r - 0xFF01 + '!'
	case r == 0x3000:
		return ' '
	case r >= 0x2010 && r <= 0x2015, r == 0x2212, r == 0xFE63:
		return '-'
	}
	return r
}

func isDigit(r rune) bool { return r >= '0' && r <= '9' }
