package facts

import (
	"regexp"
	"strings"

	unorm "golang.org/x/text/unicode/norm"
)

// Profiles: FillProfile finds, in what a speaker says, the values of the
// fields of a structured profile that the usual ways of stating them
// give, in English. A field is known by its name (words joined by '_',
// '-' or case: preferred_language, favoriteColor), its type and its enum.
// What it catches, in a sentence that is not a question:
//
//   - "my <field> is <value>" (or "<field>: <value>"), the field named by
//     its words, with prefer/preferred/preference, favourite/favorite and
//     colour/color taken for the same word: "my preferred language is
//     Python", "my favourite colour is green", "my name is Ann";
//   - for a string field with an enum, an enum value said with a wish
//     (prefer, like, want, please, rather, keep, make, be): "I prefer
//     succinct answers" gives tone = succinct;
//   - for a field whose name says "language", a known language (natural
//     or programming) said with a wish or a use: "I prefer Python", "I
//     mostly code in Go", "please answer in Japanese";
//   - age ("I am 34", "I'm 34 years old") for an integer or number field
//     named age; the name to call someone ("call me Kim") for a field
//     named name, nickname or preferred_name; home ("I live in Osaka")
//     for city, location, home or residence; origin ("I'm from Sapporo",
//     "I grew up in Sapporo") for hometown or origin; work ("I work as a
//     nurse") for occupation, job, role or profession;
//   - a boolean field named is_X or X: "I am (a) X" gives true, "I am not
//     (a) X" false ("I'm vegetarian" for is_vegetarian).
//
// It misses every other way of saying these, and every other language.

// ProfileField describes a profile field to FillProfile.
type ProfileField struct {
	// Key is the caller's id of the field, given back with its value.
	Key string
	// Name is the field's name.
	Name string
	// Type is string, number, integer or boolean.
	Type string
	// Enum lists the values of a string field that has one.
	Enum []string
}

// ProfileValue is a value FillProfile found for a field.
type ProfileValue struct {
	Key string
	// Value is the value as text: as said (an enum's or a language's own
	// spelling), digits for numbers, true or false for booleans.
	Value string
}

// maxProfileValue bounds the values taken from "my <field> is <value>".
const maxProfileValue = 100

var (
	// possessiveField is "my <words> is <value>" or "<words>: <value>".
	possessiveField = regexp.MustCompile(`(?i)^(?:(?:well|so|also|oh|and|btw|by the way),?\s+)?(?:my\s+(.{1,60}?)\s+(?:is|are|would be|=)\s+(.+)|(.{1,60}?)\s*[:=]\s*(.+))$`)
	// valueEnd cuts a value at what goes on after it.
	valueEnd = regexp.MustCompile(`(?i)\s*(?:,|;|\s+and\s+|\s+but\s+|\s+because\s+|\s+so\s+|\s+though\b|\s+by the way\b|\s+please\b).*$`)
	wish     = regexp.MustCompile(`(?i)\b(?:prefer|preferred|like|love|want|wanna|please|rather|keep|make|be|use|uses|using|code|coding|write|writing|speak|answer|reply|respond|talk)\b`)
	ageRE    = regexp.MustCompile(`(?i)\bi(?:'m|’m| am)\s+(\d{1,3})(?:\s+years?\s+old)?\b`)
	callMe   = regexp.MustCompile(`(?i)\bcall me\s+([\p{L}][\p{L}'-]*)`)
	liveIn   = regexp.MustCompile(`(?i)\bi(?:\s+now)?\s+(?:live|am living|'m living|’m living|reside|am based|'m based)\s+in\s+(.+)`)
	fromRE   = regexp.MustCompile(`(?i)\b(?:i(?:'m|’m| am)\s+(?:originally\s+)?from|i\s+grew\s+up\s+in|i\s+was\s+born\s+in)\s+(.+)`)
	workAs   = regexp.MustCompile(`(?i)\bi(?:\s+now)?\s+(?:work|am working|'m working)\s+as\s+(?:an?\s+)?(.+)`)
	iAm      = regexp.MustCompile(`(?i)\bi(?:'m|’m| am)\s+(not\s+)?(?:an?\s+)?([\p{L}-]+)`)
	wordSep  = regexp.MustCompile(`[_\-\s]+|([a-z])([A-Z])`)
	// leadingNumber is the number a value starts with.
	leadingNumber = regexp.MustCompile(`^-?\d+(?:\.\d+)?`)
)

// synonyms map words of field names and phrases to one spelling.
var synonyms = map[string]string{
	"preferred": "prefer", "preference": "prefer", "preferences": "prefer", "favourite": "favorite", "fav": "favorite",
	"colour": "color", "languages": "language",
}

// nameWords returns the words of a field name or phrase, lower-case, in
// one spelling.
func nameWords(s string) []string {
	s = wordSep.ReplaceAllString(s, "$1 $2")
	var out []string
	for _, w := range strings.Fields(strings.ToLower(s)) {
		if v, ok := synonyms[w]; ok {
			w = v
		}
		if w == "user" || w == "users" || w == "the" {
			continue
		}
		out = append(out, w)
	}
	return out
}

func sameWords(a, b []string) bool {
	if len(a) != len(b) || len(a) == 0 {
		return false
	}
	for _, w := range a {
		found := false
		for _, x := range b {
			if w == x {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// languages are the languages, natural and programming, a "language"
// field recognises, in their own spelling.
var languages = func() map[string]string {
	m := map[string]string{}
	for _, l := range strings.Fields(`English Japanese French German Spanish Italian Portuguese Chinese Mandarin Cantonese
Korean Russian Arabic Hindi Dutch Swedish Norwegian Danish Finnish Polish Turkish Greek Hebrew Thai Vietnamese
Indonesian Malay Ukrainian Czech Hungarian Romanian Catalan Tagalog Bengali Urdu Persian Swahili
Python Go Golang Rust Java JavaScript TypeScript Kotlin Swift Ruby PHP Scala Haskell Elixir Erlang Clojure Lua
Perl Julia Dart Zig OCaml Fortran COBOL C C++ C# F# R SQL Bash`) {
		m[strings.ToLower(l)] = l
	}
	return m
}()

// ambiguous are languages whose names are also common words: they count
// only as spelled ("Go", not "go").
var ambiguous = wordSet(`go c r swift rust dart julia ruby lua perl zig`)

// languageIn returns the first known language among the words of s.
func languageIn(s string) string {
	for _, w := range strings.FieldsFunc(s, func(r rune) bool {
		return r == ' ' || r == ',' || r == '.' || r == '!' || r == '(' || r == ')' || r == '"' || r == '\''
	}) {
		lw := strings.ToLower(w)
		if l, ok := languages[lw]; ok && (!ambiguous[lw] || w == l) {
			return l
		}
	}
	return ""
}

// FillProfile returns the values of fields that text, said by the
// speaker, states (see the rules above), in the order of fields; a field
// stated twice takes its last value.
func FillProfile(text string, fields []ProfileField) []ProfileValue {
	text = unorm.NFKC.String(text)
	found := map[string]string{}
	for _, s := range sentences(text) {
		if s.question || len(s.text) > 4*maxClause {
			continue
		}
		for i := range fields {
			if v := fieldValue(s.text, &fields[i]); v != "" {
				found[fields[i].Key] = v
			}
		}
	}
	var out []ProfileValue
	for _, f := range fields {
		if v, ok := found[f.Key]; ok {
			out = append(out, ProfileValue{Key: f.Key, Value: v})
		}
	}
	return out
}

// fieldValue returns the value a sentence states for a field, or "".
func fieldValue(s string, f *ProfileField) string {
	words := nameWords(f.Name)
	if m := possessiveField.FindStringSubmatch(s); m != nil {
		phrase, value := m[1], m[2]
		if phrase == "" {
			phrase, value = m[3], m[4]
		}
		if sameWords(nameWords(phrase), words) {
			if v := fitValue(f, cutValue(value)); v != "" {
				return v
			}
		}
	}
	has := func(ws ...string) bool {
		for _, w := range words {
			for _, x := range ws {
				if w == x {
					return true
				}
			}
		}
		return false
	}
	switch f.Type {
	case "string":
		if len(f.Enum) > 0 {
			if !wish.MatchString(s) {
				return ""
			}
			lower := " " + strings.ToLower(s) + " "
			for _, e := range f.Enum {
				if containsWord(lower, strings.ToLower(e)) {
					return e
				}
			}
			return ""
		}
		switch {
		case has("language"):
			if wish.MatchString(s) || strings.Contains(strings.ToLower(s), " in ") {
				return languageIn(s)
			}
		case has("name", "nickname") && len(words) <= 2:
			if m := callMe.FindStringSubmatch(s); m != nil {
				return m[1]
			}
		case has("city", "location", "home", "residence"):
			if m := liveIn.FindStringSubmatch(s); m != nil {
				return fitValue(f, cutValue(cutPlace(m[1])))
			}
		case has("hometown", "origin", "birthplace"):
			if m := fromRE.FindStringSubmatch(s); m != nil {
				return fitValue(f, cutValue(cutPlace(m[1])))
			}
		case has("occupation", "job", "role", "profession"):
			if m := workAs.FindStringSubmatch(s); m != nil {
				return fitValue(f, cutValue(cutRole(m[1])))
			}
		}
	case "integer", "number":
		if sameWords(words, []string{"age"}) {
			if m := ageRE.FindStringSubmatch(s); m != nil {
				return m[1]
			}
		}
	case "boolean":
		w := words
		if len(w) > 1 && w[0] == "is" {
			w = w[1:]
		}
		if len(w) != 1 {
			return ""
		}
		if m := iAm.FindStringSubmatch(s); m != nil && strings.EqualFold(m[2], w[0]) {
			if strings.TrimSpace(m[1]) != "" {
				return "false"
			}
			return "true"
		}
	}
	return ""
}

// cutValue trims a value at what follows it and at its final punctuation.
func cutValue(v string) string {
	v = valueEnd.ReplaceAllString(v, "")
	v = strings.TrimRight(strings.TrimSpace(v), ".!,;:")
	v = strings.Trim(v, `"'“”‘’`)
	if len(v) > maxProfileValue {
		return ""
	}
	return v
}

// fitValue returns v as the field takes it: an enum's value, digits for a
// number, true or false; "" when it does not fit.
func fitValue(f *ProfileField, v string) string {
	if v == "" {
		return ""
	}
	switch f.Type {
	case "string":
		if len(f.Enum) == 0 {
			if l := languageIn(v); l != "" && strings.EqualFold(l, v) {
				return l
			}
			return v
		}
		for _, e := range f.Enum {
			if strings.EqualFold(e, v) {
				return e
			}
		}
		lower := " " + strings.ToLower(v) + " "
		for _, e := range f.Enum {
			if containsWord(lower, strings.ToLower(e)) {
				return e
			}
		}
	case "integer", "number":
		if m := leadingNumber.FindString(v); m != "" {
			return m
		}
	case "boolean":
		switch strings.ToLower(v) {
		case "yes", "true":
			return "true"
		case "no", "false":
			return "false"
		}
	}
	return ""
}

// containsWord reports whether padded (a lower-case text with a space at
// each end) holds w as a word.
func containsWord(padded, w string) bool {
	for i := 0; ; {
		j := strings.Index(padded[i:], w)
		if j < 0 {
			return false
		}
		start, end := i+j, i+j+len(w)
		if start > 0 && !isWordByte(padded[start-1]) && end < len(padded) && !isWordByte(padded[end]) {
			return true
		}
		i = start + 1
	}
}
