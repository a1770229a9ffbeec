package redact

import (
	"regexp"
	"strings"
)

// bracketEdits returns the edits of t that read a bracketed "at" or "dot"
// ("[at]", "(dot)", "{AT}", "<at>", with the spaces around it) as '@' or
// '.', and remove the spaces around an '@' between two words ("john @
// example.com").
func bracketEdits(t string) []edit {
	var edits []edit
	free := func() int { // where the next edit may start
		if len(edits) == 0 {
			return 0
		}
		return edits[len(edits)-1].end
	}
	for i := 0; ; i++ {
		k := strings.IndexAny(t[i:], "[({<@")
		if k < 0 {
			break
		}
		i += k
		switch t[i] {
		case '[', '(', '{', '<':
			end, with := bracketed(t, i)
			if end == 0 {
				continue
			}
			start := i
			for start > free() && start > i-3 && t[start-1] == ' ' {
				start--
			}
			for k := 0; k < 3 && end < len(t) && t[end] == ' '; k++ {
				end++
			}
			edits = append(edits, edit{start, end, with})
			i = end - 1
		case '@':
			start, end := i, i+1
			if start > free()+1 && t[start-1] == ' ' && isEmailByte(t[start-2]) && t[start-2] != '.' {
				start--
			}
			if end+1 < len(t) && t[end] == ' ' && isLatin(rune(t[end+1])) {
				end++
			}
			if end-start > 1 {
				edits = append(edits, edit{start, end, "@"})
				i = end - 1
			}
		}
	}
	return edits
}

// bracketed reads a bracketed "at" or "dot" at t[i], its opening bracket:
// the offset after its closing bracket and what it stands for, or 0.
func bracketed(t string, i int) (int, string) {
	closing := byte(']')
	switch t[i] {
	case '(':
		closing = ')'
	case '{':
		closing = '}'
	case '<':
		closing = '>'
	}
	j := i + 1
	for k := 0; k < 2 && j < len(t) && t[j] == ' '; k++ {
		j++
	}
	var with string
	switch {
	case hasWordAt(t, j, "at"):
		with, j = "@", j+2
	case hasWordAt(t, j, "dot"):
		with, j = ".", j+3
	default:
		return 0, ""
	}
	for k := 0; k < 2 && j < len(t) && t[j] == ' '; k++ {
		j++
	}
	if j >= len(t) || t[j] != closing {
		return 0, ""
	}
	return j + 1, with
}

// hasWordAt reports whether t has word (lower-case ASCII) at i, in any
// case.
func hasWordAt(t string, i int, word string) bool {
	return i+len(word) <= len(t) && strings.EqualFold(t[i:i+len(word)], word)
}

// spelledRE finds an e-mail address with " at " and " dot " for '@' and
// '.': a local part of dot-separated words, an '@' or " at ", a domain of
// labels, two at least. Its longest match is under 1,400 bytes on each
// side of a " dot ".
var spelledRE = regexp.MustCompile(`[A-Za-z0-9_%+-]{1,64}(?:(?:\.| (?i:dot) )[A-Za-z0-9_%+-]{1,64}){0,8}(?: (?i:at) |@)[A-Za-z0-9-]{1,63}(?:(?:\.| (?i:dot) )[A-Za-z0-9-]{1,63}){1,8}`)

// spelledEdits returns the edits of t that read " at " and " dot " in an
// e-mail address spelled out ("john at example dot com", "john dot smith
// at example dot co dot uk") as '@' and '.'. An address spelled with " at "
// must spell a dot of its domain too: "I met her at example.com" is not
// one.
func spelledEdits(t string) []edit {
	var dots []int
	for i := 1; i+4 <= len(t); i++ {
		k := strings.IndexAny(t[i:], "dD")
		if k < 0 {
			break
		}
		i += k
		if t[i-1] == ' ' && i+3 < len(t) && t[i+3] == ' ' && hasWordAt(t, i, "dot") {
			dots = append(dots, i-1)
		}
	}
	if len(dots) == 0 {
		return nil
	}
	var edits []edit
	check := func(t string, start, end int) bool {
		m := t[start:end]
		if strings.IndexByte(m, '@') >= 0 {
			return true
		}
		at := strings.Index(strings.ToLower(m), " at ")
		return at >= 0 && strings.Contains(strings.ToLower(m[at:]), " dot ")
	}
	near(spelledRE, t, dots, 1400, 1400, check, func(start, end int) {
		for j := start; j < end; j++ {
			if t[j] != ' ' {
				continue
			}
			k := j + 1 + strings.IndexByte(t[j+1:end], ' ')
			with := "."
			if strings.EqualFold(t[j+1:k], "at") {
				with = "@"
			}
			edits = append(edits, edit{j, k + 1, with})
			j = k
		}
	})
	return edits
}
