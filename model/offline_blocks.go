package model

import (
	"encoding/json"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/kioku-ai/kioku/internal/facts"
)

// HumanBlock is the label of the core memory block about the user, which
// the offline extractor keeps filled with the facts it extracts.
const HumanBlock = "human"

// shownBlock is a block as the rewrite call of core memory blocks shows
// it (internal/workflow's rewrite): its message holds them as JSON after
// "The blocks (JSON):\n", then the conversation after
// "\n\nThe conversation:\n".
type shownBlock struct {
	Label string `json:"label"`
	Limit int    `json:"limit"`
	Value string `json:"value"`
}

// blocksReply answers the rewrite of core memory blocks (a response
// schema with "blocks") by the offline rule for the human block: its
// value is a list of lines, oldest first. Each fact extracted from the
// conversation (as extractionReply extracts them) that the block already
// says is left out; one that changes a line (the same relation with
// another value, as consolidation decides it: facts.Consolidate) takes
// that line's place at the end; any other is appended. Once the user's
// name is known (from a line or a fact), facts about the user are written
// with it. When the lines pass the block's limit, the oldest go first
// (the memory bank keeps them as memories); a fact longer than the limit
// by itself is left out. Other blocks are left as they are: rewriting
// them takes a language model.
func blocksReply(r *GenerateRequest) map[string]any {
	out := []map[string]any{}
	reply := map[string]any{"blocks": out}
	_, rest, ok := strings.Cut(lastMessage(r), "The blocks (JSON):\n")
	if !ok {
		return reply
	}
	js, _, _ := strings.Cut(rest, "\n\nThe conversation:\n")
	var shown []shownBlock
	if json.Unmarshal([]byte(js), &shown) != nil {
		return reply
	}
	i := slices.IndexFunc(shown, func(b shownBlock) bool { return b.Label == HumanBlock })
	if i < 0 {
		return reply
	}
	human := shown[i]
	extracted, _ := extractionReply(r)["facts"].([]extractedFact)
	value, events := humanValue(human.Value, human.Limit, extracted)
	if value != human.Value {
		reply["blocks"] = append(out, map[string]any{"label": HumanBlock, "value": value, "events": events})
	}
	return reply
}

// humanValue returns the human block's value with the facts added by
// blocksReply's rule, and the events of the facts that changed it.
func humanValue(value string, limit int, extracted []extractedFact) (string, []int) {
	var lines []string
	for _, l := range strings.Split(value, "\n") {
		if strings.TrimSpace(l) != "" {
			lines = append(lines, l)
		}
	}
	var cands []string
	var cited [][]int
	for _, f := range extracted {
		if utf8.RuneCountInString(f.Fact) <= limit {
			cands = append(cands, f.Fact)
			cited = append(cited, f.Events)
		}
	}
	if len(cands) == 0 {
		return value, nil
	}
	name := ""
	for _, f := range slices.Concat(lines, cands) {
		if n := facts.UserName(f); n != "" {
			name = n
		}
	}
	for _, list := range [][]string{lines, cands} {
		for i, f := range list {
			list[i] = facts.Named(f, name)
		}
	}
	replaced := map[int]bool{}
	var added []string
	var addedEvents [][]int
	for _, a := range facts.Consolidate(lines, cands) {
		if a.Action != facts.Create && a.Action != facts.Update {
			continue
		}
		if a.Action == facts.Update {
			replaced[a.Memory-1] = true
		}
		added = append(added, a.Fact)
		addedEvents = append(addedEvents, cited[a.Candidate-1])
	}
	if len(added) == 0 {
		return value, nil
	}
	var kept []string
	for i, l := range lines {
		if !replaced[i] {
			kept = append(kept, l)
		}
	}
	old := len(kept)
	kept = append(kept, added...)
	for len(kept) > 1 && utf8.RuneCountInString(strings.Join(kept, "\n")) > limit {
		kept, old = kept[1:], old-1
	}
	// The events of the facts added that stayed.
	var events []int
	for i := range added {
		if old+i < 0 {
			continue
		}
		for _, e := range addedEvents[i] {
			if !slices.Contains(events, e) {
				events = append(events, e)
			}
		}
	}
	slices.Sort(events)
	return strings.Join(kept, "\n"), events
}
