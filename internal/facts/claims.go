package facts

import (
	"slices"
	"strings"

	"github.com/kioku-ai/kioku/internal/terms"
)

// A claim is what a fact says, in a form two facts are compared by: about
// whom (subj), which relation (rel), which one of that relation's things
// (key: the pet, the food liked; "" for a relation with one value, such as
// where someone lives) and what (value).
type claim struct {
	subj  string // "user", "ann", "user/sister"
	rel   string
	key   string
	value string // normalised (see normValue)
	raw   string // the value as written ("Osaka")
	moved bool   // home: the fact says they moved there
}

// The relations. A person has one value of a single relation (one home,
// one name) per key.
const (
	relName      = "name"
	relNickname  = "nickname"
	relAge       = "age"
	relHome      = "home"
	relOrigin    = "origin"
	relRole      = "work-role"
	relWorkplace = "work-place"
	relStudy     = "study"
	relBirthday  = "birthday"
	relFavourite = "favourite"
	relStatus    = "status"
	relDiet      = "diet"
	relPet       = "pet"    // key: species; value: name ("" unnamed)
	relFamily    = "family" // key: member; value: name ("" unnamed)
	relPref      = "pref"   // key: what; value: "+" or "-"
	relAllergy   = "allergy"
	relPlan      = "plan"  // key: what; value: date
	relEvent     = "event" // key: what; value: date
	relOther     = "other" // key: what is said; value ""
)

// named are the relations whose value is a name that can be missing.
var named = map[string]bool{relPet: true, relFamily: true}

// dated are the relations keyed by what and valued by when.
var dated = map[string]bool{relPlan: true, relEvent: true}

// normValue returns the normalised form of a value: its terms (stems, CJK
// bigrams), sorted, each once.
func normValue(s string) string {
	ts := terms.Terms(s)
	slices.Sort(ts)
	return strings.Join(slices.Compact(ts), " ")
}

// relation is how a new claim relates to an existing one.
type relation int

const (
	unrelated relation = iota
	same               // says the same (or less)
	refines            // says the same and more
	conflicts          // says another value of a single relation
)

// compare relates a new claim c to an existing one e.
func compare(c, e claim) relation {
	if c.subj != e.subj || c.rel != e.rel {
		return unrelated
	}
	switch {
	case named[c.rel]:
		if c.key != e.key {
			return unrelated
		}
		switch {
		case c.value == e.value, c.value == "":
			return same
		case e.value == "":
			return refines
		}
		return unrelated // another pet of the same kind
	case dated[c.rel], c.rel == relOther:
		if !overlaps(c.key, e.key) {
			return unrelated
		}
		switch {
		case c.value == e.value, c.value == "":
			return termsRelation(c.key, e.key)
		case e.value == "":
			return refines
		}
		return conflicts
	case c.rel == relPref || c.rel == relAllergy:
		if !overlaps(c.key, e.key) {
			return unrelated
		}
		if c.value != e.value {
			return conflicts
		}
		return termsRelation(c.key, e.key)
	}
	// A relation with one value per key.
	if c.key != e.key {
		return unrelated
	}
	if r := termsRelation(c.value, e.value); r != unrelated {
		return r
	}
	return conflicts
}

// termsRelation relates two normalised values: the same terms, fewer
// (same: the existing one says it already), more (refines), or others.
func termsRelation(c, e string) relation {
	ct, et := strings.Fields(c), strings.Fields(e)
	switch {
	case c == e:
		return same
	case subset(ct, et):
		return same
	case subset(et, ct):
		return refines
	}
	return unrelated
}

// overlaps reports whether two keys are the same thing: one's terms hold
// the other's.
func overlaps(a, b string) bool {
	at, bt := strings.Fields(a), strings.Fields(b)
	return len(at) > 0 && len(bt) > 0 && (subset(at, bt) || subset(bt, at))
}

// subset reports whether every term of a is in b (both sorted).
func subset(a, b []string) bool {
	for _, t := range a {
		if _, ok := slices.BinarySearch(b, t); !ok {
			return false
		}
	}
	return len(a) > 0
}
