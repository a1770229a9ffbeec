package facts

import (
	"regexp"
	"strings"
)

// The user's name in facts. Facts name the user "The user" (ユーザー)
// until the user says their name; from then on the offline extractor
// writes it instead ("Ann has a dog named Pochi."), so that a question
// that names the person ("what pet does Ann have?") shares a word with
// every fact about them, for lexical scoring and the offline embedder
// alike. The fact that states the name keeps "The user" ("The user is
// Ann."): it is what ties the two together.

// UserName returns the name a fact gives the user ("The user is Ann.",
// "The user's name is Ann.", "ユーザーの名前はアンです。"), or "" when it
// gives none.
func UserName(fact string) string {
	for _, c := range parse(fact).claims {
		if c.subj == "user" && c.rel == relName && c.key == "" {
			return c.raw
		}
	}
	return ""
}

// Named returns the fact with the user, its subject, called by name: "The
// user has a dog." as "Ann has a dog.", "The user's sister ..." as "Ann's
// sister ...", "ユーザーは..." as "アンは...". A fact about someone else,
// or the one that states the user's name, is returned as it is, and so is
// every fact when name is "".
func Named(fact, name string) string {
	if name == "" || UserName(fact) != "" {
		return fact
	}
	if rest, ok := strings.CutPrefix(fact, "ユーザー"); ok && (strings.HasPrefix(rest, "は") || strings.HasPrefix(rest, "の")) {
		return name + rest
	}
	// Wherever a fact names the user: the subject of each of its
	// sentences, and elsewhere ("This necklace from the user's grandma").
	return userRE.ReplaceAllString(fact, name)
}

// userRE is the user named in an English fact.
var userRE = regexp.MustCompile(`\b(?:The|the) user\b`)
