package adk

import (
	"strings"

	"google.golang.org/adk/v2/agent"
	"google.golang.org/adk/v2/agent/llmagent"

	"github.com/kioku-ai/kioku/client"
	"github.com/kioku-ai/kioku/internal/memorytools"
)

// CoreMemoryInstruction returns an llmagent.InstructionProvider: the
// instruction, then the core memory blocks of the invocation's app and
// user (the app's shared blocks and the user's, as kioku's agent runtime
// renders them: a <core_memory> section that changes only when a block
// does), read from kioku at every model call. As with every
// InstructionProvider, ADK fills no {key} placeholders in it.
func CoreMemoryInstruction(c *client.Client, instruction string) llmagent.InstructionProvider {
	return func(ctx agent.ReadonlyContext) (string, error) {
		core, err := memorytools.CoreMemory(ctx, memorytools.Target{Kioku: c, App: ctx.AppName(), User: ctx.UserID()})
		if err != nil || core == "" {
			return instruction, err
		}
		return strings.TrimSpace(instruction + "\n\n" + core), nil
	}
}
