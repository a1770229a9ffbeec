package facts

import (
	"strings"
)

// The word lists the rules read. They are small on purpose: the rules
// catch the common ways of saying the common facts, and a language model
// catches the rest.

func wordSet(words string) map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(words) {
		m[strings.ReplaceAll(w, "_", " ")] = true
	}
	return m
}

// alternation returns the words of a set as a regular expression
// alternation, longest first (so that "golden retriever" wins over
// "retriever").
func alternation(set map[string]bool) string {
	words := make([]string, 0, len(set))
	for w := range set {
		words = append(words, w)
	}
	sortLongestFirst(words)
	return "(?:" + strings.Join(words, "|") + ")"
}

func sortLongestFirst(words []string) {
	for i := 1; i < len(words); i++ {
		for j := i; j > 0 && (len(words[j]) > len(words[j-1]) || len(words[j]) == len(words[j-1]) && words[j] < words[j-1]); j-- {
			words[j], words[j-1] = words[j-1], words[j]
		}
	}
}

// species are the animals kept as pets, and breeds that name their
// species (the value).
var species = func() map[string]string {
	m := map[string]string{}
	for _, w := range strings.Fields(`dog puppy pup cat kitten rabbit bunny hamster guinea_pig parrot budgie bird
fish goldfish turtle tortoise snake lizard gecko horse pony ferret hedgehog chinchilla rat mouse
chicken duck frog`) {
		m[strings.ReplaceAll(w, "_", " ")] = map[string]string{"puppy": "dog", "pup": "dog", "kitten": "cat", "bunny": "rabbit", "goldfish": "fish", "budgie": "bird", "parrot": "bird"}[w]
		if m[strings.ReplaceAll(w, "_", " ")] == "" {
			m[strings.ReplaceAll(w, "_", " ")] = strings.ReplaceAll(w, "_", " ")
		}
	}
	for _, w := range strings.Fields(`retriever golden_retriever labrador poodle shiba shiba_inu corgi husky beagle
terrier bulldog chihuahua dachshund pug collie border_collie spaniel schnauzer akita pomeranian`) {
		m[strings.ReplaceAll(w, "_", " ")] = "dog"
	}
	for _, w := range strings.Fields(`siamese persian tabby maine_coon ragdoll sphynx`) {
		m[strings.ReplaceAll(w, "_", " ")] = "cat"
	}
	return m
}()

// family are the members of a family and partners; the value is the
// member's kind, for comparing facts ("mom" and "mother" are one).
var family = func() map[string]string {
	m := map[string]string{}
	for _, g := range []string{
		"mother mom mum mommy mama", "father dad daddy papa", "sister sis", "brother bro",
		"son", "daughter", "spouse wife husband", "partner", "boyfriend", "girlfriend", "fiance fiancee fiancé fiancée",
		"grandmother grandma granny", "grandfather grandpa", "aunt", "uncle", "cousin", "niece", "nephew",
		"child kid", "parent", "sibling", "grandchild grandson granddaughter", "twin",
		"mother-in-law", "father-in-law", "stepmother", "stepfather", "stepson", "stepdaughter",
	} {
		f := strings.Fields(g)
		for _, w := range f {
			m[w] = f[0]
		}
	}
	return m
}()

// professions are job titles: "I am a nurse" says where someone works.
var professions = wordSet(`nurse doctor physician surgeon dentist pharmacist therapist counselor counsellor
psychologist psychiatrist veterinarian vet paramedic caregiver midwife
teacher professor lecturer tutor principal librarian researcher scientist
engineer developer programmer designer architect analyst accountant consultant
lawyer attorney judge police_officer policeman policewoman firefighter soldier
chef cook baker barista bartender waiter waitress cashier
writer author journalist editor photographer artist painter musician singer actor actress dancer
farmer gardener florist carpenter plumber electrician mechanic driver pilot
manager director entrepreneur salesperson realtor banker clerk secretary receptionist
student freelancer translator interpreter coach athlete youtuber streamer
social_worker software_engineer web_developer data_scientist civil_servant office_worker
homemaker housewife househusband stay-at-home_parent retiree`)

// nationalities say where someone is from, not their name ("I'm
// Japanese").
var nationalities = wordSet(`japanese american british english scottish irish welsh chinese korean french german
italian spanish portuguese canadian australian indian brazilian mexican dutch swedish norwegian danish
finnish polish russian ukrainian turkish greek egyptian nigerian kenyan thai vietnamese filipino
indonesian malaysian singaporean taiwanese argentinian chilean peruvian colombian swiss austrian belgian`)

// transient are what "I am ..." says of a moment, not of a person.
var transient = wordSet(`tired happy sad sorry glad excited fine good okay ok well busy sure here there back home
not so really just hungry thirsty bored late early ready done afraid curious confused lost stressed
worried nervous grateful thankful proud sick ill cold hot upset angry mad scared surprised relieved
free available around in out on off up down alright all_right great awesome amazing impressed
thinking going doing trying looking feeling getting wondering planning hoping waiting working studying
a_bit a_little kind_of sort_of totally pretty very still also always never lucky blessed game super
thrilled stoked determined motivated inspired touched moved honored honoured sure certain aware able
glad all about like into`)

// transientHave are what "I have ..." says of a moment.
var transientHave = wordSet(`question questions idea ideas headache cold fever flu cough problem problems lot bit
moment minute second chance clue doubt point favor favour feeling good great fun time day busy meeting
appointment plan plans class exam test homework work thing things suggestion`)

// pastVerbs are common irregular past tenses (the regular end in -ed).
var pastVerbs = wordSet(`went got had made saw took came gave found bought met ran won began wrote read left felt did
said told thought brought built caught drove ate fell flew heard kept lost paid sold sent sat slept
spent stood swam taught threw understood woke wore became drew grew knew rode sang spoke chose broke`)

// milestones are past events worth remembering even without a date.
var milestones = wordSet(`adopted started finished graduated married joined quit retired bought won began opened
launched published completed visited traveled travelled moved volunteered signed_up took_up got_married
got_engaged got_divorced gave_birth passed became founded learned learnt competed ran climbed`)

// genericVerbs are the verbs of "I <verb> ..." that say something lasting
// about a person.
var genericVerbs = wordSet(`play collect grow speak cook read own go teach paint write drink eat watch need want
run swim practice practise volunteer bake draw sing knit hike climb surf ski use drive ride
make build study work live like love hate prefer enjoy dislike`)

// likeVerbs are the verbs of liking, for the topic.
var likeVerbs = wordSet(`like love hate prefer enjoy dislike adore`)

// discourse are words that open a sentence before what it says ("Oh, I
// ...", "Well, my ...").
var discourse = wordSet(`oh well yeah yes so actually haha hah lol hey hi hello also and but btw anyway honestly just
um uh ah okay ok right sure cool great nice wow by_the_way you_know guess_what fun_fact by_the_way,`)

// adverbs stand between a subject and its verb ("I just moved").
var adverbs = wordSet(`just recently really also still actually absolutely totally finally currently now usually
always often sometimes definitely truly mostly even already honestly personally simply especially newly
happily proudly originally kinda generally basically officially`)
