package memorybank

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/kioku-ai/kioku/internal/aip"
	"github.com/kioku-ai/kioku/memorybank/memorytype"
)

// The model's replies are checked whole, against their schema and these
// limits, before anything is planned: a reply that fails is refused as a
// whole (nothing of it is stored, and the events it was about stay
// unprocessed), and the generation's attempt fails with a retryable error
// that blames the model (model.BadReply), so that the operation is tried
// again with backoff and, once the model answers well, the same events
// give their memories.

// decodeReply decodes a model's JSON reply strictly (no unknown fields,
// nothing after the document), tolerating a Markdown code fence around it
// (some OpenAI-compatible servers add one).
func decodeReply(text string, v any) error {
	t := strings.TrimSpace(text)
	if strings.HasPrefix(t, "```") {
		t = strings.TrimPrefix(t, "```json")
		t = strings.TrimPrefix(t, "```")
		t = strings.TrimSuffix(strings.TrimSpace(t), "```")
	}
	dec := json.NewDecoder(strings.NewReader(t))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil && dec.Decode(&struct{}{}) != io.EOF {
		err = errors.New("more follows the JSON document")
	}
	if err != nil {
		return fmt.Errorf("it is not the JSON asked for: %w (reply: %s)", err, aip.Truncate(text, 200))
	}
	return nil
}

// parseExtraction checks an extraction reply and returns its candidates:
// a "facts" list of at most MaxFactsPerExtraction facts, each of 1 to
// MaxFactBytes, citing at least one event of the conversation and only
// events of it, so that every memory generated from a session has its
// source events (and DeleteSession with forget_memories finds it). A fact
// whose topic is not one of those asked for is kept without a topic, or
// left out when allowed restricts the topics. The reply's profile fields
// are checked by profileRun.parse (p: the profiles asked for, nil for
// none).
func parseExtraction(text string, topics, allowed []string, conv *conversation, p *profileRun) ([]candidate, []profileCandidate, error) {
	var reply extractionReply
	if err := decodeReply(text, &reply); err != nil {
		return nil, nil, err
	}
	if reply.Facts == nil {
		return nil, nil, fmt.Errorf(`it has no "facts" list (reply: %s)`, aip.Truncate(text, 200))
	}
	if len(reply.Facts) > MaxFactsPerExtraction {
		return nil, nil, fmt.Errorf("it lists %d facts; the limit is %d", len(reply.Facts), MaxFactsPerExtraction)
	}
	fields, err := p.parse(reply.Profile, conv)
	if err != nil {
		return nil, nil, err
	}
	out := make([]candidate, 0, len(reply.Facts))
	for i, f := range reply.Facts {
		fact := strings.TrimSpace(f.Fact)
		if err := validateFact("the fact", fact); err != nil {
			return nil, nil, fmt.Errorf("fact %d: %v", i+1, err)
		}
		if len(f.Events) == 0 {
			return nil, nil, fmt.Errorf("fact %d (%q) cites no events", i+1, aip.Truncate(fact, 100))
		}
		for _, n := range f.Events {
			if n < 1 || n > len(conv.events) {
				return nil, nil, fmt.Errorf("fact %d (%q) cites event %d; the events are numbered 1 to %d", i+1, aip.Truncate(fact, 100), n, len(conv.events))
			}
		}
		var tt []string
		if slices.Contains(topics, f.Topic) {
			tt = []string{f.Topic}
		} else if len(allowed) > 0 {
			continue // outside the allowed topics
		}
		out = append(out, candidate{fact: fact, topics: tt, sources: sourcesOf(conv, f.Events), event: parseFactDate(f.Date), stated: statedAt(conv, f.Events), events: f.Events})
	}
	return withoutProfileFacts(out, fields), fields, nil
}

// parseConsolidation checks a consolidation reply and turns its decisions
// into changes. It refuses, as a whole, a reply without an "actions" list,
// with more actions than new facts and memories shown together, that
// names a new fact or memory that was not shown, creates a new fact twice
// (or creates and skips it), acts twice on one memory, has an unknown
// action, or whose facts are empty or too long. A new fact the model said
// nothing about is created: nothing is lost.
func parseConsolidation(text string, cands []candidate, shown []*memorytype.Memory) ([]planned, error) {
	var reply consolidationReply
	if err := decodeReply(text, &reply); err != nil {
		return nil, err
	}
	if reply.Actions == nil {
		return nil, fmt.Errorf(`it has no "actions" list (reply: %s)`, aip.Truncate(text, 200))
	}
	if most := len(cands) + len(shown); len(reply.Actions) > most {
		return nil, fmt.Errorf("it has %d actions for %d new facts and %d memories shown; at most one action for each new fact and one for each memory (%d) make sense", len(reply.Actions), len(cands), len(shown), most)
	}
	var out []planned
	handled := make([]bool, len(cands))
	alone := make([]string, len(cands)) // a new fact's action without a memory
	touched := map[int]string{}
	for i, a := range reply.Actions {
		if a.Candidate < 1 || a.Candidate > len(cands) {
			return nil, fmt.Errorf("consolidation action %d names new fact %d, but only %d were shown", i+1, a.Candidate, len(cands))
		}
		c := &cands[a.Candidate-1]
		handled[a.Candidate-1] = true
		memory := func() (*memorytype.Memory, error) {
			if a.Memory < 1 || a.Memory > len(shown) {
				return nil, fmt.Errorf("consolidation action %d (%s) names memory %d, but only memories 1 to %d were shown", i+1, a.Action, a.Memory, len(shown))
			}
			if prev, ok := touched[a.Memory]; ok {
				return nil, fmt.Errorf("consolidation acts twice on memory %d (%s, then %s)", a.Memory, prev, a.Action)
			}
			touched[a.Memory] = a.Action
			return shown[a.Memory-1], nil
		}
		once := func() error {
			if prev := alone[a.Candidate-1]; prev != "" {
				return fmt.Errorf("consolidation action %d %ss new fact %d, which action %s already", i+1, strings.ToLower(a.Action), a.Candidate, prev)
			}
			alone[a.Candidate-1] = fmt.Sprintf("%d did (%s)", i+1, a.Action)
			return nil
		}
		fact := strings.TrimSpace(a.Fact)
		switch a.Action {
		case "CREATE":
			if err := once(); err != nil {
				return nil, err
			}
			if fact == "" {
				fact = c.fact
			}
			if err := validateFact("the consolidated fact", fact); err != nil {
				return nil, fmt.Errorf("consolidation action %d: %v", i+1, err)
			}
			out = append(out, planned{action: memorytype.Created, fact: fact, cand: c})
		case "UPDATE":
			m, err := memory()
			if err != nil {
				return nil, err
			}
			if err := validateFact("the consolidated fact", fact); err != nil {
				return nil, fmt.Errorf("consolidation action %d: %v", i+1, err)
			}
			out = append(out, planned{action: memorytype.Updated, existing: m, fact: fact, cand: c})
		case "DELETE":
			m, err := memory()
			if err != nil {
				return nil, err
			}
			out = append(out, planned{action: memorytype.Deleted, existing: m, cand: c})
		case "SKIP":
			if a.Memory == 0 {
				if err := once(); err != nil {
					return nil, err
				}
				continue
			}
			m, err := memory()
			if err != nil {
				return nil, err
			}
			// The fact is known already; the memory gains the new sources.
			out = append(out, planned{action: memorytype.ActionUnspecified, existing: m, cand: c})
		default:
			return nil, fmt.Errorf("consolidation action %d has the unknown action %q", i+1, a.Action)
		}
	}
	for i := range cands {
		if !handled[i] {
			out = append(out, planned{action: memorytype.Created, fact: cands[i].fact, cand: &cands[i]})
		}
	}
	return out, nil
}
