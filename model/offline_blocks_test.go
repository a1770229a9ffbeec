package model_test

import (
	"reflect"
	"testing"

	"github.com/kioku-ai/kioku/model"
)

// blocksReply is the reply of the rewrite of core memory blocks
// (internal/workflow's rewrite.go).
type blocksReply struct {
	Blocks []struct {
		Label  string `json:"label"`
		Value  string `json:"value"`
		Events []int  `json:"events"`
	} `json:"blocks"`
}

// rewriteCall is a rewrite call as internal/workflow sends it.
func rewriteCall(blocksJSON, conversation string) *model.GenerateRequest {
	return &model.GenerateRequest{
		System:   "You keep the core memory of an assistant ...",
		Messages: []model.Message{{Role: "user", Text: "The blocks (JSON):\n" + blocksJSON + "\n\nThe conversation:\n" + conversation}},
		Schema:   model.SchemaFor(&blocksReply{}),
	}
}

// TestOfflineExtractorHumanBlock: the offline rule for the human block.
// A fact it says already is left out, a changed one replaces its line at
// the end, a new one is appended, the user is named once the name is
// known; past the limit the oldest lines go, and a fact longer than the
// limit by itself is left out; other blocks, and a conversation with no
// new fact, get no rewrite.
func TestOfflineExtractorHumanBlock(t *testing.T) {
	conv := "[1] user: I have a cat called Miso. (2026-05-08 09:00)\n[2] hana: Lovely! (2026-05-08 09:00)\n[3] user: I moved to Kyoto. I love green tea. (2026-05-08 09:01)\n"
	for name, c := range map[string]struct {
		blocks string
		value  string // "": no rewrite
		events []int
	}{
		"appended and replaced": {
			blocks: `[{"label": "persona", "limit": 100, "value": "I am Hana."}, {"label": "human", "limit": 200, "value": "The user has a cat called Miso.\nThe user lives in Osaka.\nThe user is Ann."}]`,
			value:  "Ann has a cat called Miso.\nThe user is Ann.\nAnn moved from Osaka to Kyoto and lives there.\nAnn loves green tea.",
			events: []int{3},
		},
		"oldest dropped past the limit": {
			blocks: `[{"label": "human", "limit": 70, "value": "The user plays the piano."}]`,
			value:  "The user moved to Kyoto and lives there.\nThe user loves green tea.",
			events: []int{3},
		},
		"longer than the limit": {
			blocks: `[{"label": "human", "limit": 28, "value": ""}]`,
			value:  "The user loves green tea.",
			events: []int{3},
		},
		"nothing new": {
			blocks: `[{"label": "human", "limit": 200, "value": "The user has a cat called Miso.\nThe user moved to Kyoto and lives there.\nThe user loves green tea."}]`,
		},
		"no human block": {
			blocks: `[{"label": "goals", "limit": 200, "value": ""}]`,
		},
	} {
		t.Run(name, func(t *testing.T) {
			var got blocksReply
			offlineReply(t, rewriteCall(c.blocks, conv), &got)
			if c.value == "" {
				if len(got.Blocks) != 0 {
					t.Fatalf("rewrote %+v; want none", got.Blocks)
				}
				return
			}
			if len(got.Blocks) != 1 || got.Blocks[0].Label != "human" || got.Blocks[0].Value != c.value || !reflect.DeepEqual(got.Blocks[0].Events, c.events) {
				t.Fatalf("reply %+v; want human = %q citing %v", got.Blocks, c.value, c.events)
			}
		})
	}
}
