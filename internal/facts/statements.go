package facts

import (
	"regexp"
	"strings"
	"time"

	"github.com/kioku-ai/kioku/internal/terms"
)

// Statements that no rule reads. What the rules know is a small part of
// what people say about their lives ("I finally took my kids to a pottery
// workshop", "We went camping in the forest", "My friends are my rocks");
// a clause whose subject is the speaker (I, we, my ..., our ...) and that
// names enough things to stand alone is kept as it was said, in the third
// person with the speaker's name: "Melanie finally took their kids to a
// pottery workshop on 14 July 2023." Consolidation then merges its
// restatements by their words (claims of the relation "other").

// minStatementWords is how many content words (not stop words, not weak
// conversational words, not the speaker's name) a statement needs to be
// kept.
const minStatementWords = 2

// minMentionWords is the same for a clause that names the speaker
// elsewhere than as its subject, which is less often about them.
const minMentionWords = 4

// opinionVerbs open what the speaker thinks or would do rather than what
// they did or are ("I think ...", "I would ...").
var opinionVerbs = wordSet(`think guess mean bet wish suppose wonder agree believe know would could should might
must may shall can cannot imagine hope reckon understand remember forget hear see`)

// statement returns the fact that subject (the speaker as the fact names
// them) raw, when it says enough. pred is raw's neutral form when the
// subject is the speaker alone ("" otherwise: raw is kept as said, with
// its pronouns in the third person).
func statement(sp Speaker, subject, raw, pred string, d dateInfo) (Fact, bool) {
	var text string
	if pred != "" {
		if opinionVerbs[strings.ToLower(firstWord(pred))] || strings.HasPrefix(pred, "not ") || strings.HasPrefix(pred, "cannot ") {
			return Fact{}, false
		}
		text = renderPredicate(pred)
	} else {
		if opinionVerbs[strings.ToLower(firstWord(raw))] {
			return Fact{}, false
		}
		text = rewritePronouns(raw)
	}
	if contentWords(strings.ReplaceAll(text, marker, " "), sp) < minStatementWords {
		return Fact{}, false
	}
	if strings.Contains(text, marker) {
		text = strings.Replace(text, marker, d.phrase(), 1)
	} else if d.orig != "" {
		text += " " + d.phrase()
	}
	return Fact{Text: tidy(subject + " " + text + "."), Kind: Personal, Date: d.w.field(), loose: true}, true
}

// contentWords counts the words of s that say what it is about.
func contentWords(s string, sp Speaker) int {
	name := ""
	if sp.Name != "" {
		name = terms.Stem(strings.ToLower(sp.Name))
	}
	n := 0
	terms.Each(s, func(t string, k terms.Kind) {
		if k != terms.Weak && t != name {
			n++
		}
	})
	return n
}

// subjectless are clauses that start with the speaker's verb: a past
// tense ("Just got some new shoes") or a present participle ("Researching
// adoption agencies"), not followed by a verb of its own (as "Being
// ourselves is ..." is).
var copula = regexp.MustCompile(`(?i)\b(?:is|was|are|were|has|have|makes|made|helps|helped|means|keeps)\b|'s\b`)

// notParticiples are words in -ing that are not verbs.
var notParticiples = wordSet(`nothing something anything everything thing morning evening wedding ceiling
building painting king ring spring string wing sibling darling feeling meeting clothing`)

// supplySubject returns the clause with "I" (or "I am") before a verb
// that starts it without a subject.
func supplySubject(c string) string {
	w := strings.ToLower(firstWord(c))
	switch {
	case w == "" || strings.HasPrefix(c, "I "):
		return c
	case milestones[w], w == "been":
		if w == "been" {
			return "I have " + c
		}
		return "I " + c
	case pastVerbs[w] || isPast(w):
		if hasVerb(c[len(w):]) {
			return c
		}
		return "I " + w + c[len(w):]
	case len(w) > 5 && strings.HasSuffix(w, "ing") && !notParticiples[w]:
		if hasVerb(c[len(w):]) {
			return c
		}
		return "I am " + w + c[len(w):]
	}
	return c
}

var ownVerbs = wordSet(`is are was were has have had does do did cannot`)

// hasVerb reports whether a phrase has a verb of its own: an auxiliary,
// a modal or a past tense ("... gave me the push", "... is vital").
func hasVerb(s string) bool {
	if copula.MatchString(s) {
		return true
	}
	for _, t := range strings.Fields(strings.ToLower(s)) {
		t = strings.Trim(t, ",.!:;\"'")
		if modals[t] || ownVerbs[t] || pastVerbs[t] {
			return true
		}
	}
	return false
}

// vocativeRE is a clause that opens with the listener's name ("Nate,
// after ...").
var vocativeRE = regexp.MustCompile(`^([\p{Lu}][\p{Ll}]+),\s+`)

// stripVocative drops the name a clause opens with.
func stripVocative(c string) string {
	if m := vocativeRE.FindStringSubmatch(c); m != nil && !notNames[m[1]] && monthNames[strings.ToLower(m[1])] == 0 {
		return stripDiscourse(c[len(m[0]):])
	}
	return c
}

// frontedRE is a clause that opens with a phrase of time or place before
// its subject ("after finishing my screenplay I got ...", "at the
// shelter we ...").
var frontedRE = regexp.MustCompile(`^(?i:after|before|during|since|at|in|on|for|through|with|without|over|from|growing up|as a (?:kid|child|teen))\b[^,]{0,60}?\s((?:I|we|We)\s.+)$`)

// frontedSubject returns the clause from its subject when a phrase of time
// or place comes before it; a time the phrase says is lost.
func frontedSubject(c string) string {
	m := frontedRE.FindStringSubmatch(c)
	if m == nil || strings.Contains(c[:len(c)-len(m[1])], marker) {
		return c
	}
	fronted := strings.Fields(strings.ToLower(c[:len(c)-len(m[1])]))
	for _, w := range fronted {
		if w == "i" || w == "we" {
			return c
		}
	}
	return m[1]
}

// firstPersonRE finds the speaker in a clause whose subject is someone or
// something else ("This necklace is special to me").
var firstPersonRE = regexp.MustCompile(`\b(?:I|[Mm]e|[Mm]y|[Mm]yself|[Mm]ine|[Ww]e|[Uu]s|[Oo]ur|[Oo]urs|[Oo]urselves)\b`)

// mention returns the fact of a clause that names the speaker elsewhere
// than as its subject, with the speaker's name where it first does
// ("This necklace is super special to Caroline"), when it says enough.
func mention(sp Speaker, c string, d dateInfo) (Fact, bool) {
	if !firstPersonRE.MatchString(c) {
		return Fact{}, false
	}
	return thirdPersonClause(sp, c, d, minMentionWords)
}

// thirdPersonClause returns a clause as said, with the speaker's name where
// it first names them and their pronouns in the third person after, when
// it has at least min content words.
func thirdPersonClause(sp Speaker, c string, d dateInfo, min int) (Fact, bool) {
	text := c
	if loc := firstPersonRE.FindStringIndex(c); loc != nil {
		var name string
		switch strings.ToLower(c[loc[0]:loc[1]]) {
		case "my", "mine", "our", "ours":
			name = sp.english() + "'s"
		case "we", "us", "ourselves":
			name = sp.english() + " and others"
		default:
			name = sp.english()
		}
		if loc[0] > 0 {
			name = strings.Replace(name, "The user", "the user", 1)
		}
		text = c[:loc[0]] + name + rewritePronouns(c[loc[1]:])
	}
	if contentWords(strings.ReplaceAll(text, marker, " "), sp) < min {
		return Fact{}, false
	}
	if strings.Contains(text, marker) {
		text = strings.Replace(text, marker, d.phrase(), 1)
	} else if d.orig != "" {
		text += " " + d.phrase()
	}
	text = tidy(text + ".")
	r := []rune(text)
	return Fact{Text: strings.ToUpper(string(r[0])) + string(r[1:]), Kind: Personal, Date: d.w.field(), loose: true}, true
}

// aside returns a clause said by sp at now that is no statement of
// theirs the rules or the statements above read ("It was a transgender
// poetry reading", "They signed it to show our friendship"), as said in
// the third person, with what was said to the listener written with the
// listener's name: Extract tells it only with the message's statements
// (mergeLoose).
func aside(c string, sp Speaker, now time.Time) (Fact, bool) {
	c = strings.TrimRight(stripDiscourse(normalizeEnglish(c)), " .,!")
	if addressee.MatchString(c) {
		if sp.To == "" {
			return Fact{}, false
		}
		c = toListener(c, sp.To)
	}
	var d dateInfo
	if dm, ok := findEnglishDate(c, now, guessTense(c)); ok {
		d.w, d.orig = dm.w, c[dm.start:dm.end]
		c = c[:dm.start] + marker + c[dm.end:]
	}
	c = stripVocative(stripDiscourse(c))
	if c == "" {
		return Fact{}, false
	}
	f, ok := thirdPersonClause(sp, c, d, minStatementWords)
	f.aside = true
	return f, ok
}

// listenerRE finds the listener in a clause: "you", "your", "you're".
var listenerRE = regexp.MustCompile(`(?i)\b(?:thank you|you know|you guys|you are|you were|you have|you're|you've|you'll|you'd|yours|your|you)\b`)

// toListener writes what a clause says to the listener with their name:
// "your advice" is "Nate's advice", "you are" "Nate is"; "thank you" and
// "you know" are dropped.
func toListener(c, name string) string {
	return spaces.ReplaceAllString(listenerRE.ReplaceAllStringFunc(c, func(w string) string {
		switch strings.ToLower(w) {
		case "thank you", "you know":
			return ""
		case "you guys":
			return name + " and others"
		case "you are", "you're":
			return name + " is"
		case "you were":
			return name + " was"
		case "you have", "you've":
			return name + " has"
		case "you'll":
			return name + " will"
		case "you'd":
			return name + " would"
		case "your", "yours":
			return name + "'s"
		}
		return name
	}), " ")
}

// photoRE is a note of a photo a message shared, with its caption, as an
// app that captions images writes it beside the text: "[shares a photo: a
// photo of a cup with a dog face on it]" (also "[photo: ...]", "[image:
// ...]").
var photoRE = regexp.MustCompile(`(?i)^\[(?:(?:shares?|shared|sends?|sent) (?:an? )?)?(?:photo|image|picture|pic)(?: of)?:\s*(?:(?:an? )?(?:photo|photograph|photography|picture|image|close up) of\s+)?([^\]]+)\]$`)

// sharedPhoto returns the aside of a photo's caption: "Melanie shared a
// photo of a cup with a dog face on it."
func sharedPhoto(s string, sp Speaker) (Fact, bool) {
	m := photoRE.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return Fact{}, false
	}
	return Fact{Text: tidy(sp.english() + " shared a photo of " + strings.TrimRight(m[1], " .") + "."), Kind: Personal, loose: true, aside: true}, true
}
