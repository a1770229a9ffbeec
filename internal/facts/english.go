package facts

import (
	"regexp"
	"strings"
	"time"
	"unicode"
)

// English statements are read in three steps: the clause is normalised
// (contractions expanded, opening words such as "Oh," dropped, its time
// expression replaced by a marker), cut into its subject ("I", "my
// sister", "Ann", "The user's dog") and its predicate, and the
// predicate's first verb is put in a neutral form ("lives", "live" and
// "is living" all start "live"; "am" and "is" are "be"; "don't" and
// "doesn't" are "not"). The rules (analyse) then read the neutral
// predicate, so that a statement in the first person and a fact in the
// third person give the same claims.

// marker stands for the clause's time expression.
const marker = "\uE000"

var contractions = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`(?i)\bI'm\b|^im\b`), "I am"},
	{regexp.MustCompile(`(?i)\bI've\b|^ive\b`), "I have"},
	{regexp.MustCompile(`(?i)\bI'll\b`), "I will"},
	{regexp.MustCompile(`(?i)\bI'd\b`), "I would"},
	{regexp.MustCompile(`(?i)\bdon'?t\b`), "do not"},
	{regexp.MustCompile(`(?i)\bdoesn'?t\b`), "does not"},
	{regexp.MustCompile(`(?i)\bdidn'?t\b`), "did not"},
	{regexp.MustCompile(`(?i)\bcan'?t\b`), "cannot"},
	{regexp.MustCompile(`(?i)\bwon'?t\b`), "will not"},
	{regexp.MustCompile(`(?i)\bisn'?t\b`), "is not"},
	{regexp.MustCompile(`(?i)\baren'?t\b`), "are not"},
	{regexp.MustCompile(`(?i)\bwasn'?t\b`), "was not"},
	{regexp.MustCompile(`(?i)\bhaven'?t\b`), "have not"},
	{regexp.MustCompile(`(?i)\bhasn'?t\b`), "has not"},
	{regexp.MustCompile(`(?i)\bwouldn'?t\b`), "would not"},
	{regexp.MustCompile(`(?i)\bcouldn'?t\b`), "could not"},
	{regexp.MustCompile(`(?i)\bshouldn'?t\b`), "should not"},
	{regexp.MustCompile(`(?i)\bweren'?t\b`), "were not"},
	{regexp.MustCompile(`(?i)\bhadn'?t\b`), "had not"},
	{regexp.MustCompile(`(?i)\bwe're\b`), "we are"},
	{regexp.MustCompile(`(?i)\bwe've\b`), "we have"},
	{regexp.MustCompile(`(?i)\bwe'll\b`), "we will"},
	{regexp.MustCompile(`(?i)\bgonna\b`), "going to"},
	{regexp.MustCompile(`(?i)\bwanna\b`), "want to"},
	{regexp.MustCompile(`^i\b`), "I"},
	{regexp.MustCompile(`(?i)\bfavorite\b`), "favourite"},
}

// normalizeEnglish expands contractions and straightens quotes.
func normalizeEnglish(s string) string {
	s = strings.NewReplacer("’", "'", "‘", "'", "“", `"`, "”", `"`).Replace(strings.TrimSpace(s))
	for _, c := range contractions {
		s = c.re.ReplaceAllString(s, c.with)
	}
	// "favourite" keeps the case of its first letter.
	return strings.ReplaceAll(s, "Favourite", "favourite")
}

// stripDiscourse drops the words that open a clause before what it says
// ("Oh, well, I ...").
func stripDiscourse(s string) string {
	for {
		s = strings.TrimLeft(s, " ,-–—:")
		lower := strings.ToLower(s)
		cut := ""
		for w := range discourse {
			if strings.HasPrefix(lower, w) && (len(lower) == len(w) || !isWordByte(lower[len(w)])) && len(w) > len(cut) {
				cut = w
			}
		}
		if cut == "" {
			return s
		}
		s = s[len(cut):]
	}
}

func isWordByte(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= '0' && b <= '9' || b == '\''
}

var (
	// rememberRE is an explicit request: "please remember ...", "remember
	// that ...", "remind me to ..." ("remember to ..." alone is as often
	// advice to the listener).
	rememberRE = regexp.MustCompile(`(?i)^(?:(?:please\s+|pls\s+|can you\s+|could you\s+|will you\s+)(?:remember|note|keep in mind|do not forget|make a note)(?:\s+that|\s*:)?|(?:remember|note|keep in mind|do not forget|never forget)(?:\s+that|\s*:)|remind me)\s+(.+)$`)
	// addressee is the listener, whom a statement about oneself rarely
	// needs ("I wanted to tell you ...").
	addressee = regexp.MustCompile(`(?i)\b(?:you|your|yours)\b`)
	callMeRE  = regexp.MustCompile(`(?i)^(?:please\s+)?(?:call me|you can call me)\s+([\p{L}\p{N}][\p{L}\p{N} '-]{0,39})$`)
	futureRE  = regexp.MustCompile(`(?i)\b(will|going to|plan|planning|intend|next|tomorrow|coming|soon|upcoming|about to|looking forward|cannot wait|hope to|want to|would like to)\b`)
	pastRE    = regexp.MustCompile(`(?i)\b(ago|last|yesterday|was|were|did|had)\b`)
	firstVerb = regexp.MustCompile(`(?i)\bI\s+(?:(?:just|recently|finally|already|also|really)\s+)*([a-z]+)`)
)

// guessTense tells whether a clause looks to the past or the future, for
// bare dates ("on Friday").
func guessTense(c string) tense {
	if m := firstVerb.FindStringSubmatch(c); m != nil && isPast(strings.ToLower(m[1])) {
		return past
	}
	switch {
	case futureRE.MatchString(c):
		return future
	case pastRE.MatchString(c):
		return past
	}
	return present
}

// edBase are verbs that end in -ed in their base form.
var edBase = wordSet(`need feed breed bleed proceed succeed exceed speed embed shed wed bed seed`)

// isPast reports whether a lower-case word is a verb in the past tense.
func isPast(w string) bool {
	return pastVerbs[w] || len(w) > 3 && strings.HasSuffix(w, "ed") && !edBase[w]
}

// dateInfo is the time expression of a clause.
type dateInfo struct {
	w     when
	orig  string // as written
	first bool   // it came before the subject ("Last month I ...")
	// future: the date is not before the day the text was said.
	future bool
}

// phrase returns the expression to write in the fact: the resolved date,
// or as written when it could not be resolved.
func (d dateInfo) phrase() string {
	if p := d.w.english(); p != "" {
		return p
	}
	return d.orig
}

// extractEnglish reads one clause said by sp at now.
func extractEnglish(c string, sp Speaker, now time.Time) (Fact, bool) {
	c = stripDiscourse(normalizeEnglish(c))
	c = strings.TrimRight(c, " .,!")
	if m := rememberRE.FindStringSubmatch(c); m != nil {
		inner := stripDiscourse(m[1])
		if f, ok := extractEnglish(inner, sp, now); ok {
			f.Kind = Instruction
			return f, true
		}
		if to, ok := strings.CutPrefix(inner, "to "); ok {
			return Fact{Text: sp.english() + " asked to be reminded to " + rewritePronouns(to) + ".", Kind: Instruction}, true
		}
		if addressee.MatchString(inner) {
			return Fact{}, false
		}
		return Fact{Text: sp.english() + " asked to remember that " + rewritePronouns(inner) + ".", Kind: Instruction}, true
	}
	if m := callMeRE.FindStringSubmatch(c); m != nil {
		return Fact{Text: sp.english() + " wants to be called " + strings.TrimSpace(m[1]) + ".", Kind: Personal}, true
	}
	if addressee.MatchString(c) {
		return Fact{}, false
	}

	var d dateInfo
	if dm, ok := findEnglishDate(c, now, guessTense(c)); ok {
		d.w, d.orig = dm.w, c[dm.start:dm.end]
		d.future = !now.IsZero() && d.w.prec != noDate && !d.w.t.Before(day(now).t)
		c = c[:dm.start] + marker + c[dm.end:]
	}
	c = stripDiscourse(c)
	if rest, ok := strings.CutPrefix(c, marker); ok {
		d.first = true
		c = stripDiscourse(rest)
	}
	c = frontedSubject(stripVocative(c))
	// "Just started yoga", "Researching adoption agencies": the speaker
	// said without the subject.
	c = supplySubject(c)
	c = invertPossessive(c)
	var poss, raw, pred string
	lower := strings.ToLower(c)
	switch {
	case strings.HasPrefix(c, "I "):
		raw = c[2:]
		pred = neutralise(raw, false)
	case strings.HasPrefix(lower, "my "):
		var ok bool
		if poss, raw, ok = possessiveSplit(c[3:]); !ok {
			return statement(sp, sp.english()+"'s", c[3:], "", d)
		}
		pred = neutralise(raw, true)
	case strings.HasPrefix(lower, "we "):
		return statement(sp, sp.english()+" and others", c[3:], "", d)
	case strings.HasPrefix(lower, "our "):
		return statement(sp, sp.english()+"'s", c[4:], "", d)
	default:
		return mention(sp, c, d)
	}
	a := analyse(sp.key(), poss, pred, d)
	if a.skip {
		if poss == "" {
			return statement(sp, sp.english(), raw, pred, d)
		}
		return statement(sp, sp.english()+"'s", poss+" "+raw, "", d)
	}
	subject := sp.english()
	var text string
	switch {
	case a.text != nil:
		text = a.text(d)
	case poss != "":
		// "my sister lives" is already in the third person.
		text = rewritePronouns(raw)
	default:
		text = renderPredicate(pred)
	}
	if poss != "" {
		subject += "'s " + rewritePronouns(poss)
	}
	if a.text == nil {
		if strings.Contains(text, marker) {
			text = strings.Replace(text, marker, d.phrase(), 1)
		} else if d.orig != "" {
			text += " " + d.phrase()
		}
	}
	date := d.w.field()
	if a.undated {
		date = ""
	}
	// What the rules read as only something done, planned or said of
	// oneself ("other") is told with the message's other such statements.
	loose := true
	for _, c := range a.claims {
		if c.rel != relOther && c.rel != relEvent && c.rel != relPlan {
			loose = false
		}
	}
	return Fact{Text: tidy(subject + " " + text + "."), Kind: a.kind, Date: date, loose: loose}, true
}

var spaces = regexp.MustCompile(`\s+`)

// tidy collapses spaces and the spaces before punctuation.
func tidy(s string) string {
	s = spaces.ReplaceAllString(strings.ReplaceAll(s, marker, ""), " ")
	s = strings.NewReplacer(" ,", ",", " .", ".", ",.", ".", "..", ".").Replace(s)
	return strings.TrimSpace(s)
}

// parseEnglish returns the claims of a fact in the third person ("The
// user lives in Osaka.", "Ann's dog is called Pochi.").
func parseEnglish(fact string) []claim {
	c := strings.TrimRight(normalizeEnglish(fact), " .!")
	var d dateInfo
	// A fixed reference time, so that the same expression always gives
	// the same value ("3 May" and "May 3" are one birthday).
	if dm, ok := findEnglishDate(c, factReference, present); ok {
		d.w, d.orig = dm.w, c[dm.start:dm.end]
		c = c[:dm.start] + marker + c[dm.end:]
	}
	if rest, ok := strings.CutPrefix(c, marker); ok {
		c = strings.TrimLeft(rest, " ,")
	}
	c = invertPossessive(c)
	m := thirdSubject.FindStringSubmatch(c)
	if m == nil || notNames[m[1]] {
		return nil
	}
	who := strings.ToLower(m[1])
	if who == "the user" {
		who = "user"
	}
	c = c[len(m[0]):]
	poss, pred := "", c
	if m[2] != "" {
		var ok bool
		if poss, pred, ok = possessiveSplit(c); !ok {
			return nil
		}
	}
	return analyse(who, poss, neutralise(pred, true), d).claims
}

// factReference is the reference time of dates in stored facts.
var factReference = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// thirdSubject is the subject of a fact: "The user", or a name of one to
// three capitalised words, possibly possessive.
var thirdSubject = regexp.MustCompile(`^((?i:the user)|[\p{Lu}][\p{L}-]*(?: [\p{Lu}][\p{L}-]*){0,2}?)('s)? `)

// notNames are capitalised words that start a sentence without being a
// name.
var notNames = wordSet(`The A An This That It He She They We You I My His Her Their Our Its There Here
Today Tomorrow Yesterday`)

// invertedRE matches "X is <owner>'s N" ("Pochi is Ann's dog", "Pochi is
// my dog").
var invertedRE = regexp.MustCompile(`^(.+?) (?:is|are) ((?i:the user)|(?i:my)|[\p{Lu}][\p{L}-]*(?: [\p{Lu}][\p{L}-]*)?)('s)? (.+)$`)

// invertPossessive turns "Pochi is Ann's dog" into "Ann's dog is Pochi"
// and "Pochi is my dog" into "my dog is Pochi", when the noun is one the
// rules read.
func invertPossessive(c string) string {
	m := invertedRE.FindStringSubmatch(c)
	if m == nil || !possessable(strings.Fields(m[4])) {
		return c
	}
	lowerX, owner := strings.ToLower(m[1]), strings.ToLower(m[2])
	if strings.HasPrefix(lowerX, "i ") || strings.HasPrefix(lowerX, "my ") || strings.HasPrefix(lowerX, "the user") || strings.Contains(m[1], marker) {
		return c
	}
	if owner == "my" {
		if m[3] != "" {
			return c
		}
		return "my " + m[4] + " is " + m[1]
	}
	if m[3] == "" {
		return c
	}
	return m[2] + "'s " + m[4] + " is " + m[1]
}

// possessiveSplit cuts what follows "my" or "Ann's" into the noun (one to
// three words, one the rules read: family, pets, name, home, job,
// favourites, ...) and the predicate.
func possessiveSplit(s string) (poss, pred string, ok bool) {
	toks := strings.Fields(s)
	// An auxiliary ("is", "has") ends the noun before any other verb does
	// ("my favourite drink is tea", not "my favourite" and "drink ...").
	for _, isVerb := range []func(string) bool{func(w string) bool { return auxiliaries[strings.ToLower(w)] }, verbish} {
		for k := 1; k <= 3 && k < len(toks); k++ {
			if isVerb(toks[k]) && possessable(toks[:k]) {
				return strings.Join(toks[:k], " "), strings.Join(toks[k:], " "), true
			}
		}
	}
	return "", "", false
}

// personalNouns are what a person has one of, besides family and pets.
var personalNouns = wordSet(`name full_name first_name nickname job work occupation profession career home house
apartment flat address hometown birthday age hobby hobbies school university college major company employer
boss partner`)

// possessable reports whether a noun phrase is one the rules read after
// "my".
func possessable(np []string) bool {
	if len(np) == 0 {
		return false
	}
	first := strings.ToLower(np[0])
	if first == "favourite" || first == "favorite" {
		return true
	}
	head := strings.ToLower(strings.TrimSuffix(np[len(np)-1], "'s"))
	if head == "name" && len(np) > 1 {
		owner := strings.ToLower(strings.TrimSuffix(np[len(np)-2], "'s"))
		return species[owner] != "" || familyOf(owner) != ""
	}
	return species[head] != "" || familyOf(head) != "" || personalNouns[head] || personalNouns[strings.ToLower(strings.Join(np, " "))]
}

// familyOf returns the family member a word names ("moms" is "mother").
func familyOf(w string) string {
	if f := family[w]; f != "" {
		return f
	}
	return family[strings.TrimSuffix(w, "s")]
}

// speciesOf returns the species a word names.
func speciesOf(w string) string {
	if s := species[w]; s != "" {
		return s
	}
	return species[strings.TrimSuffix(strings.TrimSuffix(w, "s"), "e")]
}

var auxiliaries = wordSet(`is are was were has have had will would can could does do did never just also really recently
still finally always usually often cannot`)

// verbish reports whether a word can be the verb after a possessive
// subject ("my sister lives", "my parents live").
func verbish(w string) bool {
	l := strings.ToLower(w)
	return auxiliaries[l] || genericVerbs[l] || len(l) > 3 && strings.HasSuffix(l, "s") && !strings.HasSuffix(l, "ss") && !strings.HasSuffix(l, "'s") || isPast(l)
}

var modals = wordSet(`will would could should might must may shall can`)

// neutralise puts the first verb of a predicate in its neutral form (see
// the top of this file); third: the subject is in the third person.
func neutralise(pred string, third bool) string {
	toks := strings.Fields(pred)
	i := skipAdverbs(toks, 0)
	if i >= len(toks) {
		return ""
	}
	first := strings.ToLower(toks[i])
	i++
	head := first
	switch first {
	case "am", "is", "are", "be":
		head = "be"
	case "have", "has":
		head = "have"
	case "do", "does", "did":
		if i < len(toks) && strings.ToLower(toks[i]) == "not" {
			head = "not"
			i++
		} else if i < len(toks) {
			// "I do like tea" is "I like tea".
			return neutralise(strings.Join(toks[i:], " "), false)
		}
	case "can":
		if i < len(toks) && strings.ToLower(toks[i]) == "not" {
			head = "cannot"
			i++
		}
	case "never":
		i = skipAdverbs(toks, i)
		if i < len(toks) {
			next := toks[i]
			if third {
				if b, ok := deS(strings.ToLower(next)); ok {
					next = b
				}
			}
			toks[i] = next
		}
	default:
		if third && !modals[first] {
			if b, ok := deS(first); ok {
				head = b
			}
		}
	}
	if head == "be" || head == "have" || head == "not" || head == "cannot" {
		i = skipAdverbs(toks, i)
	}
	return strings.TrimSpace(head + " " + strings.Join(toks[i:], " "))
}

// skipAdverbs returns the index of the first token from i that is not an
// adverb.
func skipAdverbs(toks []string, i int) int {
	for i < len(toks) && adverbs[strings.ToLower(toks[i])] {
		i++
	}
	return i
}

// deS returns the base form of a verb in the third person singular
// ("lives" is "live", "studies" "study", "has" "have").
func deS(w string) (string, bool) {
	switch w {
	case "has":
		return "have", true
	case "is":
		return "be", true
	case "does":
		return "do", true
	case "goes":
		return "go", true
	case "was", "this", "always", "perhaps":
		return w, false
	}
	switch {
	case len(w) > 4 && strings.HasSuffix(w, "ies"):
		return w[:len(w)-3] + "y", true
	case strings.HasSuffix(w, "sses"), strings.HasSuffix(w, "shes"), strings.HasSuffix(w, "ches"), strings.HasSuffix(w, "xes"), strings.HasSuffix(w, "zzes"), strings.HasSuffix(w, "oes"):
		return w[:len(w)-2], true
	case strings.HasSuffix(w, "ss"), strings.HasSuffix(w, "us"), strings.HasSuffix(w, "is"):
		return w, false
	case len(w) > 2 && strings.HasSuffix(w, "s"):
		return w[:len(w)-1], true
	}
	return w, false
}

// thirdPerson conjugates a verb for a subject in the third person
// singular: likes, studies, goes.
func thirdPerson(v string) string {
	switch v {
	case "be":
		return "is"
	case "have":
		return "has"
	}
	switch {
	case len(v) > 1 && strings.HasSuffix(v, "y") && !strings.ContainsAny(v[len(v)-2:len(v)-1], "aeiou"):
		return v[:len(v)-1] + "ies"
	case strings.HasSuffix(v, "o"), strings.HasSuffix(v, "sh"), strings.HasSuffix(v, "ch"), strings.HasSuffix(v, "s"), strings.HasSuffix(v, "x"), strings.HasSuffix(v, "z"):
		return v + "es"
	}
	return v + "s"
}

// renderPredicate writes a neutral predicate for a subject in the third
// person: "be a nurse" is "is a nurse", "not like coffee" "does not like
// coffee".
func renderPredicate(pred string) string {
	toks := strings.Fields(pred)
	if len(toks) == 0 {
		return ""
	}
	head, rest := toks[0], toks[1:]
	switch {
	case head == "not":
		head = "does not"
	case head == "never" && len(rest) > 0:
		head, rest = "never "+conjugate(rest[0]), rest[1:]
	case head == "cannot", head == "was", head == "were", head == "had", modals[head], isPast(head):
	default:
		head = thirdPerson(head)
	}
	out := head
	if len(rest) > 0 {
		out += " " + rewritePronouns(strings.Join(rest, " "))
	}
	return out
}

// conjugate is thirdPerson for a verb in its base form only.
func conjugate(v string) string {
	if isPast(strings.ToLower(v)) || modals[strings.ToLower(v)] {
		return v
	}
	return thirdPerson(v)
}

var pronouns = map[string]string{
	"my": "their", "My": "Their", "me": "them", "mine": "theirs", "myself": "themselves", "I": "they",
	"our": "their", "Our": "Their", "we": "they", "We": "They", "us": "them", "ours": "theirs", "ourselves": "themselves",
	"am": "are",
}

var pronounRE = regexp.MustCompile(`\b(my|My|me|mine|myself|I am|I|our|Our|we|We|us|ours|ourselves)\b`)

// rewritePronouns puts the first person of a phrase in the third: "my
// dog" is "their dog".
func rewritePronouns(s string) string {
	return pronounRE.ReplaceAllStringFunc(s, func(w string) string {
		if w == "I am" {
			return "they are"
		}
		return pronouns[w]
	})
}

// capitalised reports whether a word starts with an upper-case letter.
func capitalised(w string) bool {
	for _, r := range w {
		return unicode.IsUpper(r)
	}
	return false
}
