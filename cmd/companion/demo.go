package main

// The offline demo (--model-provider demo): Hana without a language model.
// A scripted Gemini endpoint (package model/scripted) runs on a loopback
// port of this process, and the app uses it as it would use the Gemini
// API, through the real genai client: the same agent turns with tool calls
// (save_to_memory, load_memory, set_nickname, final_answer) and the same
// structured replies. Only Hana's answers are scripted, from what each
// request carries: the user's message, the function responses, the
// affinity, the user's local time and the memories kioku preloaded into the
// instruction. The embedded kioku runs kioku's own offline extractor
// (--model-provider offline) for its memory calls, and Hana decides what
// to save with the same rules (package internal/facts); she answers a
// question about the user from what her load_memory tool retrieves. The
// page says it is the scripted demo.

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

	"github.com/kioku-ai/kioku/internal/facts"
	"github.com/kioku-ai/kioku/model"
	"github.com/kioku-ai/kioku/model/scripted"
)

// demoProvider is the --model-provider value of the offline demo.
const demoProvider = "demo"

// demoModelName is the model the app reports in the demo.
const demoModelName = "hana-scripted-demo"

// startDemoModel serves the scripted Hana on a loopback port until ctx
// ends, and returns the model configuration that reaches it (as the Gemini
// API) with the embedder of cfg kept. Hana only chats: kioku's memory
// calls go to its offline extractor (demoKiokuModels).
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

// demoKiokuModels returns the model configuration of the demo's embedded
// kioku: the offline extractor, with the embedder of cfg.
func demoKiokuModels(cfg model.Config) model.Config {
	cfg.Provider, cfg.Model = "offline", ""
	return cfg
}

// demoReply answers one model call of the demo: Hana's turns (offered
// tools).
func demoReply(c scripted.Call) (scripted.Reply, error) {
	if len(c.Tools) > 0 {
		return hanaTurn(c), nil
	}
	return scripted.Reply{}, errors.New("the offline demo model only plays Hana; kioku's memory calls go to its offline extractor (--model-provider offline)")
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
	// aboutMe is a question about the user ("Where do I work?").
	aboutMe = regexp.MustCompile(`(?i)\b(I|my|me|mine)\b`)
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
	said := factsOf(user)
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
	case len(said) > 0:
		if !strings.HasPrefix(last, "response save_to_memory") {
			var calls []map[string]any
			for _, f := range said {
				calls = append(calls, scripted.FunctionCall("save_to_memory", map[string]any{"fact": f}).Parts...)
			}
			return scripted.Reply{Parts: calls}
		}
		// Proposes +25; the program moves at most 10.
		return answer(fmt.Sprintf("Oh, %s? I will remember that!", toYou(said[0])), "Hana's eyes light up.", "excited", "park", affinity+25)
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
	case strings.HasSuffix(user, "?") && aboutMe.MatchString(user):
		// A question about the user: what kioku retrieves for it.
		found, asked := loaded(last)
		if !asked {
			return scripted.FunctionCall("load_memory", map[string]any{"query": user})
		}
		if len(found) == 0 {
			return answer("Hmm, I don't think you have told me that yet.", "Hana tilts her head.", "shy", "cafe", affinity)
		}
		return answer("I remember: "+toYou(found[0])+".", "Hana smiles, pleased to remember.", "happy", "cafe", affinity+1)
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

// theirs is the third person's possessive in the facts.
var theirs = regexp.MustCompile(`\btheir\b`)

// factsOf returns what the user says about themselves in a message, as
// facts in the third person ("I have a cat called Miso" is "The user has
// a cat called Miso."): the rules of kioku's offline extractor. The stage
// directions are not the user's words.
func factsOf(msg string) []string {
	if strings.HasPrefix(msg, stagePrefix) {
		return nil
	}
	var out []string
	for _, f := range facts.Extract(msg, facts.Speaker{}, time.Now()) {
		out = append(out, f.Text)
	}
	return out
}

// loaded returns the memories of a load_memory result, and whether the
// last message is one.
func loaded(last string) ([]string, bool) {
	body, ok := strings.CutPrefix(last, "response load_memory ")
	if !ok {
		return nil, false
	}
	var res struct {
		Memories []string `json:"memories"`
	}
	if err := json.Unmarshal([]byte(body), &res); err != nil {
		return nil, true // an error result: nothing found
	}
	return res.Memories, true
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
