package agent

import (
	"encoding/json"
	"fmt"
	"regexp"

	"google.golang.org/genai"
	"google.golang.org/protobuf/types/known/structpb"

	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/internal/content"
)

// placeholder matches a {key} or {key?} of an instruction.
var placeholder = regexp.MustCompile(`\{((?:app:|user:|temp:)?[A-Za-z_][A-Za-z0-9_]*)(\??)\}`)

// fillInstruction replaces the instruction's placeholders with state
// values: strings as they are, other values as JSON.
func fillInstruction(instruction string, state map[string]any) (string, error) {
	var missing string
	out := placeholder.ReplaceAllStringFunc(instruction, func(m string) string {
		sub := placeholder.FindStringSubmatch(m)
		v, ok := state[sub[1]]
		if !ok || v == nil {
			if sub[2] == "" && missing == "" {
				missing = sub[1]
			}
			return ""
		}
		if s, ok := v.(string); ok {
			return s
		}
		b, _ := json.Marshal(v)
		return string(b)
	})
	if missing != "" {
		return "", fmt.Errorf("agent: the instruction names the state key %q, which this session does not have (write {%s?} to make it optional)", missing, missing)
	}
	return out, nil
}

func actions(delta map[string]any) (*kiokuv1.EventActions, error) {
	s, err := structpb.NewStruct(delta)
	if err != nil {
		return nil, fmt.Errorf("agent: state delta: %w", err)
	}
	return &kiokuv1.EventActions{StateDelta: s}, nil
}

// modelEvent builds the event of a model reply.
func modelEvent(t *turn, resp *genai.GenerateContentResponse, reply *genai.Content) (*kiokuv1.Event, error) {
	c, err := content.GenaiToKioku(reply)
	if err != nil {
		return nil, err
	}
	ev := &kiokuv1.Event{InvocationId: t.invocation, Author: t.a.name(), Content: c, ModelVersion: resp.ModelVersion, TurnComplete: true}
	if len(resp.Candidates) > 0 {
		ev.FinishReason = string(resp.Candidates[0].FinishReason)
	}
	if u := resp.UsageMetadata; u != nil {
		ev.UsageMetadata, _ = structpb.NewStruct(map[string]any{
			"promptTokenCount": float64(u.PromptTokenCount), "candidatesTokenCount": float64(u.CandidatesTokenCount), "totalTokenCount": float64(u.TotalTokenCount),
		})
	}
	return ev, nil
}

// contentsOf turns stored events into the model's history: user events as
// user turns, the agent's replies as model turns, tool results as user
// turns of function responses, and a compaction event (the first of the
// compacted view) as a user turn holding its summary; other compaction
// events are left out. Thoughts are left out, and so are display names of
// inline and file data (the Gemini API refuses them). turns[i] is the
// invocation (turn) of contents[i], "" for a summary.
func contentsOf(events []*kiokuv1.Event) (contents []*genai.Content, turns []string, err error) {
	for i, e := range events {
		c := e.GetContent()
		if c == nil || e.GetPartial() {
			continue
		}
		if e.GetActions().GetCompaction() != nil {
			if i == 0 {
				contents, turns = append(contents, summaryContent(e)), append(turns, "")
			}
			continue
		}
		role := genai.RoleModel
		if e.GetAuthor() == "user" || c.GetRole() == "user" {
			role = genai.RoleUser
		}
		full, err := content.KiokuToGenai(c)
		if err != nil {
			return nil, nil, fmt.Errorf("agent: event %s: %w", e.GetId(), err)
		}
		gc := &genai.Content{Role: role}
		for _, p := range full.Parts {
			if p.Thought {
				continue
			}
			if p.InlineData != nil {
				p.InlineData.DisplayName = ""
			}
			if p.FileData != nil {
				p.FileData.DisplayName = ""
			}
			gc.Parts = append(gc.Parts, p)
		}
		if len(gc.Parts) > 0 {
			contents, turns = append(contents, gc), append(turns, e.GetInvocationId())
		}
	}
	return contents, turns, nil
}
