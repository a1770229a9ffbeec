package main

import (
	"regexp"
	"strconv"
	"strings"

	"github.com/kioku-ai/kioku/model/modeltest"
)

// hana answers the companion's model calls the way a model following the
// instruction would, from what the request carries: the user's last
// message, the function responses, the affinity and the memories kioku
// preloaded into the system instruction.
func hana(c modeltest.Call) modeltest.Reply {
	if len(c.Tools) == 0 {
		return modeltest.Reply{Text: "this fake only plays Hana; kioku asked for something else"}
	}
	last := c.Messages[len(c.Messages)-1].Text
	user := ""
	for i := len(c.Messages) - 1; i >= 0; i-- {
		if m := c.Messages[i]; m.Role == "user" && !strings.HasPrefix(m.Text, "response ") {
			user = m.Text
			break
		}
	}
	affinity := 50
	if m := affinityLine.FindStringSubmatch(c.System); m != nil {
		affinity, _ = strconv.Atoi(m[1])
	}
	answer := func(dialogue, narration, emotion, scene string, level int) modeltest.Reply {
		return fnCall("final_answer", map[string]any{
			"dialogue": dialogue, "narration": narration, "emotion": emotion, "scene": scene, "affinity_level": level,
		})
	}
	switch {
	case strings.HasPrefix(user, stagePrefix):
		if facts := remembered(c.System); len(facts) > 0 {
			return answer("Good morning! I remember: "+facts[0], "Hana waves from behind the flower stall.", "happy", "cafe", affinity+3)
		}
		return answer("Oh, hello! Welcome to my little flower stall.", "Hana looks up from a bucket of tulips.", "shy", "cafe", affinity+3)
	case strings.Contains(user, "cat"):
		if !strings.HasPrefix(last, "response save_to_memory") {
			return fnCall("save_to_memory", map[string]any{"fact": "The user has a cat called Miso."})
		}
		// Proposes +25; the program moves at most 10.
		return answer("A cat called Miso? I would love to meet her!", "Hana's eyes light up.", "excited", "park", affinity+25)
	case strings.Contains(user, "call me"):
		if !strings.HasPrefix(last, "response set_nickname") {
			return fnCall("set_nickname", map[string]any{"nickname": "Aki"})
		}
		return answer("Aki it is, then.", "Hana repeats the name softly.", "shy", "street", affinity+2)
	case strings.Contains(user, "boring"):
		return answer("That was not very kind.", "Hana crosses her arms.", "angry", "street", affinity-4)
	default:
		return answer("I see.", "Hana nods.", "neutral", "home", affinity)
	}
}

var affinityLine = regexp.MustCompile(`affinity toward them, 0 to 100: (\d+)`)

// remembered returns the facts the agent preloaded into the instruction.
func remembered(system string) []string {
	_, list, ok := strings.Cut(system, "What you remember about the user")
	if !ok {
		return nil
	}
	var facts []string
	for _, line := range strings.Split(list, "\n") {
		if f, ok := strings.CutPrefix(line, "- "); ok {
			facts = append(facts, f)
		}
	}
	return facts
}

func fnCall(name string, args map[string]any) modeltest.Reply {
	return modeltest.Reply{Parts: []map[string]any{{"functionCall": map[string]any{"name": name, "args": args}}}}
}
