package agent

import (
	"context"
	"encoding/json"
	"errors"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/kioku-ai/kioku/client"
	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
)

// memoryTool is the name of the memory file tool: the name of Anthropic's
// memory tool, which Claude models are trained to call.
const memoryTool = "memory"

// memoryCommand declares the memory file tool's input: the parameters of
// the six commands of Anthropic's memory tool, with their names and
// types. Anthropic's schema is a union of six objects, one per command;
// it is declared here as one object whose command is an enum and whose
// other parameters are optional (each says which commands take it),
// because the function declarations of Gemini models take only a subset
// of JSON Schema, and a flat object is what every model accepts. The
// input reaches kioku as the model wrote it: this type only declares it.
type memoryCommand struct {
	Command    string `json:"command" jsonschema:"enum=view,enum=create,enum=str_replace,enum=insert,enum=delete,enum=rename" jsonschema_description:"The command: view a file or a directory, create a file, str_replace text in a file, insert lines into a file, delete a file or a directory, rename (move) one."`
	Path       string `json:"path,omitempty" jsonschema_description:"view, create, str_replace, insert, delete: the file or directory, /memories or a path below it (such as /memories/notes.md)."`
	ViewRange  []int  `json:"view_range,omitempty" jsonschema:"minItems=2,maxItems=2" jsonschema_description:"view of a file, optional: the first and last line to show, from 1; -1 as the last means the end of the file."`
	FileText   string `json:"file_text,omitempty" jsonschema_description:"create: the new file's content."`
	OldStr     string `json:"old_str,omitempty" jsonschema_description:"str_replace: the text to replace, which must appear exactly once in the file."`
	NewStr     string `json:"new_str,omitempty" jsonschema_description:"str_replace: the text that replaces it (may be empty)."`
	InsertLine int    `json:"insert_line,omitempty" jsonschema_description:"insert: the line after which the text goes; 0 puts it before the first line."`
	InsertText string `json:"insert_text,omitempty" jsonschema_description:"insert: the text to insert."`
	OldPath    string `json:"old_path,omitempty" jsonschema_description:"rename: the file or directory to move."`
	NewPath    string `json:"new_path,omitempty" jsonschema_description:"rename: where it goes; nothing may be there yet."`
}

// memoryFilesInstruction tells the model about its memory directory.
const memoryFilesInstruction = "You have a memory directory, /memories, that stays from one conversation to the next. " +
	"Look at it with the memory tool (view /memories) before you answer, and keep there, as files, what you learn that will matter later: " +
	"edit a file rather than write a new one, and keep the directory tidy."

// memoryFileTool is the memory file tool: the model's command goes to
// kioku's MemoryFileService for the session's user (never one the
// arguments name), and kioku's answer comes back as the result, or as the
// error when it reports one.
func (t *turn) memoryFileTool() Tool {
	return Tool{
		Name:        memoryTool,
		Description: "Your memory directory, /memories, which stays across conversations: view, create, edit (str_replace, insert), delete and rename files and directories of notes.",
		Parameters:  memoryCommand{},
		Run: func(ctx context.Context, c *Call) (any, error) {
			var input map[string]any
			if err := json.Unmarshal(c.Args, &input); err != nil || input == nil {
				return nil, errors.New("give the command's parameters as an object, such as {\"command\": \"view\", \"path\": \"/memories\"}")
			}
			in, err := structpb.NewStruct(input)
			if err != nil {
				return nil, err
			}
			res, err := t.a.Kioku.Execute(ctx, &kiokuv1.ExecuteRequest{Parent: client.UserName(c.App, c.User), Input: in})
			if err != nil {
				return nil, err
			}
			if res.GetIsError() {
				return nil, errors.New(res.GetOutput())
			}
			return map[string]any{"output": res.GetOutput()}, nil
		},
	}
}
