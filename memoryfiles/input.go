package memoryfiles

import (
	"fmt"
	"math"
	"strings"
)

// The commands of the memory tool.
const (
	CommandView       = "view"
	CommandCreate     = "create"
	CommandStrReplace = "str_replace"
	CommandInsert     = "insert"
	CommandDelete     = "delete"
	CommandRename     = "rename"
)

// Commands are the memory tool's commands, in the order its documentation
// gives them.
var Commands = []string{CommandView, CommandCreate, CommandStrReplace, CommandInsert, CommandDelete, CommandRename}

// toolError is an answer of the tool that reports an error: the command
// did nothing, and the model reads why.
type toolError struct{ msg string }

func (e *toolError) Error() string { return e.msg }

func failf(format string, a ...any) error { return &toolError{msg: fmt.Sprintf(format, a...)} }

// command is one parsed command of the tool: its parameters checked for
// presence and type, its paths cleaned (the raw ones are kept for the
// answers, which echo what the model wrote).
type command struct {
	name string
	// path is the clean path of every command but rename; rawPath as
	// given.
	path, rawPath string
	// oldPath and newPath are rename's, clean and raw.
	oldPath, newPath       string
	rawOldPath, rawNewPath string
	// viewRange is view's [start, end] when given.
	viewRange []int
	fileText  string
	oldStr    string
	newStr    string
	// insertLine is insert's line as given, still to be checked against
	// the file (it may not be an integer).
	insertLine float64
	insertText string
}

// parseCommand reads the tool's input object: the command and the
// parameters it takes (others are ignored, as the tool's own
// implementations ignore them).
func parseCommand(in map[string]any) (*command, error) {
	raw, ok := in["command"]
	if !ok || raw == nil {
		return nil, failf("Error: Parameter `command` is required: one of %s", strings.Join(Commands, ", "))
	}
	name, ok := raw.(string)
	if !ok {
		return nil, failf("Error: Parameter `command` must be a string: one of %s", strings.Join(Commands, ", "))
	}
	c := &command{name: name}
	p := params{in: in, command: name}
	var err error
	switch name {
	case CommandView:
		if c.path, c.rawPath, err = p.path("path"); err != nil {
			return nil, err
		}
		if r, ok := in["view_range"]; ok && r != nil {
			if c.viewRange, ok = intPair(r); !ok {
				return nil, failf("Error: Invalid `view_range`: %s. It should be a list of two integers.", show(r))
			}
		}
	case CommandCreate:
		if c.path, c.rawPath, err = p.path("path"); err != nil {
			return nil, err
		}
		c.fileText, err = p.text("file_text", true)
	case CommandStrReplace:
		if c.path, c.rawPath, err = p.path("path"); err != nil {
			return nil, err
		}
		if c.oldStr, err = p.text("old_str", false); err != nil {
			return nil, err
		}
		c.newStr, err = p.text("new_str", true)
	case CommandInsert:
		if c.path, c.rawPath, err = p.path("path"); err != nil {
			return nil, err
		}
		switch v := in["insert_line"].(type) {
		case float64:
			c.insertLine = v
		case nil:
			return nil, p.missing("insert_line")
		default:
			return nil, failf("Error: Parameter `insert_line` of command insert must be an integer, not %s", show(v))
		}
		c.insertText, err = p.text("insert_text", true)
	case CommandDelete:
		c.path, c.rawPath, err = p.path("path")
	case CommandRename:
		if c.oldPath, c.rawOldPath, err = p.path("old_path"); err != nil {
			return nil, err
		}
		c.newPath, c.rawNewPath, err = p.path("new_path")
	default:
		return nil, failf("Error: Unrecognized command %s. The allowed commands for the memory tool are: %s", quotePath(name), strings.Join(Commands, ", "))
	}
	if err != nil {
		return nil, err
	}
	return c, nil
}

// params reads the parameters of one command.
type params struct {
	in      map[string]any
	command string
}

func (p params) missing(name string) error {
	return failf("Error: Parameter `%s` is required for command: %s", name, p.command)
}

// path reads a path parameter and cleans it (CleanPath).
func (p params) path(name string) (clean, raw string, err error) {
	raw, err = p.text(name, false)
	if err != nil {
		return "", "", err
	}
	clean, err = CleanPath(raw)
	return clean, raw, err
}

// text reads a string parameter of at most MaxFileBytes; an empty one
// counts as missing unless emptyOK.
func (p params) text(name string, emptyOK bool) (string, error) {
	v, ok := p.in[name]
	if !ok || v == nil {
		return "", p.missing(name)
	}
	s, ok := v.(string)
	switch {
	case !ok:
		return "", failf("Error: Parameter `%s` of command %s must be a string, not %s", name, p.command, show(v))
	case s == "" && !emptyOK:
		return "", p.missing(name)
	case len(s) > MaxFileBytes:
		return "", failf("Error: Parameter `%s` is %s bytes; the limit is %s bytes (the size of a whole file)", name, group(len(s)), group(MaxFileBytes))
	}
	return s, nil
}

// intPair reads a list of two integers (JSON numbers with no fraction).
func intPair(v any) ([]int, bool) {
	list, ok := v.([]any)
	if !ok || len(list) != 2 {
		return nil, false
	}
	out := make([]int, 2)
	for i, x := range list {
		f, ok := x.(float64)
		if !ok || f != math.Trunc(f) || math.Abs(f) > MaxFileBytes+1 {
			return nil, false
		}
		out[i] = int(f)
	}
	return out, true
}

// show writes a parameter's value as the answers quote it: numbers as
// numbers, lists in brackets, strings quoted.
func show(v any) string {
	switch x := v.(type) {
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1e15 {
			return fmt.Sprintf("%d", int64(x))
		}
		return fmt.Sprintf("%g", x)
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = show(e)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case string:
		return quotePath(x)
	case bool:
		return fmt.Sprint(x)
	case nil:
		return "null"
	}
	return "an object"
}
