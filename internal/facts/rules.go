package facts

import (
	"regexp"
	"strings"
)

// analysis is what the rules make of a statement.
type analysis struct {
	claims []claim
	kind   Kind
	// text, when set, writes the predicate the rule's way (with the date
	// where it belongs); otherwise the statement's own words are used.
	text func(d dateInfo) string
	skip bool // not a fact worth keeping
	// undated: the date it names is not when it happened (a birthday).
	undated bool
	// possessive: the statement is about something of the speaker's
	// ("私の名前は", "妹は"), which the Japanese fact says with の.
	possessive bool
}

// group returns a submatch without the date marker.
func group(m []string, i int) string {
	if i >= len(m) {
		return ""
	}
	return strings.TrimSpace(spaces.ReplaceAllString(strings.ReplaceAll(m[i], marker, ""), " "))
}

// cutAt returns s up to the first of the separators (case-insensitive).
func cutAt(s string, seps ...string) string {
	lower := strings.ToLower(s)
	end := len(s)
	for _, sep := range seps {
		if i := strings.Index(lower, sep); i >= 0 && i < end {
			end = i
		}
	}
	return strings.TrimSpace(strings.TrimRight(s[:end], " ,.!"))
}

var leadingArticle = regexp.MustCompile(`(?i)^(?:an?|the|some)\s+`)

func cutPlace(s string) string {
	s = cutAt(strings.ReplaceAll(s, marker, " "), " with ", " and ", " because ", " since ", " for ", ",", " now", " where ", " which ", " but ", " as ", " near ", " at the moment", " these days", " currently", " together", " alone")
	return strings.TrimPrefix(s, "the city of ")
}

func cutRole(s string) string {
	return leadingArticle.ReplaceAllString(cutAt(strings.ReplaceAll(s, marker, " "), " at ", " in ", " for ", " with ", ",", " since ", " and ", " but ", " because "), "")
}

func cutObject(s string) string {
	s = cutAt(strings.ReplaceAll(s, marker, " "), " more than ", " rather than ", " over ", " because ", " since ", ",", " but ", " and i ", " so much", " a lot", " very much", " too", " as well")
	s = strings.TrimPrefix(s, "to ")
	return leadingArticle.ReplaceAllString(s, "")
}

var placeAfterRE = regexp.MustCompile(`(?i)\b(?:at|in|for)\s+(.+)$`)

// placeAfter returns the place of "... at Acme" or "... in Osaka".
func placeAfter(s string) string {
	if m := placeAfterRE.FindStringSubmatch(strings.ReplaceAll(s, marker, " ")); m != nil {
		return cutPlace(m[1])
	}
	return ""
}

// one returns an analysis of one claim.
func one(kind Kind, c claim) (analysis, bool) {
	return analysis{claims: []claim{c}, kind: kind}, true
}

// work returns the claims of a role with the place that follows it.
func work(subj, role, rest string) (analysis, bool) {
	role = cutRole(role)
	if role == "" {
		return analysis{}, false
	}
	a := analysis{kind: Personal, claims: []claim{{subj: subj, rel: relRole, value: normValue(role), raw: role}}}
	if p := placeAfter(rest); p != "" {
		a.claims = append(a.claims, claim{subj: subj, rel: relWorkplace, value: normValue(p), raw: p})
	}
	return a, true
}

// transientPlan are what "I'm going to ..." says of the next minutes.
var transientPlan = regexp.MustCompile(`(?i)^(?:sleep|bed|go (?:to bed|home|now|out|back)|be |say|ask|tell|check|try|think|see |have a look|get going|head out|leave|take a (?:nap|break|shower)|call it|grab|eat now|go$|do (?:my|their|our) best|keep|let|give it|make (?:it|sure))`)

// vague are the first words of a liked thing that points elsewhere
// rather than naming something ("I love that it ...", "I love how ...").
var vague = wordSet(`that how it it's when what this these those seeing being having them him her the_way where why
which who whatever everything something anything`)

// pronounObjects are objects that name nothing ("I used it to ...").
var pronounObjects = wordSet(`it them him her me us something anything everything whatever that`)

// notEvents are past tenses that tell no event ("I thought ...").
var notEvents = wordSet(`had did said told thought felt knew been wanted needed wished hoped guessed figured
realized realised noticed loved liked meant used tried decided supposed`)

// goNowhere is where "I go" says nothing lasting.
var goNowhere = regexp.MustCompile(`(?i)^(?:to bed|home|now|out|back|there|to sleep)`)

// personRule reads the predicate of a statement about a person.
type personRule struct {
	re *regexp.Regexp
	fn func(subj string, m []string, pred string, d dateInfo) (analysis, bool)
}

func rule(expr string, fn func(subj string, m []string, pred string, d dateInfo) (analysis, bool)) personRule {
	return personRule{re: regexp.MustCompile(`(?i)^` + expr + `$`), fn: fn}
}

var (
	speciesRE = alternation(func() map[string]bool {
		m := map[string]bool{}
		for w := range species {
			m[w] = true
		}
		return m
	}())
	familyRE = alternation(func() map[string]bool {
		m := map[string]bool{}
		for w := range family {
			m[regexp.QuoteMeta(w)] = true
		}
		return m
	}())
	professionRE = alternation(professions)
	countWord    = `(?:an?|one|two|three|four|five|\d+|some|a pet|a new|a little|a baby|my own|this|the|our|my)`
	nameWord     = `([\p{L}][\p{L}'-]*(?:\s+(?:and|&)\s+[\p{L}][\p{L}'-]*)?)`
)

// personRules are tried in order; the first that matches and accepts the
// statement decides.
var personRules = []personRule{
	rule(`(?:moved|have moved|relocated|have relocated)(?: back)?(?: from (.+?))? to (.+?)(?: and (?:now )?lives? there)?`, func(subj string, m []string, pred string, d dateInfo) (analysis, bool) {
		place, from := cutPlace(m[2]), cutPlace(m[1])
		if place == "" {
			return analysis{}, false
		}
		a := analysis{kind: Personal, claims: []claim{{subj: subj, rel: relHome, value: normValue(place), raw: place, moved: true}}}
		if group(m, 2) == place {
			a.text = func(d dateInfo) string {
				s := "moved "
				if from != "" {
					s += "from " + from + " "
				}
				s += "to " + place
				if d.orig != "" {
					s += " " + d.phrase()
				}
				return s + " and lives there"
			}
		}
		return a, true
	}),
	rule(`(?:live|be living|have lived|have been living|reside|be residing|be based|be settled|make (?:their|my|his|her) home) in (.+)`, func(subj string, m []string, _ string, _ dateInfo) (analysis, bool) {
		place := cutPlace(m[1])
		return one(Personal, claim{subj: subj, rel: relHome, value: normValue(place), raw: place})
	}),
	rule(`(?:be|have been) (doing|learning|taking|practicing|practising|playing|training|volunteering|reading|writing|painting|teaching|coaching|building|making|working on|growing|collecting|knitting|baking|cooking|running|researching|developing|organizing|organising|saving|preparing) (.+)`, func(subj string, m []string, pred string, _ dateInfo) (analysis, bool) {
		rest := group(m, 2)
		if pronounObjects[strings.ToLower(firstWord(rest))] || transientPlan.MatchString(rest) {
			return analysis{}, false
		}
		return one(Personal, claim{subj: subj, rel: relOther, key: normValue(m[1] + " " + rest), raw: rest})
	}),
	rule(`(?:be|come) (?:originally )?from (.+)|(?:grew up|was raised|was born and raised) in (.+)`, func(subj string, m []string, _ string, _ dateInfo) (analysis, bool) {
		place := cutPlace(m[1] + m[2])
		return one(Personal, claim{subj: subj, rel: relOrigin, value: normValue(place), raw: place})
	}),
	rule(`(?:was born|celebrate (?:their|her|his|my) birthday)(?: (?:on|in))? (.+)`, func(subj string, m []string, _ string, d dateInfo) (analysis, bool) {
		switch {
		case strings.Contains(m[1], marker) && d.w.prec == byDay:
			a, _ := one(Personal, claim{subj: subj, rel: relBirthday, value: d.w.t.Format("01-02"), raw: d.orig})
			a.undated = true
			return a, true
		case strings.Contains(m[1], marker) && d.w.prec == byYear:
			return one(Personal, claim{subj: subj, rel: relBirthday, key: "year", value: d.w.field(), raw: d.orig})
		case strings.Contains(m[1], marker):
			return analysis{}, false
		}
		place := cutPlace(m[1])
		return one(Personal, claim{subj: subj, rel: relOrigin, value: normValue(place), raw: place})
	}),
	rule(`(?:work|be working|have worked|have been working) as (.+)`, func(subj string, m []string, _ string, _ dateInfo) (analysis, bool) {
		return work(subj, m[1], m[1])
	}),
	rule(`(?:work|be working|have worked|have been working|be employed) (?:at|for|in|by) (.+)`, func(subj string, m []string, _ string, _ dateInfo) (analysis, bool) {
		place := cutPlace(m[1])
		return one(Personal, claim{subj: subj, rel: relWorkplace, value: normValue(place), raw: place})
	}),
	rule(`(?:study|be studying|have studied|be majoring in|major in|be learning|learn) (.+)`, func(subj string, m []string, _ string, _ dateInfo) (analysis, bool) {
		what := cutRole(m[1])
		return one(Personal, claim{subj: subj, rel: relStudy, value: normValue(what), raw: what})
	}),
	rule(`be an? ((?:[\w-]+ ){0,2}?)student(?:s)?(?: (?:at|of|in) (.+))?`, func(subj string, m []string, _ string, _ dateInfo) (analysis, bool) {
		what := cutPlace(m[2])
		if what == "" {
			what = strings.TrimSpace(m[1] + "student")
		}
		return one(Personal, claim{subj: subj, rel: relStudy, value: normValue(what), raw: what})
	}),
	rule(`(?:have|have got|own|keep|adopted|have adopted|got|bought|rescued|have rescued|have a pet) `+countWord+`\s+((?:[\w-]+ ){0,2}?)(`+speciesRE+`)(?:e?s)?\b,?(?:\s+(?:called|named)\s+`+nameWord+`)?(.*)`, func(subj string, m []string, _ string, _ dateInfo) (analysis, bool) {
		return one(Personal, claim{subj: subj, rel: relPet, key: speciesOf(strings.ToLower(m[2])), value: strings.ToLower(m[3]), raw: m[3]})
	}),
	rule(`(?:have|have got) `+countWord+`\s+((?:older|younger|little|big|twin|baby|elder|step|half)[ -])?(`+familyRE+`)(?:e?s)?\b,?(?:\s+(?:called|named)\s+`+nameWord+`)?(.*)`, func(subj string, m []string, _ string, _ dateInfo) (analysis, bool) {
		return one(Personal, claim{subj: subj, rel: relFamily, key: familyOf(strings.ToLower(m[2])), value: strings.ToLower(m[3]), raw: m[3]})
	}),
	rule(`(?:be (?:happily )?married|have been married)(?: to (.+?))?(?: for .+)?`, func(subj string, m []string, _ string, _ dateInfo) (analysis, bool) {
		if who := cutPlace(m[1]); who != "" {
			return one(Personal, claim{subj: subj, rel: relFamily, key: "spouse", value: strings.ToLower(who), raw: who})
		}
		return one(Personal, claim{subj: subj, rel: relStatus, value: "married", raw: "married"})
	}),
	rule(`teach (?:at|in) (.+)`, func(subj string, m []string, _ string, _ dateInfo) (analysis, bool) {
		return work(subj, "teacher", "at "+m[1])
	}),
	rule(`be (single|divorced|widowed|engaged|separated)\b(?: to (.+))?`, func(subj string, m []string, _ string, _ dateInfo) (analysis, bool) {
		return one(Personal, claim{subj: subj, rel: relStatus, value: normValue(m[1] + " " + cutPlace(m[2])), raw: m[1]})
	}),
	rule(`(?:be (\d{1,3})(?: years? old)?|turned (\d{1,3}))`, func(subj string, m []string, _ string, _ dateInfo) (analysis, bool) {
		return one(Personal, claim{subj: subj, rel: relAge, value: m[1] + m[2], raw: m[1] + m[2]})
	}),
	rule(`(?:be called|go by|be named) (.+)`, func(subj string, m []string, _ string, _ dateInfo) (analysis, bool) {
		name := cutPlace(m[1])
		return one(Personal, claim{subj: subj, rel: relName, value: normValue(name), raw: name})
	}),
	rule(`want to be called (.+)`, func(subj string, m []string, _ string, _ dateInfo) (analysis, bool) {
		return one(Personal, claim{subj: subj, rel: relNickname, value: normValue(m[1]), raw: m[1]})
	}),
	rule(`be allergic to (.+)`, func(subj string, m []string, _ string, _ dateInfo) (analysis, bool) {
		what := cutObject(m[1])
		return one(Personal, claim{subj: subj, rel: relAllergy, key: normValue(what), value: "+", raw: what})
	}),
	rule(`be (?:an? )?(vegetarian|vegan|pescatarian)`, func(subj string, m []string, _ string, _ dateInfo) (analysis, bool) {
		return one(Personal, claim{subj: subj, rel: relDiet, value: strings.ToLower(m[1]), raw: m[1]})
	}),
	rule(`(?:dislike|hate|detest|loathe|cannot stand|can not stand|not like|not enjoy|not care for|not drink|not eat|never drink|never eat|avoid|be not (?:a |much of a )?(?:big )?fan of|be not into|not really like) (.+)`, func(subj string, m []string, _ string, _ dateInfo) (analysis, bool) {
		return pref(subj, m[1], "-")
	}),
	rule(`(prefer|like|love|enjoy|adore|be fond of|be into|be (?:a )?(?:big |huge |real )?fan of|be passionate about|be obsessed with|be crazy about|be keen on|be a lover of|cannot get enough of|be addicted to|be in love with) (.+)`, func(subj string, m []string, _ string, _ dateInfo) (analysis, bool) {
		obj := m[2]
		if strings.EqualFold(m[1], "prefer") {
			obj = cutAt(obj, " to ")
		}
		return pref(subj, obj, "+")
	}),
	rule(`(?:will|be going to|plan to|be planning to|be planning on|intend to|be about to|hope to|be hoping to|want to|would like to|would love to|be thinking of|be thinking about|be looking forward to|be excited to|cannot wait to|be set to|be scheduled to|be due to) (.+)`, func(subj string, m []string, _ string, d dateInfo) (analysis, bool) {
		what := group(m, 1)
		if what == "" || d.orig == "" && transientPlan.MatchString(what) {
			return analysis{}, false
		}
		return one(Plan, claim{subj: subj, rel: relPlan, key: normValue(what), value: d.w.field(), raw: what})
	}),
	rule(`be (visiting|traveling|travelling|flying|heading|going|leaving|moving|starting|attending|having|getting|taking|running|hosting|throwing|celebrating|meeting|seeing|joining|playing|performing|competing) (.+)`, func(subj string, m []string, pred string, d dateInfo) (analysis, bool) {
		if d.orig == "" {
			return analysis{}, false
		}
		what := group(m, 1) + " " + group(m, 2)
		return one(Plan, claim{subj: subj, rel: relPlan, key: normValue(what), value: d.w.field(), raw: what})
	}),
	rule(`be (?:an? |the )?((?:[\w-]+ ){0,2}?)(`+professionRE+`)(?:s)?\b(.*)`, func(subj string, m []string, _ string, _ dateInfo) (analysis, bool) {
		return work(subj, m[1]+m[2], m[3])
	}),
	rule(`((?:have (?:just |recently )?)?)([a-z]+)\b(.*)`, func(subj string, m []string, pred string, d dateInfo) (analysis, bool) {
		verb := strings.ToLower(m[2])
		if !isPast(verb) || notEvents[verb] || pronounObjects[strings.ToLower(firstWord(group(m, 3)))] {
			return analysis{}, false
		}
		rest := group(m, 3)
		if d.orig == "" && !milestones[verb] && !milestones[verb+" "+firstWord(rest)] && len(strings.Fields(rest)) < 3 || rest == "" {
			return analysis{}, false
		}
		return one(Personal, claim{subj: subj, rel: relEvent, key: normValue(verb + " " + rest), value: d.w.field(), raw: rest})
	}),
	rule(`(`+alternation(genericVerbs)+`) (.+)`, func(subj string, m []string, pred string, _ dateInfo) (analysis, bool) {
		verb := strings.ToLower(m[1])
		rest := group(m, 2)
		objects := pronounObjects
		if likeVerbs[verb] {
			objects = vague
		}
		if verb == "go" && goNowhere.MatchString(rest) || verb == "need" || verb == "want" || objects[strings.ToLower(firstWord(rest))] {
			return analysis{}, false
		}
		kind := Personal
		if likeVerbs[verb] {
			kind = Preference
		}
		return one(kind, claim{subj: subj, rel: relOther, key: normValue(pred), raw: rest})
	}),
	rule(`have (?:an?|one|two|three|\d+|some|my own) (.+)|have been to (.+)`, func(subj string, m []string, pred string, _ dateInfo) (analysis, bool) {
		if transientHave[strings.ToLower(firstWord(cutRole(m[1])))] {
			return analysis{}, false
		}
		return one(Personal, claim{subj: subj, rel: relOther, key: normValue(pred), raw: pred})
	}),
	rule(`be (.+)`, func(subj string, m []string, pred string, _ dateInfo) (analysis, bool) {
		obj := group(m, 1)
		first := strings.ToLower(firstWord(obj))
		if obj == "" || transient[first] || transient[strings.ToLower(obj)] || strings.HasSuffix(first, "ing") && len(strings.Fields(obj)) < 4 || first == "in" || first == "at" || first == "on" || first == "the" || first == "not" || first == "so" || first == "too" || first == "going" || strings.Contains(strings.ToLower(obj), " of it") {
			return analysis{}, false
		}
		if capitalised(obj) && !nationalities[first] && len(strings.Fields(obj)) <= 2 && !strings.ContainsAny(obj, ",") {
			return one(Personal, claim{subj: subj, rel: relName, value: normValue(obj), raw: obj})
		}
		return one(Personal, claim{subj: subj, rel: relOther, key: normValue(pred), raw: obj})
	}),
}

func firstWord(s string) string {
	if f := strings.Fields(s); len(f) > 0 {
		return f[0]
	}
	return ""
}

// pref returns the claim of a like ("+") or dislike ("-").
func pref(subj, obj, polarity string) (analysis, bool) {
	what := cutObject(obj)
	if normValue(what) == "" || vague[strings.ToLower(firstWord(what))] {
		return analysis{}, false
	}
	return one(Preference, claim{subj: subj, rel: relPref, key: normValue(what), value: polarity, raw: what})
}

// analyse applies the rules to a statement about subj (a subject key), or
// about subj's poss (a noun after "my" or "Ann's"), with the neutral
// predicate pred.
func analyse(subj, poss, pred string, d dateInfo) analysis {
	if poss != "" {
		return analysePossessive(subj, poss, pred, d)
	}
	for _, r := range personRules {
		if m := r.re.FindStringSubmatch(pred); m != nil {
			if a, ok := r.fn(subj, m, pred, d); ok {
				return a
			}
		}
	}
	return analysis{skip: true}
}

var (
	beValueRE  = regexp.MustCompile(`(?i)^be (?:located |based )?(?:in |on )?(.+)$`)
	beNamedRE  = regexp.MustCompile(`(?i)^be (?:called |named )?([\p{L}][\p{L}'-]*(?: [\p{Lu}][\p{L}'-]*)?)$`)
	beCalledRE = regexp.MustCompile(`(?i)^be (?:called|named) (.+)$`)
)

// analysePossessive reads "my sister lives in Kobe", "Ann's dog is called
// Pochi", "my favourite food is curry".
func analysePossessive(subj, poss, pred string, d dateInfo) analysis {
	toks := strings.Fields(strings.ToLower(poss))
	pn := strings.Join(toks, " ")
	head := strings.TrimSuffix(toks[len(toks)-1], "'s")
	if len(toks) > 1 && head != "name" && strings.HasSuffix(toks[len(toks)-2], "'s") {
		// "my mother's birthday" is the mother's.
		owner := strings.TrimSuffix(toks[len(toks)-2], "'s")
		who := speciesOf(owner)
		if who == "" {
			who = familyOf(owner)
		}
		if who != "" {
			return analysePossessive(subj+"/"+who, toks[len(toks)-1], pred, d)
		}
	}
	value := func() (string, bool) {
		if m := beValueRE.FindStringSubmatch(pred); m != nil {
			return group(m, 1), true
		}
		return "", false
	}
	switch {
	case pn == "name" || pn == "full name" || pn == "first name":
		if v, ok := value(); ok {
			return analysis{kind: Personal, claims: []claim{{subj: subj, rel: relName, value: normValue(v), raw: v}}}
		}
	case pn == "nickname":
		if v, ok := value(); ok {
			return analysis{kind: Personal, claims: []claim{{subj: subj, rel: relNickname, value: normValue(v), raw: v}}}
		}
	case pn == "job" || pn == "work" || pn == "occupation" || pn == "profession" || pn == "career" || pn == "day job":
		if v, ok := value(); ok {
			if a, ok := work(subj, v, v); ok {
				return a
			}
		}
	case pn == "home" || pn == "house" || pn == "apartment" || pn == "flat" || pn == "address":
		if v, ok := value(); ok {
			place := cutPlace(v)
			return analysis{kind: Personal, claims: []claim{{subj: subj, rel: relHome, value: normValue(place), raw: place}}}
		}
	case pn == "hometown":
		if v, ok := value(); ok {
			place := cutPlace(v)
			return analysis{kind: Personal, claims: []claim{{subj: subj, rel: relOrigin, value: normValue(place), raw: place}}}
		}
	case pn == "birthday":
		if d.w.prec == byDay {
			a := analysis{kind: Personal, undated: true, claims: []claim{{subj: subj, rel: relBirthday, value: d.w.t.Format("01-02"), raw: d.orig}}}
			a.text = func(d dateInfo) string {
				if yearRE.MatchString(d.orig) {
					return "is " + d.w.english()
				}
				return "is on " + d.w.t.Format("2 January")
			}
			return a
		}
	case pn == "age":
		if v, ok := value(); ok {
			return analysis{kind: Personal, claims: []claim{{subj: subj, rel: relAge, value: normValue(v), raw: v}}}
		}
	case toks[0] == "favourite" || toks[0] == "favorite":
		if v, ok := value(); ok && !vague[strings.ToLower(firstWord(v))] {
			obj := cutObject(v)
			return analysis{kind: Preference, claims: []claim{
				{subj: subj, rel: relFavourite, key: normValue(strings.Join(toks[1:], " ")), value: normValue(obj), raw: obj},
				{subj: subj, rel: relPref, key: normValue(obj), value: "+", raw: obj},
			}}
		}
	case pn == "hobby" || pn == "hobbies":
		if v, ok := value(); ok {
			if a, ok := pref(subj, v, "+"); ok {
				return a
			}
		}
	case pn == "school" || pn == "university" || pn == "college" || pn == "major":
		if v, ok := value(); ok {
			what := cutPlace(v)
			return analysis{kind: Personal, claims: []claim{{subj: subj, rel: relStudy, value: normValue(what), raw: what}}}
		}
	case pn == "company" || pn == "employer":
		if v, ok := value(); ok {
			place := cutPlace(v)
			return analysis{kind: Personal, claims: []claim{{subj: subj, rel: relWorkplace, value: normValue(place), raw: place}}}
		}
	case head == "name" && len(toks) > 1:
		owner := strings.TrimSuffix(toks[len(toks)-2], "'s")
		if v, ok := value(); ok {
			return named1(subj, owner, v)
		}
	case speciesOf(head) != "" || familyOf(head) != "":
		if m := beCalledRE.FindStringSubmatch(pred); m != nil {
			return named1(subj, head, cutPlace(m[1]))
		}
		if m := beNamedRE.FindStringSubmatch(pred); m != nil && capitalised(m[1]) {
			return named1(subj, head, m[1])
		}
		// What is said of the pet or the relative ("my sister lives in
		// Kobe") is a claim about them.
		who := speciesOf(head)
		if who == "" {
			who = familyOf(head)
		}
		a := analyse(subj+"/"+who, "", pred, d)
		a.text = nil
		return a
	}
	return analysis{skip: true}
}

var yearRE = regexp.MustCompile(`\b\d{4}\b`)

// named1 returns the claim that a pet or a relative has a name.
func named1(subj, noun, name string) analysis {
	if s := speciesOf(noun); s != "" {
		return analysis{kind: Personal, claims: []claim{{subj: subj, rel: relPet, key: s, value: strings.ToLower(name), raw: name}}}
	}
	return analysis{kind: Personal, claims: []claim{{subj: subj, rel: relFamily, key: familyOf(noun), value: strings.ToLower(name), raw: name}}}
}
