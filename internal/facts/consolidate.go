package facts

import (
	"slices"
	"strings"

	"github.com/kioku-ai/kioku/internal/terms"
)

// The actions of consolidation (those of the memory bank's consolidation
// reply).
const (
	Create = "CREATE"
	Update = "UPDATE"
	Skip   = "SKIP"
)

// Action is what to do with a new fact.
type Action struct {
	// Candidate is the new fact's number, from 1.
	Candidate int
	// Action is Create, Update or Skip.
	Action string
	// Memory is the number, from 1, of the existing fact updated or
	// already saying the new one; 0 for Create, and for a Skip of a new
	// fact that an earlier new fact says.
	Memory int
	// Fact is the fact to store for Create and Update.
	Fact string
}

// parsed is a fact with what it says.
type parsed struct {
	text   string
	claims []claim
	terms  []string // sorted content terms, without the subject "user"
}

func parse(fact string) parsed {
	p := parsed{text: strings.TrimSpace(fact)}
	if isJapanese(fact) {
		p.claims = parseJapanese(fact)
	} else {
		p.claims = parseEnglish(fact)
	}
	ts := slices.DeleteFunc(terms.Terms(fact), func(t string) bool { return t == "user" })
	slices.Sort(ts)
	p.terms = slices.Compact(ts)
	return p
}

// Consolidate decides, for each new fact, whether an existing one says it
// already (Skip), it changes or completes an existing one (Update: the
// same person and relation with another value, "lives in Osaka" then
// "moved to Kyoto"; or all the existing one says and more), or it is new
// (Create). Existing facts are given in order of similarity, the most
// similar first, which decides between two that qualify; each is acted on
// at most once.
func Consolidate(existing, candidates []string) []Action {
	ex := make([]parsed, len(existing))
	for i, e := range existing {
		ex[i] = parse(e)
	}
	touched := map[int]bool{}
	var earlier []parsed
	out := make([]Action, 0, len(candidates))
	for i, c := range candidates {
		pc := parse(c)
		a := Action{Candidate: i + 1, Action: Create, Fact: pc.text}
		update, skip := -1, -1
		var updateText string
		for j, e := range ex {
			switch v, text := decide(pc, e); v {
			case Update:
				if update < 0 && !touched[j] {
					update, updateText = j, text
				}
			case Skip:
				if skip < 0 {
					skip = j
				}
			}
		}
		switch {
		case update >= 0:
			a = Action{Candidate: i + 1, Action: Update, Memory: update + 1, Fact: updateText}
			touched[update] = true
		case skip >= 0 && !touched[skip]:
			a = Action{Candidate: i + 1, Action: Skip, Memory: skip + 1}
			touched[skip] = true
		case skip >= 0:
			a = Action{Candidate: i + 1, Action: Skip}
		default:
			for _, e := range earlier {
				if v, _ := decide(pc, e); v == Skip {
					a = Action{Candidate: i + 1, Action: Skip}
					break
				}
			}
		}
		earlier = append(earlier, pc)
		out = append(out, a)
	}
	return out
}

// decide relates a new fact to an existing one: Update (with the text to
// store), Skip, or "" (unrelated).
func decide(c, e parsed) (string, string) {
	if strings.EqualFold(strings.TrimRight(c.text, ".。 "), strings.TrimRight(e.text, ".。 ")) {
		return Skip, ""
	}
	if len(c.claims) > 0 && len(e.claims) > 0 {
		var conflict *claim
		var old claim
		anySame, anyRefine := false, false
		matched := make([]bool, len(e.claims))
		extra := false
		for i := range c.claims {
			related := false
			for k, ec := range e.claims {
				switch compare(c.claims[i], ec) {
				case conflicts:
					if conflict == nil {
						conflict, old = &c.claims[i], ec
					}
					related = true
				case same:
					anySame, matched[k], related = true, true, true
				case refines:
					anyRefine, matched[k], related = true, true, true
				}
			}
			if !related && c.claims[i].subj == e.claims[0].subj {
				extra = true
			}
		}
		all := !slices.Contains(matched, false)
		switch {
		case conflict != nil:
			return Update, merged(c.text, *conflict, old)
		case all && (anyRefine || extra):
			return Update, c.text
		case anySame:
			return Skip, ""
		}
		if anyRefine {
			return "", ""
		}
	}
	// What the rules do not read: the same words are the same fact.
	switch {
	case len(c.terms) == 0 || len(e.terms) == 0:
	case slices.Equal(c.terms, e.terms):
		return Skip, ""
	case len(c.terms) >= 3 && subset(c.terms, e.terms):
		return Skip, ""
	case len(e.terms) >= 3 && subset(e.terms, c.terms):
		return Update, c.text
	}
	return "", ""
}

// merged returns the text that updates an existing fact with a new one
// that conflicts with it: the new one, which for a move also says where
// from ("moved from Osaka to Kyoto").
func merged(text string, c, old claim) string {
	if c.rel != relHome || !c.moved || old.raw == "" || old.value == c.value {
		return text
	}
	if isJapanese(text) {
		for _, p := range []string{"に引っ越", "へ引っ越"} {
			if i := strings.Index(text, c.raw+p); i >= 0 && !strings.Contains(text, "から"+c.raw) {
				return text[:i] + old.raw + "から" + text[i:]
			}
		}
		return text
	}
	if strings.Contains(text, " moved from ") {
		return text
	}
	return strings.Replace(text, " moved to ", " moved from "+old.raw+" to ", 1)
}
