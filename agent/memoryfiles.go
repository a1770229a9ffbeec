package agent

import (
	"context"

	"github.com/kioku-ai/kioku/internal/memorytools"
)

// memoryFilesInstruction tells the model about its memory directory.
const memoryFilesInstruction = "You have a memory directory, /memories, that stays from one conversation to the next. " +
	"Look at it with the memory tool (view /memories) before you answer, and keep there, as files, what you learn that will matter later: " +
	"edit a file rather than write a new one, and keep the directory tidy."

// memoryFileTool is the memory file tool (memorytools.MemoryTool, the name
// of Anthropic's memory tool, which Claude models are trained to call):
// the model's command goes to kioku's MemoryFileService for the session's
// user (never one the arguments name), and kioku's answer comes back as
// the result, or as the error when it reports one.
func (t *turn) memoryFileTool() Tool {
	return Tool{
		Name:        memorytools.Memory,
		Description: memorytools.MemoryDescription,
		Parameters:  memorytools.MemoryCommand{},
		Run: func(ctx context.Context, c *Call) (any, error) {
			return memorytools.MemoryTool(ctx, t.target(), c.Args)
		},
	}
}
