package main

// The offline demo (--model-provider demo): Hana without a language model.
// A scripted Gemini endpoint (package model/scripted) runs on a loopback
// port of this process, and the app and its embedded kioku use it as they
// would use the Gemini API, through the real genai client: the same agent
// turns with tool calls (save_to_memory, set_nickname, final_answer), the
// same structured replies, and kioku's own consolidation call when a saved
// fact meets similar memories. Only the answers are scripted, from what
// each request carries: the user's message, the function responses, the
// affinity, the user's local time and the memories kioku preloaded into the
// instruction. The page says it is the scripted demo.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/kioku-ai/kioku/model"
	"github.com/kioku-ai/kioku/model/scripted"
)

// demoProvider is the --model-provider value of the offline demo.
const demoProvider = "demo"

// demoModelName is the model the app reports in the demo.
const demoModelName = "hana-scripted-demo"

// startDemoModel serves the scripted Hana on a loopback port until ctx
// ends, and returns the model configuration that reaches it (as the Gemini
// API) with the embedder of cfg kept.
func startDemoModel(ctx context.Context, cfg model.Config) (model.Config, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return model.Config{}, fmt.Errorf("starting the demo model: %w", err)
	}
	srv := &http.Server{
		Handler:           &scripted.Gemini{Respond: demoReply},
		ReadHeaderTimeout: 10 * time.Second,
	}
	go srv.Serve(ln)
	context.AfterFunc(ctx, func() { srv.Close() })
	cfg.Provider, cfg.Model = "gemini", demoModelName
	cfg.GeminiAPIKey, cfg.GeminiBaseURL = "offline-demo", "http://"+ln.Addr().String()
	return cfg, nil
}

// demoReply answers one model call of the demo: Hana's turns (offered
// tools), or kioku's extraction and consolidation calls (asked for a
// structured reply).
func demoReply(c scripted.Call) (scripted.Reply, error) {
	switch {
	case len(c.Tools) > 0:
		return hanaTurn(c), nil
	case schemaHas(c.Schema, "actions"):
		return consolidate(c)
	case schemaHas(c.Schema, "facts"):
		return extract(c)
	}
	return scripted.Reply{}, errors.New("the offline demo model only plays Hana and answers kioku's memory calls")
}

// schemaHas reports whether a response schema has a top-level property.
func schemaHas(schema any, prop string) bool {
	s, _ := schema.(map[string]any)
	props, _ := s["properties"].(map[string]any)
	_, ok := props[prop]
	return ok
}

var (
	affinityLine  = regexp.MustCompile(`affinity toward them, 0 to 100: (\d+)`)
	nicknameLine  = regexp.MustCompile(`You are talking with (.+?), a friend`)
	localTimeLine = regexp.MustCompile(`Their local time: .*?(\d{1,2}):\d{2}`)
	callMe        = regexp.MustCompile(`(?i)\bcall me ([\p{L}\p{N}][\p{L}\p{N} '-]{0,39})`)
	rude          = regexp.MustCompile(`(?i)\b(boring|stupid|shut up|hate you|annoying|ugly|idiot)\b`)
	greeting      = regexp.MustCompile(`(?i)^(hi|hello|hey|good (morning|afternoon|evening))\b`)
	thanks        = regexp.MustCompile(`(?i)\b(thanks|thank you)\b`)
	askMemory     = regexp.MustCompile(`(?i)\bremember\b.*\?|\bwhat do you know about me\b`)
)

// hanaTurn plays Hana for one model call of a turn.
func hanaTurn(c scripted.Call) scripted.Reply {
	last := c.Messages[len(c.Messages)-1].Text
	user := ""
	for i := len(c.Messages) - 1; i >= 0; i-- {
		if m := c.Messages[i]; m.Role == "user" && !strings.HasPrefix(m.Text, "response ") {
			user = strings.TrimSpace(m.Text)
			break
		}
	}
	affinity := startAffinity
	if m := affinityLine.FindStringSubmatch(c.System); m != nil {
		affinity, _ = strconv.Atoi(m[1])
	}
	nick := "friend"
	if m := nicknameLine.FindStringSubmatch(c.System); m != nil && m[1] != "" {
		nick = m[1]
	}
	late := false
	if m := localTimeLine.FindStringSubmatch(c.System); m != nil {
		h, _ := strconv.Atoi(m[1])
		late = h >= 21 || h < 5
	}
	answer := func(dialogue, narration, emotion, scene string, level int) scripted.Reply {
		if late && emotion != "angry" {
			scene = "night"
		}
		return scripted.FunctionCall("final_answer", map[string]any{
			"dialogue": dialogue, "narration": narration, "emotion": emotion, "scene": scene,
			"affinity_level": min(max(level, 0), 100),
		})
	}
	known := remembered(c.System)
	facts := factsOf(user)
	switch {
	case strings.HasPrefix(user, stagePrefix):
		if len(known) > 0 {
			return answer(fmt.Sprintf("Good morning, %s! I remember that %s.", nick, toYou(known[0])),
				"Hana waves from behind the flower stall.", "happy", "cafe", affinity+3)
		}
		return answer("Oh, hello! Welcome to my little flower stall.", "Hana looks up from a bucket of tulips.", "shy", "cafe", affinity+3)
	case rude.MatchString(user):
		return answer("That was not very kind.", "Hana crosses her arms.", "angry", "street", affinity-4)
	case callMe.MatchString(user):
		name := strings.TrimSpace(callMe.FindStringSubmatch(user)[1])
		if !strings.HasPrefix(last, "response set_nickname") {
			return scripted.FunctionCall("set_nickname", map[string]any{"nickname": name})
		}
		return answer(name+" it is, then.", "Hana repeats the name softly.", "shy", "street", affinity+2)
	case len(facts) > 0:
		if !strings.HasPrefix(last, "response save_to_memory") {
			return scripted.FunctionCall("save_to_memory", map[string]any{"fact": facts[0]})
		}
		// Proposes +25; the program moves at most 10.
		return answer(fmt.Sprintf("Oh, %s? I will remember that!", toYou(facts[0])), "Hana's eyes light up.", "excited", "park", affinity+25)
	case askMemory.MatchString(user):
		if len(known) == 0 {
			return answer("Hmm, you have not told me much about yourself yet.", "Hana tilts her head.", "shy", "cafe", affinity)
		}
		var yous []string
		for _, f := range known {
			yous = append(yous, "that "+toYou(f))
		}
		return answer("Of course! I remember "+strings.Join(yous, ", and ")+".", "Hana counts on her fingers.", "happy", "cafe", affinity+1)
	case greeting.MatchString(user):
		return answer(fmt.Sprintf("Hello, %s! How are you today?", nick), "Hana smiles.", "happy", "cafe", affinity+1)
	case thanks.MatchString(user):
		return answer(fmt.Sprintf("You're welcome, %s.", nick), "Hana blushes a little.", "shy", "cafe", affinity+2)
	case strings.HasSuffix(user, "?"):
		return answer("Hmm, good question. What do you think?", "Hana thinks it over.", "neutral", "home", affinity)
	}
	replies := []string{"I see.", "Tell me more!", "Is that so?"}
	return answer(replies[len(user)%len(replies)], "Hana nods.", "neutral", "home", affinity)
}

// remembered returns the facts the agent preloaded into the instruction,
// without the dates it shows them with ("- [said 2026-05-08] The user ...").
func remembered(system string) []string {
	_, list, ok := strings.Cut(system, "What you remember about the user")
	if !ok {
		return nil
	}
	var facts []string
	for _, line := range strings.Split(list, "\n") {
		if f, ok := strings.CutPrefix(line, "- "); ok {
			facts = append(facts, memoryDate.ReplaceAllString(f, ""))
		}
	}
	return facts
}

// memoryDate is the date the agent puts before a preloaded memory.
var memoryDate = regexp.MustCompile(`^\[[^\]]*\] `)

var (
	iHave  = regexp.MustCompile(`(?i)^i (have|had) (.+)$`)
	iAm    = regexp.MustCompile(`(?i)^(?:i am|i'm|im) (.+)$`)
	iVerb  = regexp.MustCompile(`(?i)^i (like|love|hate|prefer|enjoy|live|work|study|play|want|need|dislike|collect|grow|speak|cook|read|own|go|teach|paint|write|drink|eat|watch) (.+)$`)
	myNoun = regexp.MustCompile(`(?i)^my (.+)$`)
	minePr = regexp.MustCompile(`(?i)\b(my)\b`)
	theirs = regexp.MustCompile(`\btheir\b`)
	// sentenceEnd splits a message into sentences (questions stay whole,
	// to be left out).
	sentenceEnd = regexp.MustCompile(`[.!;\n]+`)
)

// factsOf turns what the user says about themselves into facts in the
// third person ("I have a cat called Miso" is "The user has a cat called
// Miso."): the sentences that start with I have, I am, I like (and other
// verbs) or my, but not questions.
func factsOf(msg string) []string {
	var out []string
	for _, s := range sentenceEnd.Split(msg, -1) {
		s = strings.TrimSpace(s)
		if s == "" || strings.Contains(s, "?") || strings.HasPrefix(s, stagePrefix) {
			continue
		}
		var fact string
		switch {
		case iHave.MatchString(s):
			m := iHave.FindStringSubmatch(s)
			fact = "The user " + map[string]string{"have": "has", "had": "had"}[strings.ToLower(m[1])] + " " + m[2]
		case iAm.MatchString(s):
			fact = "The user is " + iAm.FindStringSubmatch(s)[1]
		case iVerb.MatchString(s):
			m := iVerb.FindStringSubmatch(s)
			fact = "The user " + thirdPerson(strings.ToLower(m[1])) + " " + m[2]
		case myNoun.MatchString(s):
			fact = "The user's " + myNoun.FindStringSubmatch(s)[1]
		default:
			continue
		}
		out = append(out, minePr.ReplaceAllString(fact, "their")+".")
	}
	return out
}

// thirdPerson conjugates a verb for "the user": likes, studies, goes.
func thirdPerson(v string) string {
	switch {
	case len(v) > 1 && strings.HasSuffix(v, "y") && !strings.ContainsAny(v[len(v)-2:len(v)-1], "aeiou"):
		return v[:len(v)-1] + "ies"
	case strings.HasSuffix(v, "o"), strings.HasSuffix(v, "sh"), strings.HasSuffix(v, "ch"), strings.HasSuffix(v, "s"), strings.HasSuffix(v, "x"):
		return v + "es"
	}
	return v + "s"
}

// toYou says a fact about the user to the user: "The user has a cat." is
// "you have a cat".
func toYou(fact string) string {
	f := strings.TrimSuffix(strings.TrimSpace(fact), ".")
	f = theirs.ReplaceAllString(f, "your")
	switch {
	case strings.HasPrefix(f, "The user's "):
		return "your " + strings.TrimPrefix(f, "The user's ")
	case strings.HasPrefix(f, "The user has "):
		return "you have " + strings.TrimPrefix(f, "The user has ")
	case strings.HasPrefix(f, "The user is "):
		return "you are " + strings.TrimPrefix(f, "The user is ")
	case strings.HasPrefix(f, "The user "):
		verb, rest, _ := strings.Cut(strings.TrimPrefix(f, "The user "), " ")
		switch {
		case strings.HasSuffix(verb, "ies"):
			verb = strings.TrimSuffix(verb, "ies") + "y"
		case strings.HasSuffix(verb, "oes"), strings.HasSuffix(verb, "shes"), strings.HasSuffix(verb, "ches"), strings.HasSuffix(verb, "sses"), strings.HasSuffix(verb, "xes"):
			verb = strings.TrimSuffix(verb, "es")
		default:
			verb = strings.TrimSuffix(verb, "s")
		}
		return strings.TrimSpace("you " + verb + " " + rest)
	}
	return "“" + f + "”"
}

// numbered matches kioku's numbered prompt lines: "[3] ..." and "(2) ...".
var (
	memoryLine    = regexp.MustCompile(`^\[(\d+)\] (.+)$`)
	candidateLine = regexp.MustCompile(`^\((\d+)\) (.+)$`)
	eventTime     = regexp.MustCompile(` \(\d{4}-\d{2}-\d{2} \d{2}:\d{2}\)$`)
)

// consolidate answers kioku's consolidation call: a new fact that says
// what an existing memory says is skipped, naming that memory; the others
// are created.
func consolidate(c scripted.Call) (scripted.Reply, error) {
	existing := map[string]int{}
	type action struct {
		Candidate int    `json:"candidate"`
		Action    string `json:"action"`
		Memory    int    `json:"memory"`
		Fact      string `json:"fact"`
	}
	actions := []action{}
	used := map[int]bool{}
	for _, line := range strings.Split(c.Text(), "\n") {
		if m := memoryLine.FindStringSubmatch(line); m != nil {
			n, _ := strconv.Atoi(m[1])
			existing[sameFact(m[2])] = n
		}
		if m := candidateLine.FindStringSubmatch(line); m != nil {
			n, _ := strconv.Atoi(m[1])
			if k, ok := existing[sameFact(m[2])]; ok && !used[k] {
				used[k] = true
				actions = append(actions, action{Candidate: n, Action: "SKIP", Memory: k})
			} else {
				actions = append(actions, action{Candidate: n, Action: "CREATE", Fact: m[2]})
			}
		}
	}
	if len(actions) == 0 {
		return scripted.Reply{}, errors.New("the demo model found no new facts in the consolidation call")
	}
	b, err := json.Marshal(map[string]any{"actions": actions})
	return scripted.Reply{Text: string(b)}, err
}

// sameFact is the form in which two facts are compared.
func sameFact(f string) string {
	return strings.ToLower(strings.TrimSuffix(strings.TrimSpace(f), "."))
}

// extract answers kioku's extraction call with the facts the user states
// about themselves in the conversation (factsOf), citing their events.
func extract(c scripted.Call) (scripted.Reply, error) {
	topic := ""
	if s, ok := c.Schema.(map[string]any); ok {
		// properties.facts.items.properties.topic.enum
		facts, _ := s["properties"].(map[string]any)["facts"].(map[string]any)
		items, _ := facts["items"].(map[string]any)
		props, _ := items["properties"].(map[string]any)
		t, _ := props["topic"].(map[string]any)
		enum, _ := t["enum"].([]any)
		for _, e := range enum {
			if e == "USER_PERSONAL_INFO" || topic == "" {
				topic, _ = e.(string)
			}
		}
	}
	type fact struct {
		Fact   string `json:"fact"`
		Topic  string `json:"topic"`
		Events []int  `json:"events"`
	}
	out := []fact{}
	for _, line := range strings.Split(c.Text(), "\n") {
		m := memoryLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		author, text, ok := strings.Cut(m[2], ": ")
		if !ok || author != "user" {
			continue
		}
		n, _ := strconv.Atoi(m[1])
		for _, f := range factsOf(eventTime.ReplaceAllString(text, "")) {
			out = append(out, fact{Fact: f, Topic: topic, Events: []int{n}})
		}
	}
	b, err := json.Marshal(map[string]any{"facts": out})
	return scripted.Reply{Text: string(b)}, err
}
