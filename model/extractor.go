package model

import (
	"context"
	"encoding/json"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/invopop/jsonschema"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/facts"
)

// OfflineExtractor is the built-in generation provider (--model-provider
// offline, the default when none is configured): deterministic rules, no
// network, no model weights. It answers the memory bank's two calls as a
// language model would, from the requests the memory bank sends any model,
// so the memory bank runs its one pipeline (operations, consolidation,
// revisions, limits) unchanged:
//
//   - extraction (a request whose response schema has "facts"): it reads
//     the numbered events of the conversation and returns, for each event
//     of the user (author "user") or of a person (an author whose name is
//     capitalised, as when a conversation between people is stored with
//     the speakers as authors), the facts they state about themselves,
//     third person, with the memory bank's topics, the event cited and
//     relative dates resolved against the event's time. Other authors are
//     taken for the agent, whose words are not facts about the user.
//     A person's listener is the nearest other author with a name
//     (facts.Speaker's To); a message that tells only asides goes on
//     with the fact of the speaker's episode in their message before,
//     which then cites both events (facts.ExtractMessage).
//     Once the user says their name in the conversation ("I'm Ann"), the
//     user's facts carry it ("Ann has a dog called Pochi.", see
//     facts.Named);
//     When the response schema asks for profile fields ("profile", see
//     package memorybank's structured profiles), it fills those it
//     recognises from what the user says (facts.FillProfile: "my
//     preferred language is Python", "I prefer succinct answers" for a
//     field whose enum has succinct, "I'm 34", "call me Kim", ...);
//   - consolidation (a response schema with "actions"): it compares each
//     new fact with the existing memories shown, and answers SKIP for one
//     that says the same, UPDATE for one of the same subject and relation
//     with another value ("lives in Osaka", then "moved to Kyoto") or that
//     the new fact completes, and CREATE otherwise. When a fact shown, new
//     or existing, gives the user's name, the facts about the user are
//     written and compared with the name.
//   - the rewrite of a user's core memory blocks (a response schema with
//     "blocks", internal/workflow's RewriteBlocks): it keeps the human
//     block filled with the facts it extracts from the conversation, by
//     the rule blocksReply documents (new facts appended, changed ones
//     replaced, the oldest lines dropped past the limit), and leaves the
//     other blocks alone.
//
// What it reads is the rule set of package internal/facts (English and
// Japanese; its doc lists what it catches and what it misses). It is no
// language model: it catches the common ways of stating the common facts,
// and a real model (Gemini, or an OpenAI-compatible server) catches far
// more and writes better facts.
//
// Any other call (a session's summary, an agent's conversation) fails with
// FailedPrecondition, saying that it needs a language model.
type OfflineExtractor struct{}

// offlineExtractorName is the extractor's Name; its version changes when
// its rules give other facts.
const offlineExtractorName = "offline:kioku-extractor-v4"

// Name implements Generator.
func (OfflineExtractor) Name() string { return offlineExtractorName }

// IsOfflineExtractor reports whether g is the offline extractor, itself or
// wrapped (a generator that wraps another has a method Unwrap() Generator
// that returns it, as a Meter's does).
func IsOfflineExtractor(g Generator) bool {
	for {
		switch x := g.(type) {
		case OfflineExtractor:
			return true
		case interface{ Unwrap() Generator }:
			g = x.Unwrap()
		default:
			return false
		}
	}
}

// Generate implements Generator.
func (o OfflineExtractor) Generate(_ context.Context, r *GenerateRequest) (*GenerateResponse, error) {
	var reply any
	switch {
	case schemaProperty(r.Schema, "facts") != nil:
		reply = extractionReply(r)
	case schemaProperty(r.Schema, "actions") != nil:
		reply = consolidationReply(r)
	case schemaProperty(r.Schema, "blocks") != nil:
		reply = blocksReply(r)
	default:
		return nil, fault.New(fault.FailedPrecondition, "the offline extractor (%s) only answers the memory bank's extraction and consolidation calls and the rewrite of core memory blocks; this call needs a language model: configure one with %s", o.Name(), Settings)
	}
	b, err := json.Marshal(reply)
	if err != nil {
		return nil, err
	}
	return &GenerateResponse{Text: string(b)}, nil
}

// schemaProperty returns a top-level property of a schema, nil when it
// has none.
func schemaProperty(s *jsonschema.Schema, name string) *jsonschema.Schema {
	if s == nil || s.Properties == nil {
		return nil
	}
	p, _ := s.Properties.Get(name)
	return p
}

// lastMessage returns the text of the request's last message.
func lastMessage(r *GenerateRequest) string {
	if len(r.Messages) == 0 {
		return ""
	}
	return r.Messages[len(r.Messages)-1].Text
}

// The managed topics of the memory bank, for each kind of fact.
var topicOf = map[facts.Kind]string{
	facts.Personal:    "USER_PERSONAL_INFO",
	facts.Preference:  "USER_PREFERENCES",
	facts.Plan:        "KEY_CONVERSATION_DETAILS",
	facts.Instruction: "EXPLICIT_INSTRUCTIONS",
}

type extractedFact struct {
	Fact   string `json:"fact"`
	Topic  string `json:"topic"`
	Events []int  `json:"events"`
	Date   string `json:"date,omitempty"`
}

var (
	// eventStart starts an event line of the conversation: "[3] ".
	eventStart = regexp.MustCompile(`^\[(\d+)\] `)
	// eventTime ends an event: its timestamp, " (2023-05-08 13:56)".
	eventTime = regexp.MustCompile(` \((\d{4}-\d{2}-\d{2} \d{2}:\d{2})\)$`)
	// toolParts are what an event did rather than said, which follows its
	// text: "(calls NAME {...})", "(NAME returned {...})".
	toolParts = regexp.MustCompile(`\s*\((?:calls \S+|\S+ returned) [\s\S]*$`)
)

// agentNames are capitalised authors that are not people.
var agentNames = map[string]bool{"Assistant": true, "Model": true, "Agent": true, "System": true, "Bot": true, "AI": true}

// speakerOf returns whose words an event's author stands for, and false
// for the agent's.
func speakerOf(author string) (facts.Speaker, bool) {
	if strings.EqualFold(author, "user") {
		return facts.Speaker{}, true
	}
	r := []rune(author)
	if len(r) == 0 || !unicode.IsUpper(r[0]) || agentNames[author] || strings.ContainsAny(author, "_:/") {
		return facts.Speaker{}, false
	}
	return facts.Speaker{Name: author}, true
}

// listenerOf returns the name of the person the author of event i (a
// person with a name) talks to: the nearest other author of the
// conversation, before it or else after it, when that is a person with a
// name (not the user, whose name the events do not give, nor the agent);
// "" otherwise.
func listenerOf(authors []string, i int) string {
	other := func(j int) (string, bool) {
		if authors[j] == authors[i] {
			return "", false
		}
		if sp, ok := speakerOf(authors[j]); ok && sp.Name != "" {
			return sp.Name, true
		}
		return "", true
	}
	for j := i - 1; j >= 0; j-- {
		if name, ok := other(j); ok {
			return name
		}
	}
	for j := i + 1; j < len(authors); j++ {
		if name, ok := other(j); ok {
			return name
		}
	}
	return ""
}

// extractionReply reads the conversation of an extraction call.
func extractionReply(r *GenerateRequest) map[string]any {
	allowed := map[string]bool{}
	if facts := schemaProperty(r.Schema, "facts"); facts != nil && facts.Items != nil && facts.Items.Properties != nil {
		if topic, ok := facts.Items.Properties.Get("topic"); ok {
			for _, t := range topic.Enum {
				if s, ok := t.(string); ok {
					allowed[s] = true
				}
			}
		}
	}
	_, convo, _ := strings.Cut(lastMessage(r), "The conversation:\n")
	type event struct {
		n    int
		text string
	}
	var events []event
	for _, line := range strings.Split(convo, "\n") {
		if m := eventStart.FindStringSubmatch(line); m != nil {
			n, _ := strconv.Atoi(m[1])
			events = append(events, event{n: n, text: line[len(m[0]):]})
		} else if len(events) > 0 {
			events[len(events)-1].text += "\n" + line
		}
	}
	out := []extractedFact{}
	// users are the facts of the user (author "user"), which name the
	// user once the conversation says their name.
	var users []int
	var name string
	fields := profileFields(r)
	profile := map[string]map[string]any{}
	// episodes are the speakers' last episodes (facts.Fact's Episode), by
	// author, in out.
	episodes := map[string]int{}
	authors := make([]string, len(events))
	for i, e := range events {
		authors[i], _, _ = strings.Cut(e.text, ": ")
	}
	for i, e := range events {
		text := strings.TrimRight(e.text, "\n")
		var at time.Time
		if m := eventTime.FindStringSubmatch(text); m != nil {
			at, _ = time.Parse("2006-01-02 15:04", m[1])
			text = text[:len(text)-len(m[0])]
		}
		author, said, ok := strings.Cut(text, ": ")
		if !ok {
			continue
		}
		speaker, ok := speakerOf(author)
		if !ok {
			continue
		}
		if speaker.Name != "" {
			speaker.To = listenerOf(authors, i) // the user talks to the agent
		}
		said = toolParts.ReplaceAllString(said, "")
		fs, asides := facts.ExtractMessage(said, speaker, at)
		if j, ok := episodes[author]; ok && asides != "" {
			// A message that tells nothing of its own goes on with the
			// episode of the speaker's message before ("It was a
			// transgender poetry reading."), and ends it.
			out[j].Fact += " " + asides
			out[j].Events = append(out[j].Events, e.n)
		}
		delete(episodes, author)
		for _, f := range fs {
			topic := topicOf[f.Kind]
			if !allowed[topic] {
				topic = ""
			}
			if f.Episode {
				episodes[author] = len(out)
			}
			out = append(out, extractedFact{Fact: f.Text, Topic: topic, Events: []int{e.n}, Date: f.Date})
			if speaker.Name == "" {
				users = append(users, len(out)-1)
				if n := facts.UserName(f.Text); n != "" {
					name = n
				}
			}
		}
		if speaker.Name != "" {
			continue // a profile is the user's
		}
		for _, v := range facts.FillProfile(said, fields) {
			schema, field, _ := strings.Cut(v.Key, "\x00")
			if profile[schema] == nil {
				profile[schema] = map[string]any{}
			}
			profile[schema][field] = map[string]any{"value": profileValue(fields, v), "events": []int{e.n}}
		}
	}
	for _, i := range users {
		out[i].Fact = facts.Named(out[i].Fact, name)
	}
	reply := map[string]any{"facts": out}
	if len(profile) > 0 {
		reply["profile"] = profile
	}
	return reply
}

// profileFields returns the profile fields an extraction call asks for:
// the response schema's "profile" object holds, for each schema id, an
// object of fields, each {value, events} with the value's type and enum
// (see package memorybank). Their keys are "schema\x00field".
func profileFields(r *GenerateRequest) []facts.ProfileField {
	profile := schemaProperty(r.Schema, "profile")
	if profile == nil || profile.Properties == nil {
		return nil
	}
	var out []facts.ProfileField
	for s := profile.Properties.Oldest(); s != nil; s = s.Next() {
		if s.Value.Properties == nil {
			continue
		}
		for f := s.Value.Properties.Oldest(); f != nil; f = f.Next() {
			value := schemaProperty(f.Value, "value")
			if value == nil {
				continue
			}
			pf := facts.ProfileField{Key: s.Key + "\x00" + f.Key, Name: f.Key, Type: value.Type}
			for _, e := range value.Enum {
				if v, ok := e.(string); ok {
					pf.Enum = append(pf.Enum, v)
				}
			}
			out = append(out, pf)
		}
	}
	return out
}

// profileValue returns a value FillProfile found as its field's JSON
// type: a number for number and integer fields, a bool for booleans.
func profileValue(fields []facts.ProfileField, v facts.ProfileValue) any {
	for _, f := range fields {
		if f.Key != v.Key {
			continue
		}
		switch f.Type {
		case "number", "integer":
			if x, err := strconv.ParseFloat(v.Value, 64); err == nil {
				return x
			}
		case "boolean":
			return v.Value == "true"
		}
	}
	return v.Value
}

type consolidationAction struct {
	Candidate int    `json:"candidate"`
	Action    string `json:"action"`
	Memory    int    `json:"memory"`
	Fact      string `json:"fact"`
}

var (
	memoryLine    = regexp.MustCompile(`^\[(\d+)\] `)
	candidateLine = regexp.MustCompile(`^\((\d+)\) `)
)

// consolidationReply decides a consolidation call.
func consolidationReply(r *GenerateRequest) map[string]any {
	var existing, candidates []string
	var last *[]string
	text := lastMessage(r)
	existingPart, newPart, _ := strings.Cut(text, "\nNew facts:\n")
	for _, part := range []struct {
		text string
		re   *regexp.Regexp
		into *[]string
	}{{existingPart, memoryLine, &existing}, {newPart, candidateLine, &candidates}} {
		last = nil
		for _, line := range strings.Split(part.text, "\n") {
			if m := part.re.FindStringSubmatch(line); m != nil {
				*part.into = append(*part.into, line[len(m[0]):])
				last = part.into
			} else if last != nil && line != "" {
				(*last)[len(*last)-1] += "\n" + line
			}
		}
	}
	// Once a fact, new or stored, gives the user's name, the facts about
	// the user name them, and are compared so.
	name := ""
	for _, f := range slices.Concat(existing, candidates) {
		if n := facts.UserName(f); n != "" {
			name = n
		}
	}
	for _, list := range [][]string{existing, candidates} {
		for i, f := range list {
			list[i] = facts.Named(f, name)
		}
	}
	actions := []consolidationAction{}
	for _, a := range facts.Consolidate(existing, candidates) {
		actions = append(actions, consolidationAction{Candidate: a.Candidate, Action: a.Action, Memory: a.Memory, Fact: a.Fact})
	}
	return map[string]any{"actions": actions}
}
