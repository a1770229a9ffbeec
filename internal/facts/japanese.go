package facts

import (
	"regexp"
	"strings"
	"time"
)

// Japanese statements are read like English ones (english.go) with
// patterns of their own: the speaker is 私 (or 僕, 俺, ...) or unsaid, the
// predicate keeps the speaker's words, and a fact is written
// "ユーザーは" + the predicate (or the speaker's name).

// jaSpecies are the Japanese names of pets, with their English species.
var jaSpecies = map[string]string{
	"犬": "dog", "子犬": "dog", "いぬ": "dog", "イヌ": "dog", "猫": "cat", "子猫": "cat", "ねこ": "cat", "ネコ": "cat",
	"うさぎ": "rabbit", "ウサギ": "rabbit", "兎": "rabbit", "ハムスター": "hamster", "鳥": "bird", "インコ": "bird",
	"金魚": "fish", "魚": "fish", "亀": "turtle", "カメ": "turtle", "フェレット": "ferret",
}

// jaFamily are the Japanese names of family members, with their English
// ones.
var jaFamily = map[string]string{
	"父": "father", "お父さん": "father", "母": "mother", "お母さん": "mother", "兄": "brother", "お兄さん": "brother",
	"弟": "brother", "姉": "sister", "お姉さん": "sister", "妹": "sister", "夫": "spouse", "旦那": "spouse",
	"妻": "spouse", "嫁": "spouse", "息子": "son", "娘": "daughter", "祖父": "grandfather", "祖母": "grandmother",
	"おじいちゃん": "grandfather", "おばあちゃん": "grandmother", "子供": "child", "子ども": "child", "彼氏": "boyfriend",
}

// jaProfessions are Japanese job titles.
var jaProfessions = wordSet(`看護師 医者 医師 歯科医 薬剤師 教師 先生 教員 保育士 介護士 エンジニア 会社員 公務員 デザイナー
プログラマー 弁護士 主婦 主夫 店員 料理人 シェフ 美容師 研究者 作家 画家 歌手 俳優 農家 警察官 消防士 会計士 営業
パティシエ 花屋 獣医 通訳 翻訳家 記者 編集者 写真家 音楽家 大工 運転手 パイロット 銀行員 販売員 事務員`)

func keys[V any](m map[string]V) map[string]bool {
	out := map[string]bool{}
	for k := range m {
		out[k] = true
	}
	return out
}

var (
	jaSpeciesRE    = alternation(keys(jaSpecies))
	jaFamilyRE     = alternation(keys(jaFamily))
	jaProfessionRE = alternation(jaProfessions)
	// jaMe is the speaker; jaMeSubject the speaker as the subject.
	jaMe          = `(?:私|わたし|わたくし|僕|ぼく|俺|おれ|あたし|自分)`
	jaMeSubject   = regexp.MustCompile(`^` + jaMe + `(?:は|も|が|、)\s*`)
	jaMePossessor = regexp.MustCompile(`^` + jaMe + `の`)
	jaTail        = regexp.MustCompile(`(?:よね|よ|ね|な|わ|♪|〜|~|w|笑)+$`)
	jaQuestion    = regexp.MustCompile(`(?:ですか|ますか|でしょうか|のか|かな|だろうか)$`)
	jaRemember    = regexp.MustCompile(`^(.+?)(?:ということ|こと)?(?:を|って)?(?:覚えて|おぼえて)(?:おいて|おいてね|ください|いて|て|ね)*(?:ください|ね)?$`)
	jaFuture      = regexp.MustCompile(`予定|つもり|明日|明後日|来週|来月|来年|今度|週末`)
	jaPast        = regexp.MustCompile(`ました|した$|た$|先週|先月|去年|昨年|昨日|前`)
	jaWord        = `(.+?)`
)

// jaRule reads the predicate of a Japanese statement.
type jaRule struct {
	re *regexp.Regexp
	fn func(subj string, m []string, d dateInfo) (analysis, bool)
}

func jrule(expr string, fn func(subj string, m []string, d dateInfo) (analysis, bool)) jaRule {
	return jaRule{re: regexp.MustCompile(`^(?:` + expr + `)$`), fn: fn}
}

const (
	jaIru   = `(?:います|いる|る|おります|ます)`
	jaDesu  = `(?:です|だ|なんです|なんだ|でした|だった)?`
	jaCount = `(?:\d+(?:匹|人|頭|羽)|一匹|二匹|三匹|一人|二人|三人)?`
)

// jaRules are tried in order, as personRules are.
var jaRules = []jaRule{
	jrule(`(?:名前は)`+jaWord+`(?:です|だ|といいます|と言います|と申します)?|`+jaWord+`(?:といいます|と言います|と申します)`, func(subj string, m []string, _ dateInfo) (analysis, bool) {
		name := group(m, 1) + group(m, 2)
		return one(Personal, claim{subj: subj, rel: relName, value: normValue(name), raw: name})
	}),
	jrule(`(\d{1,3})歳(?:です|だ|になりました|になった)?`, func(subj string, m []string, _ dateInfo) (analysis, bool) {
		return one(Personal, claim{subj: subj, rel: relAge, value: m[1], raw: m[1]})
	}),
	jrule(`(?:`+jaWord+`から)?`+jaWord+`(?:に|へ)引っ越(?:しました|した|してきました|してきた|し、そこに住んでいる|しています)`, func(subj string, m []string, _ dateInfo) (analysis, bool) {
		from, place := group(m, 1), group(m, 2)
		a := analysis{kind: Personal, claims: []claim{{subj: subj, rel: relHome, value: normValue(place), raw: place, moved: true}}}
		a.text = func(d dateInfo) string {
			s := ""
			if d.orig != "" {
				s += d.jaPhrase() + "に"
			}
			if from != "" {
				s += from + "から"
			}
			return s + place + "に引っ越し、そこに住んでいる"
		}
		return a, true
	}),
	jrule(jaWord+`に住んで`+jaIru, func(subj string, m []string, _ dateInfo) (analysis, bool) {
		place := group(m, 1)
		return one(Personal, claim{subj: subj, rel: relHome, value: normValue(place), raw: place})
	}),
	jrule(jaWord+`(?:の)?出身`+jaDesu, func(subj string, m []string, _ dateInfo) (analysis, bool) {
		place := group(m, 1)
		return one(Personal, claim{subj: subj, rel: relOrigin, value: normValue(place), raw: place})
	}),
	jrule(jaWord+`として働いて`+jaIru, func(subj string, m []string, _ dateInfo) (analysis, bool) {
		return jaWork(subj, group(m, 1))
	}),
	jrule(`(?:`+jaWord+`で)?(`+jaProfessionRE+`)(?:を|として)?(?:して`+jaIru+`|働いて`+jaIru+`|です|だ)`, func(subj string, m []string, _ dateInfo) (analysis, bool) {
		return jaWork(subj, m[2], group(m, 1))
	}),
	jrule(`(?:仕事は)`+jaWord+jaDesu, func(subj string, m []string, _ dateInfo) (analysis, bool) {
		return jaWork(subj, group(m, 1))
	}),
	jrule(jaWord+`(?:で働いて|に勤めて|に勤務して)`+jaIru, func(subj string, m []string, _ dateInfo) (analysis, bool) {
		place := group(m, 1)
		return one(Personal, claim{subj: subj, rel: relWorkplace, value: normValue(place), raw: place})
	}),
	jrule(jaWord+`(?:を勉強して|を学んで|を専攻して)`+jaIru+`|`+jaWord+`の学生`+jaDesu, func(subj string, m []string, _ dateInfo) (analysis, bool) {
		what := group(m, 1) + group(m, 2)
		return one(Personal, claim{subj: subj, rel: relStudy, value: normValue(what), raw: what})
	}),
	jrule(jaWord+`という(?:名前の)?(`+jaSpeciesRE+`)(?:を`+jaCount+`飼って`+jaIru+`|が`+jaIru+`)`, func(subj string, m []string, _ dateInfo) (analysis, bool) {
		return one(Personal, claim{subj: subj, rel: relPet, key: jaSpecies[m[2]], value: strings.ToLower(group(m, 1)), raw: group(m, 1)})
	}),
	jrule(`(`+jaSpeciesRE+`)の`+jaWord+`を飼って`+jaIru, func(subj string, m []string, _ dateInfo) (analysis, bool) {
		return one(Personal, claim{subj: subj, rel: relPet, key: jaSpecies[m[1]], value: strings.ToLower(group(m, 2)), raw: group(m, 2)})
	}),
	jrule(`(`+jaSpeciesRE+`)(?:を|が)`+jaCount+`(?:飼って`+jaIru+`|います|いる)`, func(subj string, m []string, _ dateInfo) (analysis, bool) {
		return one(Personal, claim{subj: subj, rel: relPet, key: jaSpecies[m[1]]})
	}),
	jrule(`(?:に)?(`+jaFamilyRE+`)が`+jaCount+`(?:います|いる)`, func(subj string, m []string, _ dateInfo) (analysis, bool) {
		return one(Personal, claim{subj: subj, rel: relFamily, key: jaFamily[m[1]]})
	}),
	jrule(`(?:`+jaWord+`と)?結婚して`+jaIru, func(subj string, m []string, _ dateInfo) (analysis, bool) {
		who := group(m, 1)
		if who != "" {
			return one(Personal, claim{subj: subj, rel: relFamily, key: "spouse", value: strings.ToLower(who), raw: who})
		}
		return one(Personal, claim{subj: subj, rel: relStatus, value: "married", raw: "married"})
	}),
	jrule(jaWord+`(?:は|が)(?:あまり)?(?:好きじゃない|好きではない)(?:です|んです)?|`+jaWord+`(?:は|が)(?:嫌い|苦手|大嫌い)`+jaDesu, func(subj string, m []string, _ dateInfo) (analysis, bool) {
		return jaPref(subj, group(m, 1)+group(m, 2), "-")
	}),
	jrule(jaWord+`が(?:大|とても|すごく|本当に)?好き`+jaDesu, func(subj string, m []string, _ dateInfo) (analysis, bool) {
		return jaPref(subj, group(m, 1), "+")
	}),
	jrule(jaWord+`(?:予定|つもり)`+jaDesu, func(subj string, m []string, d dateInfo) (analysis, bool) {
		what := group(m, 1)
		return one(Plan, claim{subj: subj, rel: relPlan, key: normValue(what), value: d.w.field(), raw: what})
	}),
	jrule(jaWord+`(?:に|へ|で|を)(?:行きます|行く|来ます|来る|します|する|会います|会う|帰ります|帰る|出かけます|出かける)`, func(subj string, m []string, d dateInfo) (analysis, bool) {
		if d.orig == "" || d.w.prec != noDate && !d.future {
			return analysis{}, false
		}
		what := group(m, 1)
		return one(Plan, claim{subj: subj, rel: relPlan, key: normValue(what), value: d.w.field(), raw: what})
	}),
}

// jaWork returns the claims of a Japanese job, with its place.
func jaWork(subj, role string, place ...string) (analysis, bool) {
	a := analysis{kind: Personal, claims: []claim{{subj: subj, rel: relRole, value: normValue(role), raw: role}}}
	if len(place) > 0 && place[0] != "" {
		a.claims = append(a.claims, claim{subj: subj, rel: relWorkplace, value: normValue(place[0]), raw: place[0]})
	}
	return a, true
}

func jaPref(subj, what, polarity string) (analysis, bool) {
	what = jaMePossessor.ReplaceAllString(what, "")
	if normValue(what) == "" {
		return analysis{}, false
	}
	return one(Preference, claim{subj: subj, rel: relPref, key: normValue(what), value: polarity, raw: what})
}

// jaPhrase says the date in Japanese, or as written when unresolved.
func (d dateInfo) jaPhrase() string {
	if p := d.w.japanese(); p != "" {
		return p
	}
	return d.orig
}

// jaPossessive are the nouns of "私のXは" the rules read, with the
// statement they stand for.
var jaPossessive = regexp.MustCompile(`^(名前|仕事|誕生日|趣味|好きな[^は]{1,10}|` + jaFamilyRE + `|` + jaSpeciesRE + `)(?:は|が)(.+)$`)

// analyseJapanese applies the rules to a Japanese predicate about subj.
func analyseJapanese(subj, pred string, d dateInfo) analysis {
	if a, ok := analyseJapanesePossessive(subj, pred, d); ok {
		a.possessive = true
		return a
	}
	return applyJapanese(subj, pred, d)
}

// analyseJapanesePossessive reads a statement about something of the
// speaker's: 名前, 仕事, 誕生日, 趣味, 好きなX, a relative or a pet.
func analyseJapanesePossessive(subj, pred string, d dateInfo) (analysis, bool) {
	m := jaPossessive.FindStringSubmatch(pred)
	if m == nil {
		return analysis{}, false
	}
	noun, rest := m[1], strings.TrimSpace(m[2])
	value := strings.TrimSpace(jaCopula.ReplaceAllString(strings.ReplaceAll(rest, marker, ""), ""))
	switch {
	case noun == "名前" || noun == "仕事":
		if a := applyJapanese(subj, noun+"は"+rest, dateInfo{}); !a.skip {
			return a, true
		}
	case noun == "誕生日" && d.w.prec == byDay:
		return analysis{kind: Personal, undated: true, claims: []claim{{subj: subj, rel: relBirthday, value: d.w.t.Format("01-02"), raw: d.orig}}}, true
	case noun == "趣味":
		if a, ok := jaPref(subj, value, "+"); ok {
			return a, true
		}
	case strings.HasPrefix(noun, "好きな"):
		return analysis{kind: Preference, claims: []claim{
			{subj: subj, rel: relFavourite, key: normValue(strings.TrimPrefix(noun, "好きな")), value: normValue(value), raw: value},
			{subj: subj, rel: relPref, key: normValue(value), value: "+", raw: value},
		}}, true
	case jaFamily[noun] != "" || jaSpecies[noun] != "":
		// What is said of a relative or a pet ("妹は大阪に住んでいます"),
		// unless the noun belongs to the statement ("妹がいます").
		who := jaFamily[noun]
		if who == "" {
			who = jaSpecies[noun]
		}
		if a := applyJapanese(subj+"/"+who, rest, d); !a.skip {
			a.text = nil
			return a, true
		}
	}
	return analysis{}, false
}

// applyJapanese tries the rules on a predicate.
func applyJapanese(subj, pred string, d dateInfo) analysis {
	p := strings.TrimSpace(pred)
	for _, r := range jaRules {
		if m := r.re.FindStringSubmatch(p); m != nil {
			if a, ok := r.fn(subj, m, d); ok {
				return a
			}
		}
	}
	return analysis{skip: true}
}

// extractJapanese reads a Japanese sentence said by sp at now.
func extractJapanese(s string, sp Speaker, now time.Time) []Fact {
	s = jaTail.ReplaceAllString(strings.TrimSpace(s), "")
	s = strings.TrimRight(s, "、 ")
	if jaQuestion.MatchString(s) || s == "" {
		return nil
	}
	if m := jaRemember.FindStringSubmatch(s); m != nil {
		inner := strings.TrimSpace(m[1])
		if fs := extractJapanese(inner, sp, now); len(fs) > 0 {
			for i := range fs {
				fs[i].Kind = Instruction
			}
			return fs
		}
		return []Fact{{Text: sp.japanese() + "は「" + jaThird(inner, sp) + "」を覚えておくよう頼んだ。", Kind: Instruction}}
	}
	t := present
	switch {
	case jaFuture.MatchString(s):
		t = future
	case jaPast.MatchString(s):
		t = past
	}
	var d dateInfo
	if dm, ok := findJapaneseDate(s, now, t); ok {
		d.w, d.orig = dm.w, s[dm.start:dm.end]
		d.future = !now.IsZero() && d.w.prec != noDate && d.w.t.After(day(now).t)
		rest := strings.TrimLeft(s[dm.end:], "のにはは、 ")
		s = s[:dm.start] + marker + rest
	}
	// The subject: the speaker said or unsaid, or the speaker's relative
	// or pet ("私の妹は", "妹は").
	pred := strings.TrimPrefix(s, marker)
	pred = jaMeSubject.ReplaceAllString(pred, "")
	pred = jaMePossessor.ReplaceAllString(pred, "")
	pred = strings.TrimPrefix(pred, marker)
	a := analyseJapanese(sp.key(), pred, d)
	if a.skip {
		return nil
	}
	var text string
	if a.text != nil {
		text = a.text(d)
	} else {
		body := jaThird(pred, sp)
		if strings.Contains(body, marker) {
			body = strings.Replace(body, marker, d.jaPhrase(), 1)
		} else if d.orig != "" {
			body = d.jaPhrase() + "に" + body
		}
		text = body
	}
	subject := sp.japanese() + "は"
	if a.possessive {
		subject = sp.japanese() + "の"
	}
	return []Fact{{Text: tidy(subject + text + "。"), Kind: a.kind, Date: d.w.field()}}
}

// jaThird rewrites the speaker's words about themselves for the third
// person (私の → ユーザーの).
func jaThird(s string, sp Speaker) string {
	s = jaMyRE.ReplaceAllString(s, sp.japanese()+"の")
	return jaIRE.ReplaceAllString(s, sp.japanese()+"は")
}

var (
	jaMyRE   = regexp.MustCompile(jaMe + `の`)
	jaIRE    = regexp.MustCompile(jaMe + `(?:は|が)`)
	jaCopula = regexp.MustCompile(jaDesu + `$`)
)

// jaSubject is the subject of a Japanese fact ("ユーザーは", "アンの妹は").
var jaSubject = regexp.MustCompile(`^(ユーザー|[^はのが、。\s]{1,12}?)(?:には|は|の)`)

// parseJapanese returns the claims of a Japanese fact in the third person.
func parseJapanese(fact string) []claim {
	c := strings.TrimRight(strings.TrimSpace(fact), "。 ")
	var d dateInfo
	if dm, ok := findJapaneseDate(c, factReference, present); ok {
		d.w, d.orig = dm.w, c[dm.start:dm.end]
		rest := strings.TrimLeft(c[dm.end:], "のには、 ")
		c = c[:dm.start] + marker + rest
	}
	m := jaSubject.FindStringSubmatch(c)
	if m == nil {
		return nil
	}
	who := strings.ToLower(m[1])
	if who == "ユーザー" {
		who = "user"
	}
	pred := strings.TrimPrefix(c[len(m[0]):], marker)
	return analyseJapanese(who, pred, d).claims
}
