package facts

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestFillProfile: the ways of stating a profile field FillProfile
// catches, and statements it must not take for one.
func TestFillProfile(t *testing.T) {
	fields := []ProfileField{
		{Key: "lang", Name: "preferred_language", Type: "string"},
		{Key: "tone", Name: "tone", Type: "string", Enum: []string{"succinct", "detailed"}},
		{Key: "color", Name: "favoriteColour", Type: "string"},
		{Key: "age", Name: "age", Type: "integer"},
		{Key: "name", Name: "preferred_name", Type: "string"},
		{Key: "city", Name: "home_city", Type: "string"},
		{Key: "hometown", Name: "hometown", Type: "string"},
		{Key: "job", Name: "occupation", Type: "string"},
		{Key: "veg", Name: "is_vegetarian", Type: "boolean"},
	}
	for text, want := range map[string]map[string]string{
		"My preferred language is Python.":                                        {"lang": "Python"},
		"I prefer Python for everything, and I have a cat.":                       {"lang": "Python"},
		"Please answer in japanese from now on.":                                  {"lang": "Japanese"},
		"I mostly code in Go these days":                                          {"lang": "Go"},
		"I go to the gym and like running.":                                       nil,
		"Preferred language: Rust":                                                {"lang": "Rust"},
		"I prefer succinct answers, thanks.":                                      {"tone": "succinct"},
		"Keep it detailed please":                                                 {"tone": "detailed"},
		"The report was detailed.":                                                nil,
		"My favourite color is dark green, but I also like blue.":                 {"color": "dark green"},
		"I'm 34 years old.":                                                       {"age": "34"},
		"Call me Kim.":                                                            {"name": "Kim"},
		"I live in Osaka with my wife.":                                           {"city": "Osaka"},
		"I work as a nurse at the city hospital.":                                 {"job": "nurse"},
		"I'm originally from Sapporo.":                                            {"hometown": "Sapporo"},
		"I work as a nurse.":                                                      {"job": "nurse"},
		"I'm vegetarian.":                                                         {"veg": "true"},
		"I am not a vegetarian anymore":                                           {"veg": "false"},
		"Is my preferred language Python?":                                        nil,
		"My preferred language is Python. Actually, my preferred language is Go.": {"lang": "Go"},
	} {
		got := map[string]string{}
		for _, v := range FillProfile(text, fields) {
			got[v.Key] = v.Value
		}
		if len(want) == 0 {
			want = map[string]string{}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("FillProfile(%q) (-want +got):\n%s", text, diff)
		}
	}
}
