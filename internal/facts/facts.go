// Package facts is the rule set of kioku's offline extractor (package
// model's OfflineExtractor): it finds what people say about themselves in
// English and Japanese and writes it as facts in the third person, and it
// compares facts to tell which say the same thing, which update another and
// which are new. FillProfile finds the values of structured profile fields
// in the same way (profile.go lists what it catches). No model and no network: regular expressions and small
// word lists, so it is deterministic and fast, and it misses most of what a
// language model would understand.
//
// What it catches, in a sentence whose subject is the speaker ("I", "my",
// 私, or no subject in Japanese):
//
//   - identity and names: "my name is Ann", "I'm Ann", "call me Annie", "I
//     am 34", 名前はアンです;
//   - where they live and come from: "I live in Osaka", "I moved to Kyoto
//     last month", "I'm from Sapporo", 大阪に住んでいます, 京都に引っ越しました;
//   - work and study: "I work as a nurse in Osaka", "I'm a teacher", "I
//     work at Acme", "I study French", 看護師として働いています;
//   - family and pets: "I have a dog called Pochi", "my sister lives in
//     Kobe", "I'm married", ポチという犬を飼っています, 妹がいます;
//   - likes and dislikes: "I love green tea", "I don't like coffee", "my
//     favourite food is curry", 猫が好きです, コーヒーが苦手です;
//   - plans and events with their dates: "I'm going to Hokkaido next
//     Saturday", "I adopted a puppy yesterday", 来週京都に行く予定です,
//     with relative dates resolved against when they were said, and past
//     events and ongoing activities told in enough words to stand alone,
//     dated or not ("I found a place with great natural light", "I'm
//     putting in a lot of work on my business");
//   - explicit requests: "remember that my mother's birthday is June 3",
//     覚えておいて;
//   - in English, any other statement of the speaker about themselves
//     that names enough things to stand alone, kept as said in the third
//     person (statements.go): "We went camping in the forest" as
//     "Melanie and others went camping in the forest.", "This necklace
//     from my grandma in Sweden is special to me" as "This necklace from
//     Melanie's grandma in Sweden is special to them.". A message's
//     statements that are no lasting fact (these, and the events, plans
//     and activities above) are one fact, its episode (mergeLoose);
//   - a message's asides: what else it says, of others, of things, a
//     photo's caption ("[shares a photo: ...]"), and what is said to the
//     listener when Speaker.To names them; told with the message's
//     episode, or returned by ExtractMessage for the caller to tell with
//     the speaker's episode before.
//
// What it misses: facts implied ("we walked Pochi" does not say there is
// a dog), what someone says about others unless it goes with something
// said of the speaker, what is said to an agent ("you"), sarcasm, hypotheticals and most
// negations, pronouns that point back ("she", "it": kept as said), and
// every language but English and Japanese. A
// language model (--model-provider gemini, vertex or openai) does far
// better; the offline extractor is what works with nothing configured.
package facts

import (
	"regexp"
	"strings"
	"time"
	"unicode"

	unorm "golang.org/x/text/unicode/norm"
)

// Speaker says whose words a text is: the user's (Name "") or those of a
// person named Name (a conversation between people stored with the
// speakers as authors). Facts name the user "The user" (ユーザー) and a
// person by name; Named puts the user's name in once it is known.
type Speaker struct {
	Name string
	// To is the listener's name, when the speaker talks to a person (a
	// conversation between two people): what is said to them ("your
	// advice") is written with it. "" when unknown or the agent, whom
	// "you" then names, and such statements are not kept.
	To string
}

// english returns the speaker as the subject of an English fact.
func (s Speaker) english() string {
	if s.Name == "" {
		return "The user"
	}
	return s.Name
}

// japanese returns the speaker as the subject of a Japanese fact.
func (s Speaker) japanese() string {
	if s.Name == "" {
		return "ユーザー"
	}
	return s.Name
}

// key returns the speaker as the subject of claims.
func (s Speaker) key() string {
	if s.Name == "" {
		return "user"
	}
	return strings.ToLower(s.Name)
}

// Kind is what a fact is about, which decides its memory topic.
type Kind int

// The kinds of facts.
const (
	// Personal is who someone is: names, home, work, family, pets, events
	// (the topic USER_PERSONAL_INFO).
	Personal Kind = iota
	// Preference is a like or dislike (USER_PREFERENCES).
	Preference
	// Plan is something planned (KEY_CONVERSATION_DETAILS).
	Plan
	// Instruction is what someone asked to be remembered
	// (EXPLICIT_INSTRUCTIONS).
	Instruction
)

// Fact is a statement found in a text, in the third person.
type Fact struct {
	// Text is the fact, one sentence ("The user has a dog called Pochi.").
	Text string
	Kind Kind
	// Date is when what it tells happens or happened, resolved against the
	// time the text was said: YYYY-MM-DD, YYYY-MM or YYYY; "" when it says
	// none or the time is unknown.
	Date string
	// Episode: the fact tells the message's statements that are no
	// lasting fact the rules read (see mergeLoose), one such a message.
	Episode bool
	// loose: what it says is no lasting fact the rules read (see
	// mergeLoose).
	loose bool
	// aside: a clause that says something but no statement of the
	// speaker's; told only with the message's loose facts.
	aside bool
}

// maxClause bounds the clauses read: a longer one is not a simple
// statement about oneself.
const maxClause = 240

// Extract returns the facts the speaker states about themselves in text,
// said at now (zero: unknown, and relative dates stay as they are).
// Questions are skipped. The same text always gives the same facts.
func Extract(text string, sp Speaker, now time.Time) []Fact {
	fs, _ := ExtractMessage(text, sp, now)
	return fs
}

// ExtractMessage is Extract, and also returns the message's asides when
// it has no episode to tell them with (what it says of others, of
// things, to the listener, the photo it shared: "It was a transgender
// poetry reading."), for the caller to tell with the speaker's episode of
// a message before ("" when there are none).
func ExtractMessage(text string, sp Speaker, now time.Time) (fs []Fact, asides string) {
	text = unorm.NFKC.String(text)
	var out []Fact
	seen := map[string]bool{}
	for _, s := range sentences(text) {
		if s.question || len(s.text) > 4*maxClause {
			continue
		}
		var facts []Fact
		if f, ok := sharedPhoto(s.text, sp); ok {
			facts = append(facts, f)
		} else if isJapanese(s.text) {
			facts = extractJapanese(s.text, sp, now)
		} else {
			for _, c := range clauses(s.text) {
				if len(c) <= maxClause {
					if f, ok := extractEnglish(c, sp, now); ok {
						facts = append(facts, f)
					} else if f, ok := aside(c, sp, now); ok {
						facts = append(facts, f)
					}
				}
			}
		}
		for _, f := range facts {
			if !seen[f.Text] {
				seen[f.Text] = true
				out = append(out, f)
			}
		}
	}
	return mergeLoose(out)
}

// mergeLoose returns the facts with the loose ones (what no rule reads as
// a lasting fact: things done, planned, said of oneself) told as one, in
// the place of the first: a message tells one episode of the speaker's
// life, and its statements are one memory ("Melanie took their kids to a
// pottery workshop on 5 May 2023. Melanie and others all made their own
// pots."). Facts the rules read (home, work, family, pets, likes, names,
// dates of birth) stay one each, for consolidation to compare and update.
// The message's asides (what it says of others, of the listener, of
// things) join the loose facts in their place, and are dropped when the
// message has none: they make its memory findable by more of what was
// said, and are no memory of their own.
func mergeLoose(fs []Fact) (out []Fact, asides string) {
	anchored := false
	for _, f := range fs {
		anchored = anchored || f.loose && !f.aside
	}
	li := -1
	for _, f := range fs {
		loose, aside := f.loose, f.aside
		f.loose, f.aside = false, false
		if aside && !anchored {
			asides = strings.TrimSpace(asides + " " + f.Text)
			continue
		}
		if !loose {
			out = append(out, f)
			continue
		}
		if li < 0 {
			li = len(out)
			f.Episode = true
			out = append(out, f)
			continue
		}
		out[li].Text += " " + f.Text
		if out[li].Date == "" {
			out[li].Date = f.Date
		}
	}
	return out, asides
}

type sentence struct {
	text     string
	question bool
}

// abbreviations end in a period that does not end a sentence.
var abbreviations = wordSet(`mr mrs ms dr st jr sr prof vs etc e.g i.e`)

// sentences cuts a text into sentences at . ! ? ; and line ends (and their
// Japanese forms), marking questions.
func sentences(text string) []sentence {
	var out []sentence
	var b strings.Builder
	flush := func(q bool) {
		if t := strings.TrimSpace(b.String()); t != "" {
			out = append(out, sentence{text: t, question: q})
		}
		b.Reset()
	}
	rs := []rune(text)
	for i, r := range rs {
		switch r {
		case '?', '？':
			flush(true)
		case '!', ';', '\n', '。', '！':
			flush(false)
		case '.':
			next := rune(' ')
			if i+1 < len(rs) {
				next = rs[i+1]
			}
			cur := b.String()
			word := strings.ToLower(cur[strings.LastIndexFunc(cur, func(r rune) bool { return !unicode.IsLetter(r) && r != '.' })+1:])
			if unicode.IsSpace(next) && !abbreviations[word] || i+1 == len(rs) {
				flush(false)
				continue
			}
			b.WriteRune(r)
		default:
			b.WriteRune(r)
		}
	}
	flush(false)
	return out
}

// clauseBreak is where a sentence goes on with another statement about
// the speaker ("..., and I ...", "... but my ...").
var clauseBreak = regexp.MustCompile(`(?i)(?:,\s*|\s+)(?:and|but|so|because|since|plus|while)\s+(?:(?:also|then|now|still)\s+)?(?:I\b|I'm|I’m|I've|my\b|it\b|that\b|this\b|they\b|she\b|he\b|we\b)|,\s+(?:I\b|I'm|my\b)|\s+[-–—]\s+`)

// clauses cuts an English sentence at its clause breaks.
func clauses(s string) []string {
	var out []string
	for {
		loc := clauseBreak.FindStringIndex(s)
		if loc == nil || loc[0] == 0 {
			break
		}
		// The break's conjunction stays with the next clause, which loses
		// it as a discourse word.
		out = append(out, strings.TrimSpace(s[:loc[0]]))
		s = strings.TrimLeft(s[loc[0]:], ", ")
	}
	return append(out, strings.TrimSpace(s))
}

// isJapanese reports whether a sentence has kana or Han characters.
func isJapanese(s string) bool {
	for _, r := range s {
		if unicode.In(r, unicode.Hiragana, unicode.Katakana, unicode.Han) {
			return true
		}
	}
	return false
}
