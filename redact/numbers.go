package redact

import (
	"unicode"
	"unicode/utf8"
)

// Numbers written with separators (phone numbers, card numbers, identity
// numbers) are read as runs: groups of digits joined by one separator
// (space, '-', '.' or '/') or a break (a '/' or '|' with spaces around
// it, or a '|': "4111 1111 / 1111 1111"), a group possibly in
// parentheses, the first possibly after '+'. A run is classified by the shape of its groups and
// its digits, and where the whole run is nothing, so are its parts split
// at spaces ("call 090-1234-5678 4111 1111 1111 1111" holds a phone
// number and a card number).

// group is one group of digits of a run.
type group struct {
	// start and end delimit the digits; with paren the group is written
	// "(digits)", the parentheses just outside.
	start, end int
	paren      bool
	// sep is the separator before the group: 0 for the first group or for
	// none ("(03)1234"), '|' for a break.
	sep byte
}

func (g group) len() int { return g.end - g.start }

// after returns the offset after the group (after its ')').
func (g group) after() int {
	if g.paren {
		return g.end + 1
	}
	return g.end
}

// maxWindow is the most groups one number is made of ("+81 (0)3 1234
// 5678" has five, "+33 1 23 45 67 89" six).
const maxWindow = 8

// findNumbers reports the phone, card and identity numbers of text.
func findNumbers(t *target, emit func(start, end int, c Category)) {
	text := t.text
	for i := 0; i < len(text); {
		if !runStart(text, i) {
			i++
			continue
		}
		plus, groups, end := parseRun(text, i)
		if len(groups) == 0 {
			i++
			continue
		}
		// A run glued to a word at its end ("... 6789 221B") keeps what
		// comes before the glued part's last space.
		for len(groups) > 0 && !runEnds(text, groups[len(groups)-1].after()) {
			last := len(groups) - 1
			for last > 0 && groups[last].sep != ' ' && groups[last].sep != '|' {
				last--
			}
			groups = groups[:last]
		}
		classifyRun(text, plus, groups, emit)
		i = end
	}
}

// runStart reports whether a run starts at i: a digit, a '+' or '('
// before one, after a character that is not part of a word or a number.
func runStart(text string, i int) bool {
	c := text[i]
	switch {
	case isDigitByte(c):
	case c == '+' || c == '(':
		if i+1 >= len(text) || !isDigitByte(text[i+1]) {
			return false
		}
	default:
		return false
	}
	prev, size := utf8.DecodeLastRuneInString(text[:i])
	if size == 0 {
		return true
	}
	if isWordRune(prev) || prev == '+' || prev == '(' && c == '(' {
		return false
	}
	// "3.14", "1,000" and "15:04" continue a number.
	if prev == '.' || prev == ',' || prev == ':' {
		before, _ := utf8.DecodeLastRuneInString(text[:i-size])
		return !isDigit(before)
	}
	return true
}

// runEnds reports whether a run may end at end: not inside a word, a
// decimal or a time.
func runEnds(text string, end int) bool {
	next, size := utf8.DecodeRuneInString(text[end:])
	if size == 0 {
		return true
	}
	if isWordRune(next) {
		return false
	}
	if next == '.' || next == ',' || next == ':' {
		after, _ := utf8.DecodeRuneInString(text[end+size:])
		return !isDigit(after)
	}
	return true
}

// isWordRune reports whether r belongs to a word: a letter, a digit or
// '_'. A number next to one is part of something else (an id, a word).
// Letters of the scripts written without spaces (Han, kana) and Hangul
// (whose particles follow a number directly) do not count: "電話は
// 03-1234-5678です" holds a number.
func isWordRune(r rune) bool {
	switch {
	case r == '_' || unicode.IsDigit(r):
		return true
	case r < 0x80:
		return unicode.IsLetter(r)
	case r == 'ー' || unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Hangul):
		return false
	}
	return unicode.IsLetter(r)
}

func isDigitByte(c byte) bool { return c >= '0' && c <= '9' }

// parseRun reads the run that starts at i: the offset of its '+' (-1 when
// none), its groups, and its end.
func parseRun(text string, i int) (plus int, groups []group, end int) {
	plus = -1
	pos := i
	if text[pos] == '+' {
		plus = pos
		pos++
	}
	var sep byte
	for {
		g := group{sep: sep}
		if pos < len(text) && text[pos] == '(' {
			g.paren = true
			pos++
		}
		g.start = pos
		for pos < len(text) && isDigitByte(text[pos]) {
			pos++
		}
		g.end = pos
		if g.len() == 0 || g.len() > 19 {
			// No digits after '(' or a separator, or too many to be one
			// group of anything classified here.
			if len(groups) == 0 {
				return plus, nil, max(pos, i+1)
			}
			return plus, groups, end
		}
		if g.paren {
			if pos >= len(text) || text[pos] != ')' {
				// "(03" without its ')': the run is what came before.
				if len(groups) == 0 {
					return plus, nil, pos
				}
				return plus, groups, end
			}
			pos++
		}
		groups = append(groups, g)
		end = pos
		// The next group: after one separator, or straight after ')', or
		// a '(' straight after digits ("03(1234)5678").
		sep = 0
		if b := breakAt(text, pos); b > pos {
			sep, pos = '|', b
		} else if pos < len(text) && isSeparator(text[pos]) {
			sep = text[pos]
			pos++
		}
		switch {
		case pos < len(text) && isDigitByte(text[pos]) && (sep != 0 || g.paren):
		case pos+1 < len(text) && text[pos] == '(' && isDigitByte(text[pos+1]):
		default:
			return plus, groups, end
		}
	}
}

func isSeparator(c byte) bool { return c == ' ' || c == '-' || c == '.' || c == '/' }

// breakAt reads a break at pos: a '/' or '|' with up to three spaces on
// each side, but not a '/' alone (a separator). It returns the break's
// end, or pos when there is none.
func breakAt(text string, pos int) int {
	j := pos
	for j < len(text) && j < pos+3 && text[j] == ' ' {
		j++
	}
	if j >= len(text) || text[j] != '/' && text[j] != '|' {
		return pos
	}
	k := j + 1
	for k < len(text) && k < j+4 && text[k] == ' ' {
		k++
	}
	if k-pos == 1 && text[j] == '/' {
		return pos
	}
	return k
}

// classifyRun emits the numbers of a run: the whole run when it is one,
// else the longest windows of groups that are, split at spaces and
// breaks.
func classifyRun(text string, plus int, groups []group, emit func(start, end int, c Category)) {
	// A run splits at a space, but not inside a chain of groups of four
	// digits joined by spaces: "4111 1111 1111 1112" is a mistyped card,
	// and no part of it is a My Number.
	splits := func(i int) bool {
		chain := groups[i-1].len() == 4 && groups[i].len() == 4 && (i == 1 || groups[i-1].sep == ' ')
		return groups[i].sep == '|' || groups[i].sep == ' ' && !chain
	}
	for a := 0; a < len(groups); {
		if a > 0 && !splits(a) {
			a++
			continue
		}
		found := false
		for b := min(len(groups), a+maxWindow) - 1; b >= a; b-- {
			if b < len(groups)-1 && !splits(b+1) {
				continue
			}
			hasPlus := a == 0 && plus >= 0
			c, ok := classify(text, groups[a:b+1], hasPlus)
			if !ok {
				continue
			}
			start, end := groups[a].start, groups[b].end
			if groups[a].paren {
				start--
			}
			if groups[b].paren {
				end++
			}
			if hasPlus {
				start = plus
			}
			emit(start, end, c)
			a, found = b+1, true
			break
		}
		if !found {
			a++
		}
	}
}

// shape is what classify reads of a window of groups.
type shape struct {
	digits []byte
	lens   []int
	// seps are the separators between the groups (0 where none).
	seps   []byte
	parens []bool
}

func shapeOf(text string, groups []group) shape {
	var s shape
	for i, g := range groups {
		s.digits = append(s.digits, text[g.start:g.end]...)
		s.lens = append(s.lens, g.len())
		s.parens = append(s.parens, g.paren)
		if i > 0 {
			s.seps = append(s.seps, g.sep)
		}
	}
	return s
}

// oneSeparator returns the one separator between all the groups (0 for
// one group), and false when they differ or one is not allowed.
func (s shape) oneSeparator(allowed string) (byte, bool) {
	var sep byte
	for i, c := range s.seps {
		if c == 0 || !containsByte(allowed, c) || i > 0 && c != sep {
			return 0, false
		}
		sep = c
	}
	return sep, true
}

func (s shape) anyParen() bool {
	for _, p := range s.parens {
		if p {
			return true
		}
	}
	return false
}

func (s shape) lensAre(want ...int) bool {
	if len(s.lens) != len(want) {
		return false
	}
	for i := range want {
		if s.lens[i] != want[i] {
			return false
		}
	}
	return true
}

func containsByte(s string, c byte) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			return true
		}
	}
	return false
}

// classify tells what a window of groups is, if anything: an identity
// number, a card number or a phone number, checked in that order.
func classify(text string, groups []group, plus bool) (Category, bool) {
	s := shapeOf(text, groups)
	if !plus && !s.anyParen() {
		if governmentNumber(s) {
			return GovernmentID, true
		}
		if cardNumber(s) {
			return Card, true
		}
	}
	if phoneNumber(s, plus) {
		return Phone, true
	}
	return "", false
}

// cardNumber: 13 to 19 digits, not starting with 0, contiguous or in the
// groups cards are printed in (4-4-4-4, 4-6-5, 4-6-4, fours and a shorter
// last group), with one kind of separator (space, '-' or '.') and any
// breaks ('/' or '|': "4111 1111 / 1111 1111"), that pass the Luhn check.
func cardNumber(s shape) bool {
	n := len(s.digits)
	if n < 13 || n > 19 || s.digits[0] == '0' {
		return false
	}
	var sep byte
	for _, c := range s.seps {
		switch {
		case c == '/' || c == '|':
		case c == 0 || !containsByte(" -.", c) || sep != 0 && c != sep:
			return false
		default:
			sep = c
		}
	}
	if len(s.lens) > 1 && !s.lensAre(4, 6, 5) && !s.lensAre(4, 6, 4) {
		for i, l := range s.lens {
			if i < len(s.lens)-1 && l != 4 || l > 4 {
				return false
			}
		}
	}
	return luhn(s.digits)
}

// luhn reports whether digits pass the Luhn (mod 10) check.
func luhn(digits []byte) bool {
	sum := 0
	for i := range digits {
		d := int(digits[len(digits)-1-i] - '0')
		if i%2 == 1 {
			d *= 2
			if d > 9 {
				d -= 9
			}
		}
		sum += d
	}
	return sum%10 == 0
}

// governmentNumber: a US social security number (3-2-4 digits, space or
// '-', without the numbers never issued), or 12 digits (contiguous or
// 4-4-4) that are a Japanese My Number or an Indian Aadhaar number by
// their check digit.
func governmentNumber(s shape) bool {
	sep, ok := s.oneSeparator(" -")
	if !ok {
		return false
	}
	d := s.digits
	switch {
	case s.lensAre(3, 2, 4) && sep != 0:
		area, grp, serial := string(d[:3]), string(d[3:5]), string(d[5:])
		return area != "000" && area != "666" && d[0] != '9' && grp != "00" && serial != "0000"
	case len(d) == 12 && (len(s.lens) == 1 || s.lensAre(4, 4, 4)):
		return myNumber(d) || aadhaar(d)
	}
	return false
}

// myNumber reports whether 12 digits are a Japanese individual number (My
// Number): the last is the check digit of the first eleven.
func myNumber(d []byte) bool {
	sum := 0
	for n := 1; n <= 11; n++ {
		p := int(d[11-n] - '0')
		q := n + 1
		if n >= 7 {
			q = n - 5
		}
		sum += p * q
	}
	check := 0
	if r := sum % 11; r > 1 {
		check = 11 - r
	}
	return int(d[11]-'0') == check
}

// The tables of the Verhoeff check (dihedral group D5).
var (
	verhoeffD = [10][10]byte{
		{0, 1, 2, 3, 4, 5, 6, 7, 8, 9},
		{1, 2, 3, 4, 0, 6, 7, 8, 9, 5},
		{2, 3, 4, 0, 1, 7, 8, 9, 5, 6},
		{3, 4, 0, 1, 2, 8, 9, 5, 6, 7},
		{4, 0, 1, 2, 3, 9, 5, 6, 7, 8},
		{5, 9, 8, 7, 6, 0, 4, 3, 2, 1},
		{6, 5, 9, 8, 7, 1, 0, 4, 3, 2},
		{7, 6, 5, 9, 8, 2, 1, 0, 4, 3},
		{8, 7, 6, 5, 9, 3, 2, 1, 0, 4},
		{9, 8, 7, 6, 5, 4, 3, 2, 1, 0},
	}
	verhoeffP = [8][10]byte{
		{0, 1, 2, 3, 4, 5, 6, 7, 8, 9},
		{1, 5, 7, 6, 2, 8, 3, 0, 9, 4},
		{5, 8, 0, 3, 7, 9, 6, 1, 4, 2},
		{8, 9, 1, 6, 0, 4, 3, 5, 2, 7},
		{9, 4, 5, 3, 1, 2, 6, 8, 7, 0},
		{4, 2, 8, 6, 5, 7, 3, 9, 0, 1},
		{2, 7, 9, 3, 8, 0, 6, 4, 1, 5},
		{7, 0, 4, 6, 9, 1, 3, 2, 5, 8},
	}
)

// aadhaar reports whether 12 digits are an Aadhaar number: not starting
// with 0 or 1, passing the Verhoeff check.
func aadhaar(d []byte) bool {
	if d[0] < '2' {
		return false
	}
	c := byte(0)
	for i := range d {
		c = verhoeffD[c][verhoeffP[i%8][d[len(d)-1-i]-'0']]
	}
	return c == 0
}

// phoneNumber: with '+' (or the international prefix 00), 8 to 15
// digits after it (E.164's bound); with a trunk 0, 9 to 12 digits in
// groups or 10 or 11 together (Japan's 03-1234-5678, 090-1234-5678,
// 0120-123-456, the UK's 020 7946 0958, France's 01 23 45 67 89); else a
// North American number, 3-3-4 with an area code and an exchange that do
// not start with 0 or 1, possibly after 1.
func phoneNumber(s shape, plus bool) bool {
	d := s.digits
	n := len(d)
	if n < 8 || containsByte(string(s.seps), '|') {
		return false // the shortest number below has 8 digits; no breaks
	}
	if _, ok := s.oneSeparator(" -./"); !ok && !s.anyParen() && len(s.lens) > 1 {
		// Mixed separators without parentheses: "1.5 2-3" is no number.
		if !mixedPhoneSeparators(s) {
			return false
		}
	}
	switch {
	case plus:
		// "+44 (0)20 ..." writes the trunk 0, which is not dialled.
		for i, p := range s.parens {
			if p && s.lens[i] == 1 && d[sum(s.lens[:i])] == '0' {
				n--
			}
		}
		return d[0] != '0' && n >= 8 && n <= 15
	case d[0] == '0' && d[1] == '0':
		return d[2] != '0' && n-2 >= 8 && n-2 <= 15 && len(s.lens) > 1
	case d[0] == '0':
		if d[1] == '0' || dateLike(s) {
			return false
		}
		if len(s.lens) == 1 {
			return n == 10 || n == 11
		}
		return n >= 9 && n <= 12
	}
	lens := s.lens
	if len(lens) == 4 && lens[0] == 1 && d[0] == '1' && !s.parens[0] {
		lens, d = lens[1:], d[1:]
	}
	if len(lens) != 3 || lens[0] != 3 || lens[1] != 3 || lens[2] != 4 || s.parens[len(s.parens)-1] || s.parens[len(s.parens)-2] {
		return false
	}
	for _, c := range s.seps {
		if c == '/' {
			return false
		}
	}
	return d[0] >= '2' && d[3] >= '2'
}

// mixedPhoneSeparators allows what phone numbers mix: spaces with one
// other separator ("+81 90-1234-5678").
func mixedPhoneSeparators(s shape) bool {
	var other byte
	for _, c := range s.seps {
		switch {
		case c == ' ' || c == 0:
		case other == 0:
			other = c
		case c != other:
			return false
		}
	}
	return true
}

func sum(xs []int) int {
	t := 0
	for _, x := range xs {
		t += x
	}
	return t
}

// dateLike reports whether a run starts with a date (day, month and year
// or year, month and day joined by '.', '/' or '-'), which a trunk 0 can
// start: "01.02.2023 10" is no phone number.
func dateLike(s shape) bool {
	if len(s.lens) < 3 || s.seps[0] == ' ' || s.seps[0] != s.seps[1] {
		return false
	}
	l := s.lens
	return l[0] <= 2 && l[1] <= 2 && l[2] == 4 || l[0] == 4 && l[1] <= 2 && l[2] <= 2
}
