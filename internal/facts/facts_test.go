package facts

import (
	"strings"
	"testing"
	"time"
)

// said is when the statements of the tests are made: Friday 8 May 2026.
var said = time.Date(2026, 5, 8, 10, 0, 0, 0, time.UTC)

func texts(fs []Fact) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.Text)
	}
	return out
}

func TestExtractEnglish(t *testing.T) {
	for msg, want := range map[string][]string{
		// The offline demo's cases (they were its own rules).
		"I have a cat called Miso":              {"The user has a cat called Miso."},
		"I'm a nurse. I study French!":          {"The user is a nurse.", "The user studies French."},
		"My sister lives in Osaka; I go hiking": {"The user's sister lives in Osaka.", "The user goes hiking."},
		"I love my dog":                         {"The user loves their dog."},
		"Do you like tea? nice weather":         nil,
		"I love green tea. Do you?":             {"The user loves green tea."},
		"I have a dog called Pochi. I work as a nurse in Osaka. I live in Osaka.": {
			"The user has a dog called Pochi.", "The user works as a nurse in Osaka.", "The user lives in Osaka."},
		// Identity and names.
		"My name is Ann and I'm 34.": {"The user's name is Ann.", "The user is 34."},
		"Hi! I'm Ann.":               {"The user is Ann."},
		"call me Annie":              {"The user wants to be called Annie."},
		// Home, work, family, pets.
		"I moved to Kyoto last month.":              {"The user moved to Kyoto in April 2026 and lives there."},
		"I'm from Sapporo but I live in Tokyo now.": {"The user is from Sapporo.", "The user lives in Tokyo now."},
		"I'm a software engineer at Google.":        {"The user is a software engineer at Google."},
		"I'm married to Ken and we have two kids.":  {"The user is married to Ken."},
		"Pochi is my dog.":                          {"The user's dog is Pochi."},
		"Last week I adopted a puppy named Max.":    {"The user adopted a puppy named Max in the week of 27 April 2026."},
		// Likes and dislikes.
		"I don't like coffee.":        {"The user does not like coffee."},
		"My favourite food is curry.": {"The user's favourite food is curry."},
		// Plans and events with dates.
		"Oh, I'm going to Hokkaido next Saturday with my sister.":     {"The user is going to Hokkaido on 9 May 2026 with their sister."},
		"I went to a support group yesterday and it was so powerful.": {"The user went to a support group on 7 May 2026."},
		"Just yesterday I joined a nearby church.":                    {"The user joined a nearby church on 7 May 2026."},
		// Explicit requests.
		"Please remember that my mother's birthday is June 3.": {"The user's mother's birthday is on 3 June."},
		"Remind me to buy milk":                                {"The user asked to be reminded to buy milk."},
		// Not facts about the speaker.
		"I'm tired.":                            nil,
		"I have a question":                     nil,
		"I'm going to sleep":                    nil,
		"I wanted to tell you about my school.": nil,
		"Don't forget to prepare emotionally.":  nil,
		// What no rule reads is kept as said when it names enough.
		"I love how art lets us get emotions out": {"The user loves how art lets them get emotions out."},
		"She lives in Osaka.":                     nil,
	} {
		got := texts(Extract(msg, Speaker{}, said))
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("Extract(%q) = %q, want %q", msg, got, want)
		}
	}
}

// TestExtractStatements: what no rule reads but names enough things is
// kept as said, in the third person; what says too little, an opinion, or
// what the speaker would do is not.
func TestExtractStatements(t *testing.T) {
	for msg, want := range map[string][]string{
		"Last Fri I finally took my kids to a pottery workshop.":                          {"Melanie took their kids to a pottery workshop on 1 May 2026."},
		"We went camping in the forest with the kids two weekends ago.":                   {"Melanie and others went camping in the forest with the kids on 25 April 2026."},
		"Our dog loves running around the backyard.":                                      {"Melanie's dog loves running around the backyard."},
		"My friends, family and mentors are my rocks.":                                    {"Melanie's friends, family and mentors are their rocks."},
		"Researching adoption agencies for the family.":                                   {"Melanie is researching adoption agencies for the family."},
		"Just got some new running shoes.":                                                {"Melanie got some new running shoes."},
		"Caroline, after finishing my screenplay I got a rejection letter from a studio.": {"Melanie got a rejection letter from a studio."},
		"At the shelter we organised a charity dinner for the residents.":                 {"Melanie and others organised a charity dinner for the residents."},
		"This necklace from my grandma in Sweden is super special to me.":                 {"This necklace from Melanie's grandma in Sweden is super special to them."},
		"The rainbow flag mural reflects the courage of the trans community to me.":       {"The rainbow flag mural reflects the courage of the trans community to Melanie."},
		"That trip was fun for me.":                                                       nil,
		"I think that's a great idea for the kids.":                                       nil,
		"We should go hiking in the mountains sometime.":                                  nil,
		"Being ourselves is such a great feeling.":                                        nil,
		"Losing my job gave me the push to start my own studio.":                          {"Losing Melanie's job gave them the push to start their own studio."},
		"I'm so excited and happy!":                                                       nil,
		"I wouldn't change it for the world.":                                             nil,
	} {
		got := texts(Extract(msg, Speaker{Name: "Melanie"}, said))
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("Extract(%q) = %q, want %q", msg, got, want)
		}
	}
}

// TestExtractOneEpisode: a message's statements that no rule reads as a
// lasting fact are one memory; what the rules read stays apart.
func TestExtractOneEpisode(t *testing.T) {
	got := texts(Extract("Last Fri I finally took my kids to a pottery workshop. I love pottery! We all made our own pots, it was fun and therapeutic.", Speaker{Name: "Melanie"}, said))
	want := []string{
		"Melanie took their kids to a pottery workshop on 1 May 2026. Melanie and others all made their own pots, it was fun and therapeutic.",
		"Melanie loves pottery.",
	}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("got %q, want %q", got, want)
	}
}

// TestExtractAsides: what a message says besides the speaker's
// statements (of others, of things, to the listener) is told with those
// statements, and is no memory of its own.
func TestExtractAsides(t *testing.T) {
	msg := "I finally finished my first screenplay. It was a story about sisterhood and dreams. I took your advice on the ending!"
	for _, c := range []struct {
		sp   Speaker
		want []string
	}{
		{Speaker{Name: "Joanna", To: "Nate"}, []string{"Joanna finished their first screenplay. It was a story about sisterhood and dreams. Joanna took Nate's advice on the ending."}},
		// Without the listener's name, what is said to them is left out.
		{Speaker{Name: "Joanna"}, []string{"Joanna finished their first screenplay. It was a story about sisterhood and dreams."}},
	} {
		if got := texts(Extract(msg, c.sp, said)); strings.Join(got, "|") != strings.Join(c.want, "|") {
			t.Errorf("Extract(%q, %+v) = %q, want %q", msg, c.sp, got, c.want)
		}
	}
	// A message of asides alone, or of asides and facts the rules read,
	// makes no memory of them.
	for msg, want := range map[string][]string{
		"It was a transgender poetry reading where people shared their stories. Thankfully they enjoyed the Grand Canyon a lot!": nil,
		"I have a cat named Miso. Her fur is grey and very soft.":                                                                {"Joanna has a cat named Miso."},
		"You are doing great with your new studio, keep going.":                                                                  nil,
	} {
		if got := texts(Extract(msg, Speaker{Name: "Joanna", To: "Nate"}, said)); strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("Extract(%q) = %q, want %q", msg, got, want)
		}
	}
}

// TestExtractPhotoAndAsides: a photo's caption is an aside; a message of
// asides alone returns them for the caller to tell with an episode.
func TestExtractPhotoAndAsides(t *testing.T) {
	fs, asides := ExtractMessage("I made this bowl at the pottery workshop.\n[shares a photo: a photo of a blue bowl with a dog face]", Speaker{Name: "Melanie"}, said)
	if got := texts(fs); len(got) != 1 || got[0] != "Melanie made this bowl at the pottery workshop. Melanie shared a photo of a blue bowl with a dog face." || !fs[0].Episode || asides != "" {
		t.Errorf("facts %q (episode %v), asides %q", got, len(fs) > 0 && fs[0].Episode, asides)
	}
	fs, asides = ExtractMessage("It was a transgender poetry reading.\n[shares a photo: a photography of a sign]", Speaker{Name: "Caroline"}, said)
	if len(fs) != 0 || asides != "It was a transgender poetry reading. Caroline shared a photo of a sign." {
		t.Errorf("facts %q, asides %q", texts(fs), asides)
	}
}

func TestExtractKindsAndDates(t *testing.T) {
	for msg, want := range map[string]Fact{
		"I live in Osaka.":                           {Text: "The user lives in Osaka.", Kind: Personal},
		"I love green tea.":                          {Text: "The user loves green tea.", Kind: Preference},
		"I'm going to visit Kyoto tomorrow.":         {Text: "The user is going to visit Kyoto on 9 May 2026.", Kind: Plan, Date: "2026-05-09", Episode: true},
		"Please remember that I'm left-handed.":      {Text: "The user is left-handed.", Kind: Instruction, Episode: true},
		"My birthday is on 3 May.":                   {Text: "The user's birthday is on 3 May.", Kind: Personal},
		"I moved to Kyoto 2 years ago.":              {Text: "The user moved to Kyoto in 2024 and lives there.", Kind: Personal, Date: "2024"},
		"In 2019 I graduated from Osaka University.": {Text: "The user graduated from Osaka University in 2019.", Kind: Personal, Date: "2019", Episode: true},
	} {
		got := Extract(msg, Speaker{}, said)
		if len(got) != 1 || got[0] != want {
			t.Errorf("Extract(%q) = %+v, want %+v", msg, got, want)
		}
	}
	// Without the time it was said, a relative date stays as said.
	if got := Extract("I moved to Kyoto last month.", Speaker{}, time.Time{}); len(got) != 1 || got[0].Text != "The user moved to Kyoto last month and lives there." || got[0].Date != "" {
		t.Errorf("without a time: %+v", got)
	}
}

func TestExtractNamedSpeaker(t *testing.T) {
	got := texts(Extract("Yesterday I took my kids to the museum. I love painting!", Speaker{Name: "Melanie"}, said))
	want := []string{"Melanie took their kids to the museum on 7 May 2026.", "Melanie loves painting."}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestExtractJapanese(t *testing.T) {
	for msg, want := range map[string][]string{
		"ポチという犬を飼っています。大阪で看護師をしています。大阪に住んでいます。": {"ユーザーはポチという犬を飼っています。", "ユーザーは大阪で看護師をしています。", "ユーザーは大阪に住んでいます。"},
		"先月京都に引っ越しました。":      {"ユーザーは2026年4月に京都に引っ越し、そこに住んでいる。"},
		"猫が大好きです。コーヒーは苦手です。": {"ユーザーは猫が大好きです。", "ユーザーはコーヒーは苦手です。"},
		"来週の土曜日に京都に行く予定です。":  {"ユーザーは2026年5月16日に京都に行く予定です。"},
		"私の名前はハナです。":         {"ユーザーの名前はハナです。"},
		"私は看護師です。":           {"ユーザーは看護師です。"},
		"妹がいます。":             {"ユーザーは妹がいます。"},
		"大阪に住んでいますか？":        nil,
		"今日は暑いですね。":          nil,
	} {
		got := texts(Extract(msg, Speaker{}, said))
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("Extract(%q) = %q, want %q", msg, got, want)
		}
	}
	if got := Extract("来週京都に行く予定です", Speaker{}, said); len(got) != 1 || got[0].Kind != Plan || got[0].Date != "2026-05-11" {
		t.Errorf("a plan next week: %+v", got)
	}
}

func TestDates(t *testing.T) {
	// Friday 8 May 2026.
	for expr, want := range map[string]string{
		"yesterday": "on 7 May 2026", "tomorrow": "on 9 May 2026", "last Tuesday": "on 5 May 2026",
		"next Friday": "on 15 May 2026", "last week": "in the week of 27 April 2026", "next month": "in June 2026",
		"last year": "in 2025", "3 days ago": "on 5 May 2026", "two weeks ago": "in the week of 20 April 2026",
		"on 3 June": "on 3 June 2026", "May 3, 2023": "on 3 May 2023", "in March": "in March 2026",
		"in 2019": "in 2019", "the day before yesterday": "on 6 May 2026",
		"last Fri": "on 1 May 2026", "next tues": "on 12 May 2026", "two weekends ago": "on 25 April 2026",
	} {
		d, ok := findEnglishDate(expr, said, present)
		if !ok || d.start != 0 || d.end != len(expr) || d.w.english() != want {
			t.Errorf("%q: %+v %q, want %q", expr, d, d.w.english(), want)
		}
	}
	// A bare weekday or month points the way the clause does.
	if d, _ := findEnglishDate("on Monday", said, past); d.w.english() != "on 4 May 2026" {
		t.Errorf("past Monday: %q", d.w.english())
	}
	if d, _ := findEnglishDate("in March", said, future); d.w.english() != "in March 2027" {
		t.Errorf("future March: %q", d.w.english())
	}
	for expr, want := range map[string]string{"昨日": "2026年5月7日", "来月": "2026年6月", "先週の火曜日": "2026年4月28日", "3日前": "2026年5月5日", "6月3日": "2026年6月3日"} {
		d, ok := findJapaneseDate(expr, said, present)
		if !ok || d.w.japanese() != want {
			t.Errorf("%q: %q, want %q", expr, d.w.japanese(), want)
		}
	}
}

// consolidate adds facts one at a time, as the memory bank does with
// direct facts, and returns the memories left.
func consolidate(t *testing.T, facts ...string) []string {
	t.Helper()
	var mem []string
	for _, f := range facts {
		a := Consolidate(mem, []string{f})
		if len(a) != 1 || a[0].Candidate != 1 {
			t.Fatalf("Consolidate(%q, %q) = %+v", mem, f, a)
		}
		switch a[0].Action {
		case Create:
			mem = append(mem, a[0].Fact)
		case Update:
			mem[a[0].Memory-1] = a[0].Fact
		}
	}
	return mem
}

func TestConsolidateParaphrases(t *testing.T) {
	for _, set := range [][][]string{
		// The set of kioku-bench paraphrases.
		{
			{"Ann lives in Sapporo.", "Ann is living in Sapporo.", "Ann's home is in Sapporo."},
			{"Ann prefers tea.", "Ann likes tea.", "Tea is Ann's favourite drink."},
			{"Ann works as a nurse.", "Ann is a nurse.", "Ann's job is nursing."},
			{"Ann has a dog called Pochi.", "Ann owns a dog named Pochi.", "Pochi is Ann's dog."},
			{"Ann's birthday is on 3 May.", "Ann was born on 3 May.", "Ann celebrates her birthday on May 3."},
		},
		// Another, written after the rules.
		{
			{"Ken lives in Nagoya.", "Ken resides in Nagoya.", "Ken's house is in Nagoya."},
			{"Ken loves jazz.", "Ken is a big fan of jazz.", "Jazz is Ken's favourite music."},
			{"Ken is a teacher.", "Ken works as a teacher.", "Ken teaches at a school."},
			{"Ken has two cats.", "Ken owns two cats.", "Ken keeps two cats."},
			{"Ken's wife is Yuki.", "Ken is married to Yuki.", "Yuki is Ken's wife."},
		},
	} {
		var all []string
		for round := range 3 {
			for _, p := range set {
				all = append(all, p[round])
			}
		}
		if mem := consolidate(t, all...); len(mem) != 5 {
			t.Errorf("15 paraphrases of 5 facts left %d: %q", len(mem), mem)
		}
	}
}

func TestConsolidateUpdates(t *testing.T) {
	for _, c := range []struct {
		existing, fact, action, want string
	}{
		{"The user lives in Osaka.", "The user moved to Kyoto in April 2026 and lives there.", Update, "The user moved from Osaka to Kyoto in April 2026 and lives there."},
		{"The user lives in Osaka.", "The user lives in Kyoto.", Update, "The user lives in Kyoto."},
		{"The user is a nurse.", "The user works as a nurse in Osaka.", Update, "The user works as a nurse in Osaka."},
		{"The user works as a nurse in Osaka.", "The user is a nurse.", Skip, ""},
		{"The user likes coffee.", "The user does not like coffee.", Update, "The user does not like coffee."},
		{"The user has a dog.", "The user has a dog called Pochi.", Update, "The user has a dog called Pochi."},
		{"The user has a dog called Pochi.", "The user has a dog called Hachi.", Create, "The user has a dog called Hachi."},
		{"The user's sister lives in Osaka.", "The user lives in Kobe.", Create, "The user lives in Kobe."},
		{"The user is going to visit Kyoto on 9 May 2026.", "The user is going to visit Kyoto on 16 May 2026.", Update, "The user is going to visit Kyoto on 16 May 2026."},
		{"ユーザーは大阪に住んでいます。", "ユーザーは2026年4月に京都に引っ越し、そこに住んでいる。", Update, "ユーザーは2026年4月に大阪から京都に引っ越し、そこに住んでいる。"},
		{"ユーザーは猫が好きです。", "ユーザーは猫が大好きです。", Skip, ""},
		{"The user plays the cello every Sunday.", "The user plays the cello every Sunday.", Skip, ""},
		{"Ann has a green bike", "Ann has a red bike", Create, "Ann has a red bike"},
	} {
		got := Consolidate([]string{c.existing}, []string{c.fact})[0]
		want := Action{Candidate: 1, Action: c.action, Fact: c.want}
		if c.action != Create {
			want.Memory = 1
		}
		if got != want {
			t.Errorf("%q then %q: %+v, want %+v", c.existing, c.fact, got, want)
		}
	}
}

func TestConsolidateActsOnceAndSkipsRepeats(t *testing.T) {
	got := Consolidate(
		[]string{"The user lives in Osaka.", "The user likes tea."},
		[]string{"The user lives in Kyoto.", "The user lives in Nara.", "The user likes tea.", "The user enjoys tea.", "The user plays chess.", "The user plays chess"},
	)
	want := []Action{
		{Candidate: 1, Action: Update, Memory: 1, Fact: "The user lives in Kyoto."},
		{Candidate: 2, Action: Create, Fact: "The user lives in Nara."}, // memory 1 was updated already
		{Candidate: 3, Action: Skip, Memory: 2},
		{Candidate: 4, Action: Skip}, // memory 2 was acted on; it says so already
		{Candidate: 5, Action: Create, Fact: "The user plays chess."},
		{Candidate: 6, Action: Skip}, // an earlier new fact says it
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("action %d: %+v, want %+v", i+1, got[i], want[i])
		}
	}
}

func TestDeterministic(t *testing.T) {
	msg := "I have a dog called Pochi. I moved to Kyoto last month, and I love green tea. 来週京都に行く予定です。"
	first := Extract(msg, Speaker{}, said)
	for range 20 {
		if got := Extract(msg, Speaker{}, said); strings.Join(texts(got), "|") != strings.Join(texts(first), "|") {
			t.Fatalf("Extract gave %q, then %q", texts(first), texts(got))
		}
	}
}
