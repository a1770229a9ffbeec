package facts

import (
	"strings"
	"testing"
	"time"
)

func TestUserName(t *testing.T) {
	for fact, want := range map[string]string{
		"The user is Ann.":                   "Ann",
		"The user's name is Ann.":            "Ann",
		"ユーザーの名前はアンです。":                      "アン",
		"The user's sister's name is Bo.":    "",
		"The user has a dog named Pochi.":    "",
		"Ann's name is Ann.":                 "",
		"The user wants to be called Annie.": "",
	} {
		if got := UserName(fact); got != want {
			t.Errorf("UserName(%q) = %q, want %q", fact, got, want)
		}
	}
}

func TestNamed(t *testing.T) {
	for _, c := range []struct{ fact, name, want string }{
		{"The user has a dog named Pochi.", "Ann", "Ann has a dog named Pochi."},
		{"The user's sister lives in Kobe.", "Ann", "Ann's sister lives in Kobe."},
		{"ユーザーはポチという犬を飼っています。", "アン", "アンはポチという犬を飼っています。"},
		{"ユーザーの妹は神戸に住んでいます。", "アン", "アンの妹は神戸に住んでいます。"},
		{"The user is Ann.", "Ann", "The user is Ann."},
		{"Bo lives in Kobe.", "Ann", "Bo lives in Kobe."},
		{"The user has a dog named Pochi.", "", "The user has a dog named Pochi."},
		{"The username is set.", "Ann", "The username is set."},
		// A message's statements, one fact, and the user named elsewhere.
		{"The user took their kids to a pottery workshop. The user and others all made pots.", "Ann", "Ann took their kids to a pottery workshop. Ann and others all made pots."},
		{"This necklace from the user's grandma is special to them.", "Ann", "This necklace from Ann's grandma is special to them."},
	} {
		if got := Named(c.fact, c.name); got != c.want {
			t.Errorf("Named(%q, %q) = %q, want %q", c.fact, c.name, got, c.want)
		}
	}
}

// TestJapaneseNameWhole: the name rule reads the whole name, up to the
// copula (its alternatives once matched a prefix: 名前はアンです gave ア).
func TestJapaneseNameWhole(t *testing.T) {
	got := Extract("私の名前はアンです。", Speaker{}, time.Time{})
	if len(got) != 1 || UserName(got[0].Text) != "アン" {
		t.Errorf("Extract: %v, want the name アン", got)
	}
	if a := Consolidate([]string{"ユーザーの名前はアンです。"}, []string{"ユーザーの名前はアンナです。"}); len(a) != 1 || a[0].Action != Update || !strings.Contains(a[0].Fact, "アンナ") {
		t.Errorf("a new name: %+v, want an update", a)
	}
}
