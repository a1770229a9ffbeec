package model

import (
	"strings"

	"github.com/kioku-ai/kioku/internal/terms"
)

// conceptWeight is the weight of a concept feature of the offline
// embedder (a word's is 1).
const conceptWeight = 0.3

// offlineConcepts maps the stem of a word to the everyday concept it
// belongs to, for the offline embedder's concept features: "tea" and
// "drink" share the feature of drinks, so "What does Ann drink?" finds
// "Ann prefers tea." before "Ann lives in Sapporo.", which shares only
// "Ann" with it. The concepts are those of what people tell about
// themselves (the offline extractor's subjects: home, work, family, pets,
// food and drink, likes, study, birthdays, travel), with a few dozen words
// each; they are no thesaurus, and a model embedder knows far more.
var offlineConcepts = func() map[string]string {
	groups := map[string]string{
		"drink": `drink drank beverage tea coffee water juice milk beer wine sake soda latte espresso cocoa
matcha smoothie lemonade whisky whiskey cocktail cola cappuccino`,
		"food": `food eat ate meal dish cuisine cook sushi ramen pizza pasta curry burger salad soup rice noodle
bread cake chocolate dessert snack breakfast lunch dinner restaurant bake recipe`,
		"home": `live home house apartment flat move moved relocate reside resident address neighborhood
neighbourhood hometown`,
		"work": `work job career employ employer employed office company occupation profession colleague
coworker boss nurse doctor physician teacher engineer developer programmer designer lawyer chef
accountant manager salesperson pharmacist dentist scientist researcher professor`,
		"pet": `pet dog cat puppy kitten rabbit bunny hamster parrot budgie turtle tortoise goldfish ferret
retriever labrador poodle corgi husky beagle terrier chihuahua`,
		"family": `family mother mom mum father dad parent sister brother sibling son daughter child children kid
wife husband spouse partner grandmother grandma grandfather grandpa aunt uncle cousin niece nephew
married`,
		"like":     `like love enjoy prefer favourite favorite fond fan adore hate dislike`,
		"study":    `study school university college student class course degree major learn`,
		"birthday": `birthday born birth age`,
		"travel":   `travel trip vacation holiday visit journey flight abroad tour`,
		"name":     `name nickname`,
	}
	m := map[string]string{}
	for concept, words := range groups {
		for _, w := range strings.Fields(words) {
			terms.Each(w, func(t string, kind terms.Kind) {
				if kind == terms.Word || kind == terms.Weak {
					m[t] = concept
				}
			})
		}
	}
	return m
}()
