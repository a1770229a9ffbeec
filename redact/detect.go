package redact

import (
	"net/netip"
	"regexp"
	"strings"
	"unicode/utf8"
)

// A detector finds spans of one or more categories in a normalized text.
// Its regular expressions are RE2 with bounded repetitions, searched only
// near what their matches must contain (an '@', a number: near), and a
// candidate that fails its check is retried one character further on
// (findAll): its time is linear in the text, times at worst the length of
// its longest match.
type detector struct {
	cats []Category
	find func(t *target, emit func(start, end int, c Category))
}

var detectors = []detector{
	{[]Category{Email}, findEmails},
	{[]Category{Phone, Card, GovernmentID}, findNumbers},
	{[]Category{GovernmentID}, findIDs},
	{[]Category{IPAddress}, findIPs},
	{[]Category{Address}, findAddresses},
}

// ranks orders the categories for spans of the same start and length.
var ranks = map[Category]int{Email: rankEmail, GovernmentID: rankGovernmentID, Card: rankCard, Phone: rankPhone, IPAddress: rankIP, Address: rankAddress}

// findAll reports the matches of re in text[lo:hi] that check (which
// sees the whole text) accepts. A match that check refuses is tried again
// from its next character, so that a refused candidate does not hide one
// that starts inside it.
func findAll(re *regexp.Regexp, text string, lo, hi int, check func(text string, start, end int) bool, emit func(start, end int)) {
	for at := lo; at < hi; {
		loc := re.FindStringIndex(text[at:hi])
		if loc == nil {
			return
		}
		start, end := at+loc[0], at+loc[1]
		if end > start && check(text, start, end) {
			emit(start, end)
			at = end
			continue
		}
		_, size := utf8.DecodeRuneInString(text[start:])
		at = start + max(size, 1)
	}
}

// near runs findAll over the parts of text within back bytes before and
// fwd bytes after an anchor (windows that overlap are searched as one), a
// pattern's longest match being shorter than back or fwd on the side it
// extends from its anchor. Searching near anchors only (an '@', the start
// of a number) keeps the regular expressions off most of a text.
func near(re *regexp.Regexp, text string, anchors []int, back, fwd int, check func(text string, start, end int) bool, emit func(start, end int)) {
	lo, hi := -1, -1
	flush := func() {
		if hi > lo {
			for lo > 0 && !utf8.RuneStart(text[lo]) {
				lo--
			}
			for hi < len(text) && !utf8.RuneStart(text[hi]) {
				hi++
			}
			findAll(re, text, lo, hi, check, emit)
		}
	}
	for _, a := range anchors {
		l, h := max(a-back, 0), min(a+fwd, len(text))
		if l > hi {
			flush()
			lo = l
		}
		hi = h
	}
	flush()
}

// digits is a run of ASCII digits of a text.
type digits struct{ start, end int }

// target is a normalized text the detectors read, with what several of
// them need.
type target struct {
	text string
	runs []digits
	read bool
}

// digitRuns returns the runs of ASCII digits of the text.
func (t *target) digitRuns() []digits {
	if !t.read {
		t.runs, t.read = digitRuns(t.text), true
	}
	return t.runs
}

// digitRuns returns the runs of ASCII digits of text.
func digitRuns(text string) []digits {
	var out []digits
	for i := 0; i < len(text); {
		if !isDigitByte(text[i]) {
			i++
			continue
		}
		j := i
		for j < len(text) && isDigitByte(text[j]) {
			j++
		}
		out = append(out, digits{i, j})
		i = j
	}
	return out
}

// anchored is a pattern searched near the runs of digits it may contain
// (those that anchor accepts, a cheap look at the characters around the
// run): back and fwd bound its longest match before the run's start and
// after it, in bytes.
type anchored struct {
	re        *regexp.Regexp
	back, fwd int
	anchor    func(text string, d digits) bool
}

// find reports the pattern's matches that check accepts.
func (a anchored) find(text string, runs []digits, check func(text string, start, end int) bool, emit func(start, end int)) {
	var at []int
	for _, d := range runs {
		if a.anchor(text, d) {
			at = append(at, d.start)
		}
	}
	near(a.re, text, at, a.back, a.fwd, check, emit)
}

// before and after return the characters around a span (utf8.RuneError
// at the edges of the text, which counts as no character).
func before(text string, i int) rune {
	r, size := utf8.DecodeLastRuneInString(text[:i])
	if size == 0 {
		return ' '
	}
	return r
}

func after(text string, i int) rune {
	r, size := utf8.DecodeRuneInString(text[i:])
	if size == 0 {
		return ' '
	}
	return r
}

// alone reports whether a span stands alone: no letter, digit or '_'
// right before or after it.
func alone(text string, start, end int) bool {
	return !isWordRune(before(text, start)) && !isWordRune(after(text, end))
}

// emailRE finds e-mail addresses: a dot-atom local part (ASCII), '@', and
// a domain of labels ending in a top-level domain of letters. Its longest
// match is 584 bytes before the '@' and 583 after.
var emailRE = regexp.MustCompile(`[A-Za-z0-9!#$%&'*+/=?^_{|}~-]{1,64}(?:\.[A-Za-z0-9!#$%&'*+/=?^_{|}~-]{1,64}){0,8}@(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.){1,8}[A-Za-z]{2,63}`)

func findEmails(t *target, emit func(start, end int, c Category)) {
	text := t.text
	check := func(text string, start, end int) bool {
		return !isWordRune(after(text, end)) && after(text, end) != '@'
	}
	found := func(start, end int) { emit(start, end, Email) }
	for at := 0; ; {
		i := strings.IndexByte(text[at:], '@')
		if i < 0 {
			return
		}
		i += at
		// The token around the '@' that an address can be part of.
		lo, hi := i, i+1
		for lo > 0 && lo > i-600 && isEmailByte(text[lo-1]) {
			lo--
		}
		for hi < len(text) && hi < i+600 && isEmailByte(text[hi]) {
			hi++
		}
		findAll(emailRE, text, lo, hi, check, found)
		at = i + 1
	}
}

// isEmailByte reports whether c may be part of an e-mail address.
func isEmailByte(c byte) bool {
	return isLatin(rune(c)) || c != '@' && strings.IndexByte("!#$%&'*+/=?^_{|}~.-", c) >= 0
}

// findIPs reads the tokens of hex digits, '.' and ':' that stand alone
// and reports those netip reads as an IPv4 address (four decimal parts,
// possibly with a port or a prefix length) or an IPv6 address (two ':'
// at least: "15:04" is a time).
func findIPs(t *target, emit func(start, end int, c Category)) {
	text := t.text
	for i := 0; i < len(text); {
		if !isIPByte(text[i]) {
			i++
			continue
		}
		start, end := i, i
		for end < len(text) && isIPByte(text[end]) {
			end++
		}
		i = end
		// A sentence's full stop or a colon after the address is not part
		// of it.
		for end > start && text[end-1] == '.' {
			end--
		}
		if end-start >= 2 && text[end-1] == ':' && text[end-2] != ':' {
			end--
		}
		if end-start > 64 || isWordRune(before(text, start)) {
			continue
		}
		if after(text, end) == '/' && end+1 < len(text) && isDigitByte(text[end+1]) {
			p := end + 1
			for p < len(text) && p < end+4 && isDigitByte(text[p]) {
				p++
			}
			end = p
		}
		if isWordRune(after(text, end)) {
			continue
		}
		addr, _, _ := strings.Cut(text[start:end], "/")
		switch colons, dots := strings.Count(addr, ":"), strings.Count(addr, "."); {
		case colons == 0 && dots == 3:
			if a, err := netip.ParseAddr(addr); err != nil || !a.Is4() {
				continue
			}
		case colons == 1 && dots == 3:
			if ap, err := netip.ParseAddrPort(addr); err != nil || !ap.Addr().Is4() {
				continue
			}
		case colons >= 2:
			if a, err := netip.ParseAddr(addr); err != nil || !a.Is6() {
				continue
			}
		default:
			continue
		}
		emit(start, end, IPAddress)
	}
}

func isIPByte(c byte) bool {
	return isDigitByte(c) || c == '.' || c == ':' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// The identity numbers that are not only digits.
var (
	// ukNINO: UK national insurance numbers, two letters (not D, F, I, Q,
	// U or V, the second not O), six digits, a suffix A to D.
	ukNINO = anchored{regexp.MustCompile(`[A-CEGHJ-PR-TW-Z][A-CEGHJ-NPR-TW-Z] ?[0-9]{2} ?[0-9]{2} ?[0-9]{2} ?[A-D]`), 3, 12,
		func(text string, d digits) bool {
			i := d.start
			if i > 0 && text[i-1] == ' ' {
				i--
			}
			return i >= 2 && isUpper(text[i-1]) && isUpper(text[i-2])
		}}
	// spanishID: Spanish DNI (8 digits) and NIE (X, Y or Z and 7 digits)
	// numbers with their check letter.
	spanishID = anchored{regexp.MustCompile(`[XYZ]?-?[0-9]{7,8}-?[A-Z]`), 2, 10,
		func(text string, d digits) bool {
			i := d.end
			if i < len(text) && text[i] == '-' {
				i++
			}
			return (d.end-d.start == 7 || d.end-d.start == 8) && i < len(text) && isUpper(text[i])
		}}
	// chineseID: 18-character Chinese resident identity numbers.
	chineseID = anchored{regexp.MustCompile(`[1-9][0-9]{16}[0-9Xx]`), 0, 18,
		func(text string, d digits) bool { return d.end-d.start >= 17 }}
)

func isUpper(c byte) bool { return c >= 'A' && c <= 'Z' }

func findIDs(t *target, emit func(start, end int, c Category)) {
	text := t.text
	found := func(start, end int) { emit(start, end, GovernmentID) }
	runs := t.digitRuns()
	ukNINO.find(text, runs, func(text string, start, end int) bool {
		switch text[start : start+2] {
		case "BG", "GB", "KN", "NK", "NT", "TN", "ZZ":
			return false
		}
		return alone(text, start, end)
	}, found)
	spanishID.find(text, runs, func(text string, start, end int) bool {
		return alone(text, start, end) && spanishCheck(strings.ReplaceAll(text[start:end], "-", ""))
	}, found)
	chineseID.find(text, runs, func(text string, start, end int) bool {
		return alone(text, start, end) && chineseCheck(text[start:end])
	}, found)
}

// spanishCheck reports whether a DNI (12345678Z) or NIE (X1234567L) has
// its check letter: the number modulo 23 in a fixed table, the NIE's
// letter counting as 0, 1 or 2.
func spanishCheck(id string) bool {
	digits := id[:len(id)-1]
	switch digits[0] {
	case 'X':
		digits = "0" + digits[1:]
	case 'Y':
		digits = "1" + digits[1:]
	case 'Z':
		digits = "2" + digits[1:]
	}
	if len(digits) != 8 {
		return false
	}
	n := 0
	for i := range len(digits) {
		n = n*10 + int(digits[i]-'0')
	}
	return "TRWAGMYFPDXBNJZSQVHLCKE"[n%23] == id[len(id)-1]
}

// chineseCheck reports whether an 18-character resident identity number
// has a plausible birth date (positions 7 to 14) and its ISO 7064 MOD
// 11-2 check character.
func chineseCheck(id string) bool {
	y := atoi(id[6:10])
	m := atoi(id[10:12])
	d := atoi(id[12:14])
	if y < 1900 || y > 2100 || m < 1 || m > 12 || d < 1 || d > 31 {
		return false
	}
	weights := [17]int{7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2}
	sum := 0
	for i, w := range weights {
		sum += int(id[i]-'0') * w
	}
	return "10X98765432"[sum%11] == strings.ToUpper(id[17:])[0]
}

func atoi(s string) int {
	n := 0
	for i := range len(s) {
		n = n*10 + int(s[i]-'0')
	}
	return n
}
