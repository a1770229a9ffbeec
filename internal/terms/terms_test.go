package terms_test

import (
	"slices"
	"testing"

	"github.com/kioku-ai/kioku/internal/terms"
)

var kindNames = []string{terms.Word: "word", terms.Weak: "weak", terms.Bigram: "bigram", terms.Han: "han", terms.Single: "single"}

func TestEach(t *testing.T) {
	for _, tc := range []struct {
		text string
		want []string
	}{
		// Stop words go, stems meet, apostrophes vanish with a possessive
		// or contracted "s" ("she's" is the stop word "she"), case folds.
		{"I painted the Paints; she's PAINTING!", []string{"paint/word", "paint/word", "paint/word"}},
		{"Running, stopped, hiking, boxes, games, class", []string{"run/word", "stop/word", "hike/word", "box/word", "game/word", "class/word"}},
		{"creative creativity; Jon's jons", []string{"creativ/word", "creativ/word", "jon/word", "jon/word"}},
		// Irregular forms meet their verb; "a bit" is not "bite".
		{"bought buys; met meeting; written writes; a bit bitten", []string{"buy/word", "buy/word", "meet/word", "meet/word", "write/word", "write/word", "bit/word", "bite/word"}},
		// Conversation filler counts as weak.
		{"I really think it's amazing", []string{"think/weak", "amaz/weak"}},
		// CJK runs give bigrams and Han characters; a lone kana itself.
		{"東京に", []string{"東/han", "東京/bigram", "京/han", "京に/bigram"}},
		{"ア ok", []string{"ア/single"}},
		// NFKC: full-width forms are the plain ones.
		{"ＴＥＡ", []string{"tea/word"}},
	} {
		var got []string
		terms.Each(tc.text, func(term string, k terms.Kind) {
			got = append(got, term+"/"+kindNames[k])
		})
		if !slices.Equal(got, tc.want) {
			t.Errorf("Each(%q) = %v, want %v", tc.text, got, tc.want)
		}
	}
}

func TestTerms(t *testing.T) {
	got := terms.Terms("Caroline's LGBTQ support groups")
	want := []string{"carolin", "lgbtq", "support", "group"}
	if !slices.Equal(got, want) {
		t.Fatalf("Terms = %v, want %v", got, want)
	}
}
