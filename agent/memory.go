package agent

import (
	"context"
	"errors"
	"fmt"

	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/internal/memorytools"
	"github.com/kioku-ai/kioku/resource"
)

// preload returns the instruction text of the session user's structured
// profiles and of the memories relevant to the message, each with its
// date, or "" (memorytools.Preload, which the MCP server's preload prompt
// renders too).
func (t *turn) preload(ctx context.Context, message string) (string, error) {
	k := t.a.PreloadTopK
	if k < 0 {
		return "", nil
	}
	if k == 0 {
		k = 5
	}
	text, err := memorytools.Preload(ctx, t.target(), message, k)
	if err != nil {
		return "", fmt.Errorf("agent: %w", err)
	}
	return text, nil
}

// target is whom the memory tools act for: the session's app and user.
func (t *turn) target() memorytools.Target {
	return memorytools.Target{Kioku: t.a.Kioku, App: t.app, User: t.user}
}

// tools returns the memory tools (package memorytools, shared with the MCP
// server) and the caller's tools.
func (t *turn) tools() []Tool {
	tools := []Tool{{
		Name:        memorytools.SearchConversation,
		Description: memorytools.SearchConversationDescription,
		Parameters:  memorytools.Query{},
		Run: func(ctx context.Context, c *Call) (any, error) {
			var in memorytools.Query
			if err := c.Decode(&in); err != nil {
				return nil, errors.New("give a query")
			}
			return memorytools.SearchConversationTool(ctx, t.target(), in)
		},
	}, {
		Name:        memorytools.LoadMemory,
		Description: memorytools.LoadMemoryDescription,
		Parameters:  memorytools.Query{},
		Run: func(ctx context.Context, c *Call) (any, error) {
			var in memorytools.Query
			if err := c.Decode(&in); err != nil {
				return nil, errors.New("give a query")
			}
			return memorytools.LoadMemoryTool(ctx, t.target(), in, 5)
		},
	}}
	if t.a.Memory.Mode != MemoryNever {
		tools = append(tools, Tool{
			Name:        memorytools.SaveToMemory,
			Description: memorytools.SaveToMemoryDescription,
			Parameters:  memorytools.Fact{},
			Run: func(ctx context.Context, c *Call) (any, error) {
				var in memorytools.Fact
				if err := c.Decode(&in); err != nil {
					return nil, errors.New("give the fact to remember")
				}
				// The scope is the session's user, whatever the arguments
				// say; the source is this session and the turn's message.
				src := &kiokuv1.MemorySource{Session: t.name}
				if len(t.res.Events) > 0 {
					src.EventIds = []string{t.res.Events[0].GetId()}
				}
				saved, err := memorytools.SaveToMemoryTool(ctx, t.target(), in, src)
				if err != nil {
					return nil, err
				}
				t.res.MemoryOperations = append(t.res.MemoryOperations, saved.Operation)
				return saved, nil
			},
		})
	}
	if t.a.MemoryFiles {
		tools = append(tools, t.memoryFileTool())
	}
	if t.coreMemory {
		tools = append(tools, Tool{
			Name:        memorytools.CoreMemoryAppend,
			Description: memorytools.CoreMemoryAppendDescription,
			Parameters:  memorytools.BlockAppend{},
			Run: func(ctx context.Context, c *Call) (any, error) {
				var in memorytools.BlockAppend
				if err := c.Decode(&in); err != nil {
					return nil, errors.New("give the label and the content")
				}
				return memorytools.CoreMemoryAppendTool(ctx, t.target(), in)
			},
		}, Tool{
			Name:        memorytools.CoreMemoryReplace,
			Description: memorytools.CoreMemoryReplaceDescription,
			Parameters:  memorytools.BlockReplace{},
			Run: func(ctx context.Context, c *Call) (any, error) {
				var in memorytools.BlockReplace
				if err := c.Decode(&in); err != nil {
					return nil, errors.New("give the label, old_content and new_content")
				}
				return memorytools.CoreMemoryReplaceTool(ctx, t.target(), in)
			},
		})
	}
	return append(tools, t.a.Tools...)
}

// afterTurn applies the memory policy and counts the turn.
func (t *turn) afterTurn(ctx context.Context) error {
	p := t.a.Memory
	generate := p.Mode == MemoryEveryTurn
	if p.Mode == MemoryEveryNTurns && p.N > 0 {
		n, _ := t.state[turnsKey].(float64)
		n++
		count := &kiokuv1.Event{InvocationId: t.invocation, Author: t.a.name()}
		var err error
		if count.Actions, err = actions(map[string]any{turnsKey: n}); err != nil {
			return err
		}
		if err := t.append(ctx, count); err != nil {
			return err
		}
		generate = int(n)%p.N == 0
	}
	if !generate {
		return nil
	}
	op, err := t.a.Kioku.GenerateMemories(ctx, &kiokuv1.GenerateMemoriesRequest{
		Parent: resource.AppName(t.app),
		Source: &kiokuv1.GenerateMemoriesRequest_SessionSource{SessionSource: &kiokuv1.SessionSource{Session: t.name}},
	})
	if err != nil {
		return fmt.Errorf("agent: starting memory generation: %w", err)
	}
	t.res.MemoryOperations = append(t.res.MemoryOperations, op.GetName())
	return nil
}
