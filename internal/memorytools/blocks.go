package memorytools

import (
	"context"
	"errors"
	"fmt"
	"html"
	"strings"
	"unicode/utf8"

	"connectrpc.com/connect"

	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/resource"
)

// Core memory (MemGPT's working context): the app's shared blocks and the
// user's blocks, rendered in every instruction (CoreMemory) and edited by
// the model with core_memory_append and core_memory_replace, MemGPT's
// names. The tools edit the user's own blocks only: an app's shared block
// is the same for every user, so no conversation edits it, whatever the
// key (the app changes it with UpdateBlock). kioku refuses an edit of a
// read-only block, or one past the
// block's limit, with an error naming the limit and the current size,
// which the model reads as the tool's error.

// The core memory tools' names.
const (
	CoreMemoryAppend  = "core_memory_append"
	CoreMemoryReplace = "core_memory_replace"
)

// The core memory tools' descriptions.
const (
	CoreMemoryAppendDescription  = "Add a line to a block of your core memory (the blocks in <core_memory>, which you see in every conversation): keep there what you must always have in mind about the user or yourself."
	CoreMemoryReplaceDescription = "Replace text in a block of your core memory (<core_memory>): old_content must be the block's text exactly, and occur once; an empty new_content deletes it. Use it to correct or shorten a block."
)

// BlockAppend is the input of core_memory_append.
type BlockAppend struct {
	Label   string `json:"label" jsonschema_description:"The block's label, as <core_memory> shows it (such as human or persona)."`
	Content string `json:"content" jsonschema_description:"The text to add, on a new line."`
}

// BlockReplace is the input of core_memory_replace.
type BlockReplace struct {
	Label      string `json:"label" jsonschema_description:"The block's label, as <core_memory> shows it (such as human or persona)."`
	OldContent string `json:"old_content" jsonschema_description:"The text to replace, exactly as the block holds it."`
	NewContent string `json:"new_content" jsonschema_description:"The text to put in its place; empty deletes it."`
}

// BlockEdited is the result of core_memory_append and core_memory_replace:
// the block as it is now.
type BlockEdited struct {
	Label string `json:"label" jsonschema_description:"The block's label."`
	Value string `json:"value" jsonschema_description:"The block's text after the edit."`
	Chars int    `json:"chars" jsonschema_description:"How many characters the block holds."`
	Limit int    `json:"limit" jsonschema_description:"The most characters the block may hold."`
}

// CoreMemoryAppendTool runs core_memory_append on the target's block.
func CoreMemoryAppendTool(ctx context.Context, t Target, in BlockAppend) (BlockEdited, error) {
	if strings.TrimSpace(in.Content) == "" {
		return BlockEdited{}, errors.New("give the content to append")
	}
	return editBlock(ctx, t, in.Label, func(name string) (*kiokuv1.Block, error) {
		return t.Kioku.AppendToBlock(ctx, &kiokuv1.AppendToBlockRequest{Name: name, Content: in.Content})
	})
}

// CoreMemoryReplaceTool runs core_memory_replace on the target's block.
func CoreMemoryReplaceTool(ctx context.Context, t Target, in BlockReplace) (BlockEdited, error) {
	if in.OldContent == "" {
		return BlockEdited{}, errors.New("give old_content, the text to replace as the block holds it")
	}
	return editBlock(ctx, t, in.Label, func(name string) (*kiokuv1.Block, error) {
		return t.Kioku.ReplaceInBlock(ctx, &kiokuv1.ReplaceInBlockRequest{Name: name, OldContent: in.OldContent, NewContent: in.NewContent})
	})
}

// editBlock edits the user's block of the label. It never edits an app's
// shared block, even with an app key: every user's agent sees that block,
// so one conversation (and whatever was injected into it) must not
// rewrite it; the app changes its shared blocks with UpdateBlock.
func editBlock(ctx context.Context, t Target, label string, edit func(name string) (*kiokuv1.Block, error)) (BlockEdited, error) {
	if strings.TrimSpace(label) == "" {
		return BlockEdited{}, errors.New("give the label of a block of <core_memory>")
	}
	b, err := edit(resource.UserName(t.App, t.User) + "/blocks/" + label)
	if connect.CodeOf(err) == connect.CodeNotFound {
		if _, shared := t.Kioku.GetBlock(ctx, &kiokuv1.GetBlockRequest{Name: resource.AppName(t.App) + "/blocks/" + label}); shared == nil {
			return BlockEdited{}, fmt.Errorf("the block %q is shared by every user of the app: it cannot be edited from a conversation", label)
		}
		return BlockEdited{}, fmt.Errorf("there is no block %q of this user in <core_memory>", label)
	}
	if err != nil {
		return BlockEdited{}, err
	}
	return BlockEdited{Label: b.GetLabel(), Value: b.GetValue(), Chars: utf8.RuneCountInString(b.GetValue()), Limit: int(b.GetLimit())}, nil
}

// CoreMemory returns the core memory section of an instruction: the app's
// shared blocks, then the user's (a user's block hides the app's of the
// same label), in label order, or "" when there are none. It changes only
// when a block does, so that it can stay in the stable part of a prompt.
func CoreMemory(ctx context.Context, t Target) (string, error) {
	var blocks []*kiokuv1.Block
	byLabel := map[string]int{}
	for _, parent := range []string{resource.AppName(t.App), resource.UserName(t.App, t.User)} {
		for b, err := range t.Kioku.AllBlocks(ctx, &kiokuv1.ListBlocksRequest{Parent: parent}) {
			if err != nil {
				return "", fmt.Errorf("reading the core memory blocks: %w", err)
			}
			if i, ok := byLabel[b.GetLabel()]; ok {
				blocks[i] = b
				continue
			}
			byLabel[b.GetLabel()] = len(blocks)
			blocks = append(blocks, b)
		}
	}
	if len(blocks) == 0 {
		return "", nil
	}
	var s strings.Builder
	s.WriteString("<core_memory>\nYour core memory: blocks you always see. Edit them with core_memory_append and core_memory_replace; each holds at most its limit of characters.\n")
	for _, b := range blocks {
		fmt.Fprintf(&s, "<%s chars=\"%d\" limit=\"%d\"", b.GetLabel(), utf8.RuneCountInString(b.GetValue()), b.GetLimit())
		if b.GetReadOnly() {
			s.WriteString(` read_only="true"`)
		}
		if d := b.GetDescription(); d != "" {
			fmt.Fprintf(&s, " description=\"%s\"", html.EscapeString(d))
		}
		fmt.Fprintf(&s, ">\n%s\n</%s>\n", b.GetValue(), b.GetLabel())
	}
	s.WriteString("</core_memory>")
	return s.String(), nil
}
